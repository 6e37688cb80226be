"""CREATE TABLE / CREATE INDEX of FlowTables per dialect, compared whole."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from flow_sqla.tables import FlowTables

KEYS = ["mysql", "mariadb", "postgresql", "sqlite"]


def _ddl(d: Dialect, tables: FlowTables) -> str:
    parts = []
    for table in (tables.repository, tables.task):
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
