"""DialectOps without a database: argument checks and lock-conflict recognition."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from flow_sqla import FlowTables, RepositoryError
from flow_sqla._dialect import DialectOps, json_dumps


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def _dialect(url: str) -> Dialect:
    return sa.make_url(url).get_dialect()()


def _wrapped(orig: BaseException) -> sa.exc.OperationalError:
    return sa.exc.OperationalError("SELECT 1", {}, orig)


def test_upsert_refuses_to_write_the_id_column() -> None:
    ops = DialectOps(_dialect("mysql+mysqldb://"), FlowTables())
    with pytest.raises(RepositoryError, match="id"):
        ops.upsert({"instant_id": "i", "id": 1}, ["states"])


def test_upsert_refuses_unknown_columns() -> None:
    ops = DialectOps(_dialect("postgresql+psycopg://"), FlowTables())
    with pytest.raises(RepositoryError, match="nope"):
        ops.upsert({"instant_id": "i"}, ["nope"])


def test_unsupported_dialect_is_a_repository_error() -> None:
    with pytest.raises(RepositoryError, match="mssql"):
        DialectOps(_dialect("mssql+pyodbc://"), FlowTables())


@pytest.mark.parametrize("code", [1205, 1213, 3572])
def test_mysql_lock_errors_are_lock_conflicts(code: int) -> None:
    ops = DialectOps(_dialect("mysql+mysqldb://"), FlowTables())
    assert ops.is_lock_conflict(_wrapped(Exception(code, "lock")))


def test_mysql_duplicate_key_is_not_a_lock_conflict() -> None:
    ops = DialectOps(_dialect("mysql+mysqldb://"), FlowTables())
    assert not ops.is_lock_conflict(_wrapped(Exception(1062, "Duplicate entry")))


@pytest.mark.parametrize("sqlstate", ["40P01", "55P03", "40001"])
def test_postgresql_lock_sqlstates_are_lock_conflicts(sqlstate: str) -> None:
    ops = DialectOps(_dialect("postgresql+psycopg://"), FlowTables())
    assert ops.is_lock_conflict(_wrapped(_PgError(sqlstate)))


def test_postgresql_unique_violation_is_not_a_lock_conflict() -> None:
    ops = DialectOps(_dialect("postgresql+psycopg://"), FlowTables())
    assert not ops.is_lock_conflict(_wrapped(_PgError("23505")))


@pytest.mark.parametrize("message", ["database is locked", "database table is locked"])
def test_sqlite_busy_is_a_lock_conflict(message: str) -> None:
    ops = DialectOps(_dialect("sqlite://"), FlowTables())
    assert ops.is_lock_conflict(sqlite3.OperationalError(message))


def test_sqlite_other_errors_are_not_lock_conflicts() -> None:
    ops = DialectOps(_dialect("sqlite://"), FlowTables())
    assert not ops.is_lock_conflict(_wrapped(sqlite3.OperationalError("no such table: x")))


def test_locking_read_on_sqlite_is_one_write_statement() -> None:
    ops = DialectOps(_dialect("sqlite://"), FlowTables())
    assert len(ops.locking_read("i", {"instant_id": "i"}, row_known=False)) == 1


def test_locking_read_skips_the_insert_when_the_row_is_known() -> None:
    ops = DialectOps(_dialect("postgresql+psycopg://"), FlowTables())
    assert len(ops.locking_read("i", {"instant_id": "i"}, row_known=False)) == 2
    assert len(ops.locking_read("i", {"instant_id": "i"}, row_known=True)) == 1


def test_json_dumps_keeps_text_readable_and_rejects_nan() -> None:
    assert json_dumps({"name": "流程", "n": [1, 2]}) == '{"name":"流程","n":[1,2]}'
    with pytest.raises(ValueError):
        json_dumps({"x": float("nan")})
