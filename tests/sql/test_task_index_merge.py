"""Which todo changes ride along in the instance row's UPDATE (``TodoChanges.shape``), and
that the merged statements compile to one statement per dialect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from flow_sqla._todo import TodoChanges, TodoTable
from flow_sqla.tables import FlowTables


def _key(node: str, candidate: str, state: int | None = None) -> dict[str, Any]:
    key: dict[str, Any] = {"k_instant_id": "i-1", "k_node_id": node, "k_candidate": candidate}
    if state is not None:
        key["k_state"] = state
    return key


def _row(node: str, candidate: str) -> dict[str, Any]:
    return {"instant_id": "i-1", "node_id": node, "candidate": candidate}


def test_no_change_is_never_merged() -> None:
    assert TodoChanges().shape("cte") is None
    assert TodoChanges().shape("join_update") is None


def test_a_claim_merges_on_both_dialect_families() -> None:
    claim = TodoChanges(updated=[_key("manager", "u1", 1001), _key("manager", "u2", 1001)])
    assert claim.shape("join_update") == (0, 2, 0)
    assert claim.shape("cte") == (0, 2, 0)
    assert claim.joined_rowcount() == 3
    assert claim.params()["u_state"] == 1001


def test_re_stating_rows_to_different_states_is_not_merged() -> None:
    mixed = TodoChanges(updated=[_key("a", "u1", 1001), _key("b", "u1", 0)])
    assert mixed.shape("cte") is None and mixed.shape("join_update") is None


def test_a_forward_merges_only_as_ctes() -> None:
    forward = TodoChanges(deleted=[_key("employee", "u1")], inserted=[_row("manager", "u2")])
    assert forward.shape("cte") == (1, 0, 1)
    assert forward.shape("join_update") is None


def test_a_key_deleted_and_inserted_again_is_not_merged() -> None:
    """The CTEs share one snapshot: the INSERT would meet the row its sibling deletes."""
    again = TodoChanges(deleted=[_key("manager", "u2")], inserted=[_row("manager", "u2")])
    assert again.shape("cte") is None


@pytest.mark.parametrize(("key", "how"), [("postgresql", "cte"), ("mariadb", "join_update")])
def test_merged_statements_compile_to_one_statement(
    key: str, how: Any, dialect_for: Callable[[str], Dialect]
) -> None:
    tables = FlowTables()
    repo = tables.repository
    update = (
        sa.update(repo)
        .where(repo.c.instant_id == sa.bindparam("row_key", type_=repo.c.instant_id.type))
        .values(states=sa.bindparam("states", type_=repo.c.states.type))
    )
    changes = TodoChanges(updated=[_key("manager", "u1", 1001)])
    if how == "cte":
        changes.deleted.append(_key("employee", "u1"))
        changes.inserted.append(_row("director", "u3"))
    todo = TodoTable(tables)
    merged = todo.merged(update, changes, how)
    assert merged is not None
    assert todo.merged(update, changes, how) is merged  # built once per shape
    sql = str(merged.compile(dialect=dialect_for(key)))
    assert sql.count(";") == 0
    if how == "cte":
        assert sql.startswith("WITH todo_closed AS")
        assert "DELETE FROM bpm_flow_todo" in sql and "INSERT INTO bpm_flow_todo" in sql
    else:
        assert sql.startswith("UPDATE bpm_flow_repository, bpm_flow_todo SET")


def test_more_rows_than_one_merged_statement_carries_take_separate_statements() -> None:
    from flow_sqla._todo import MERGE_ROWS

    rows = [_row("manager", f"u{n}") for n in range(MERGE_ROWS + 1)]
    assert TodoChanges(inserted=rows[:MERGE_ROWS]).shape("cte") == (0, 0, MERGE_ROWS)
    assert TodoChanges(inserted=rows).shape("cte") is None
