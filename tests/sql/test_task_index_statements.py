"""The task index's statements (aggregate.md §3), compiled per dialect from dialect objects
alone (no driver): the locking read and row update with the index columns, the open-task
writes, and the one-statement queries. Checked in under ``expected/task_index/``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ClauseElement

from flow.workflow import InstanceStatus
from flow_sqla._dialect import INDEX_COLUMNS, DialectOps
from flow_sqla._todo import TodoTable
from flow_sqla.tables import FlowTables

DIALECTS = ["mysql", "mysql8", "mariadb", "postgresql", "sqlite"]


def _text(stmt: object, d: Dialect, keys: list[str] | None = None) -> str:
    assert isinstance(stmt, ClauseElement)
    return f"{stmt.compile(dialect=d, column_keys=keys)}\n"


def _statements(d: Dialect) -> str:
    tables = FlowTables()
    ops = DialectOps(d, tables, index=True)
    todo = TodoTable(tables, keys_through_join=ops.keys_through_join)
    absent = {
        name: sa.bindparam(name)
        for name in ("instant_id", "creator", "create_time", "updater", "update_time")
    }
    values = {
        name: sa.bindparam(name)
        for name in ("states", "vars", "updater", "update_time", *INDEX_COLUMNS)
    }
    parts = [
        "-- locking read with the index columns (instance not known / known)",
        *(
            _text(s, d)
            for s in ops.locking_read(sa.bindparam("instant_id"), absent, row_known=False)
        ),
        *(
            _text(s, d)
            for s in ops.locking_read(sa.bindparam("instant_id"), absent, row_known=True)
        ),
        "-- flush of a locked row whose aggregate changed",
        _text(ops.update_row(sa.bindparam("row_key"), values), d),
        "-- open-task rows: delete, state update, insert (each one executemany)",
        _text(todo._delete, d),
        _text(todo._update, d),
        _text(todo._insert, d),
        *(
            [
                "-- open-task rows' insert on MySQL/MariaDB (keeps an instance's sentinel row)",
                _text(todo._insert_keeping_sentinel, d),
                "-- the same, two rows in one statement (sent together with the row's UPDATE)",
                _text(TodoTable(tables, sentinel=True)._insert_of(2), d),
            ]
            if d.name in ("mysql", "mariadb")
            else []
        ),
        "-- inbox page: one identity, first page",
        _text(todo.inbox_statement(["actor:ann"], None, 50, None), d),
        "-- inbox page: two identities, one graph, after a cursor",
        _text(todo.inbox_statement(["actor:ann", "role:boss"], "oa", 50, 1234), d),
        "-- open tasks of one instance",
        _text(todo.open_tasks_statement("i-1"), d),
        "-- status of one instance",
        _text(todo.status_statement("i-1"), d),
        "-- instances page: any status / running in one graph by a creator, after a cursor",
        _text(todo.instances_statement(None, None, None, 50, None), d),
        _text(todo.instances_statement(InstanceStatus.RUNNING, "oa", "ann", 50, 99), d),
    ]
    return "\n".join(parts)


@pytest.mark.parametrize("key", DIALECTS)
def test_task_index_statements_compile_to_the_checked_in_sql(
    key: str,
    snapshot: Callable[[str, str], None],
    dialect_for: Callable[[str], Dialect],
) -> None:
    text = _statements(dialect_for(key))
    assert "RETURNING" not in text.split("-- flush")[1]  # no generated key fetched on writes
    snapshot(f"task_index/{key}.sql", text)


@pytest.mark.parametrize("key", DIALECTS)
def test_open_task_writes_address_rows_by_their_whole_unique_key(
    key: str, dialect_for: Callable[[str], Dialect]
) -> None:
    """Deletes and updates never range over ``instant_id`` alone (InnoDB gap locks)."""
    d = dialect_for(key)
    todo = TodoTable(FlowTables())
    for stmt in (todo._delete, todo._update):
        where = str(stmt.compile(dialect=d)).split("WHERE", 1)[1]
        for column in ("instant_id", "node_id", "candidate"):
            assert f"{column} =" in where
