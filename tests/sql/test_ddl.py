"""CREATE TABLE / CREATE INDEX of FlowTables per dialect, compared whole."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from flow_sqla._dialect import ModifyIdColumns, exact_collation
from flow_sqla.errors import RepositoryError
from flow_sqla.tables import FlowTables

KEYS = ["mysql", "mariadb", "postgresql", "sqlite"]


def _ddl(d: Dialect, tables: FlowTables) -> str:
    parts = []
    for table in (tables.repository, tables.task, tables.todo):
        parts.append(f"{str(CreateTable(table).compile(dialect=d)).strip()};\n")
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            parts.append(f"{CreateIndex(index).compile(dialect=d)};\n")
    return "\n".join(parts)


@pytest.mark.parametrize("key", KEYS)
def test_default_tables_render_the_reference_ddl(
    key: str, snapshot: Callable[[str, str], None], dialect_for: Callable[[str], Dialect]
) -> None:
    snapshot(f"ddl/{key}.sql", _ddl(dialect_for(key), FlowTables()))


@pytest.mark.parametrize("key", KEYS)
def test_custom_tables_derive_constraint_and_index_names(
    key: str, snapshot: Callable[[str, str], None], dialect_for: Callable[[str], Dialect]
) -> None:
    tables = FlowTables(repo_table="acme_repo", task_table="acme_task", schema="flow")
    snapshot(f"ddl/{key}_custom.sql", _ddl(dialect_for(key), tables))


def _server(key: str, version: tuple[int, ...], dialect_for: Callable[[str], Dialect]) -> Dialect:
    d = dialect_for(key)
    d.server_version_info = version
    return d


@pytest.mark.parametrize(
    ("key", "version", "expected"),
    [
        ("mariadb", (10, 11, 19), "utf8mb4_nopad_bin"),
        ("mysql", (8, 4, 0), "utf8mb4_0900_bin"),
        ("mysql", (5, 7, 44), "utf8mb4_bin"),
        ("postgresql", (15, 18), None),
        ("sqlite", (3, 40, 1), None),
    ],
)
def test_id_columns_get_a_binary_no_pad_collation_where_the_default_is_not_exact(
    key: str,
    version: tuple[int, ...],
    expected: str | None,
    dialect_for: Callable[[str], Dialect],
) -> None:
    d = _server(key, version, dialect_for)
    assert exact_collation(d) == expected
    column = str(CreateTable(FlowTables().repository).compile(dialect=d)).splitlines()[3]
    suffix = f" COLLATE {expected}" if expected else ""
    assert column.strip() == f"instant_id VARCHAR(64){suffix} NOT NULL,"


def test_a_mysql_url_that_reaches_mariadb_gets_the_mariadb_collation(
    dialect_for: Callable[[str], Dialect],
) -> None:
    d = dialect_for("mysql")
    d.is_mariadb = True  # what SQLAlchemy sets after connecting a mysql+...:// URL to MariaDB
    assert exact_collation(d) == "utf8mb4_nopad_bin"


@pytest.mark.parametrize("exact", [True, False])
def test_modify_id_columns_is_one_alter_per_table(
    exact: bool, snapshot: Callable[[str, str], None], dialect_for: Callable[[str], Dialect]
) -> None:
    stmt = ModifyIdColumns(
        "acme_task", ["flow_ins_id", "task_id"], length=64, exact=exact, schema="flow"
    )
    text = f"{stmt.compile(dialect=dialect_for('mariadb'))};\n"
    snapshot(f"ddl/modify_ids_{'exact' if exact else 'default'}.sql", text)
    assert text.count("ALTER TABLE") == 1


def test_modify_id_columns_refuses_other_dialects(dialect_for: Callable[[str], Dialect]) -> None:
    stmt = ModifyIdColumns("t", ["instant_id"], length=64, exact=True, schema=None)
    with pytest.raises(RepositoryError, match="MySQL/MariaDB only"):
        stmt.compile(dialect=dialect_for("postgresql"))
