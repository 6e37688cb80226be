"""Every statement the dialect module issues, compiled per dialect, text and parameters."""

from __future__ import annotations

import datetime as dt
import pprint
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ClauseElement

from flow_sqla._dialect import DialectOps
from flow_sqla.tables import FlowTables

WHEN = dt.datetime(2026, 1, 2, 3, 4, 5)
NEW_ROW: dict[str, Any] = {
    "instant_id": "i-1",
    "graph": {"id": "leave", "nodes": [{"id": "start", "type": "start"}]},
    "states": {"leave:n1": 1001},
    "vars": {"days": 3, "name": "流程"},
    "creator": "alice",
    "create_time": WHEN,
    "updater": "alice",
    "update_time": WHEN,
}
UPDATE_COLUMNS = ["states", "vars", "updater", "update_time"]


def _statements(ops: DialectOps) -> dict[str, list[Executable]]:
    return {
        "upsert": [ops.upsert(NEW_ROW, UPDATE_COLUMNS)],
        "ensure_row": [ops.ensure_row(NEW_ROW)],
        "locking_read_new": ops.locking_read("i-1", NEW_ROW, row_known=False),
        "locking_read_known": ops.locking_read("i-1", NEW_ROW, row_known=True),
        "plain_read": [ops.plain_read("i-1")],
    }


def _render(d: Dialect, statements: list[Executable]) -> str:
    parts = []
    for stmt in statements:
        assert isinstance(stmt, ClauseElement)
        compiled = stmt.compile(dialect=d)
        params = pprint.pformat(compiled.params, sort_dicts=True)
        parts.append(f"{compiled}\n-- params:\n{params}\n")
    return "\n".join(parts)


@pytest.mark.parametrize("key", ["mysql", "mysql8", "mariadb", "postgresql", "sqlite"])
@pytest.mark.parametrize(
    "statement", ["upsert", "ensure_row", "locking_read_new", "locking_read_known", "plain_read"]
)
def test_statement_compiles_to_the_checked_in_sql(
    key: str,
    statement: str,
    snapshot: Callable[[str, str], None],
    dialect_for: Callable[[str], Dialect],
) -> None:
    d = dialect_for(key)
    ops = DialectOps(d, FlowTables())
    snapshot(f"statements/{key}/{statement}.sql", _render(d, _statements(ops)[statement]))


@pytest.mark.parametrize("key", ["mysql", "mariadb", "postgresql"])
def test_statements_on_custom_table_names_use_those_names(
    key: str, snapshot: Callable[[str, str], None], dialect_for: Callable[[str], Dialect]
) -> None:
    d = dialect_for(key)
    ops = DialectOps(d, FlowTables(repo_table="acme_repo", task_table="acme_task"))
    sql = _render(d, [ops.upsert(NEW_ROW, UPDATE_COLUMNS)])
    snapshot(f"statements/{key}/upsert_custom_names.sql", sql)
