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


def test_a_forward_merges_as_ctes_and_as_a_re_key_of_a_row_opened_in_this_transaction() -> None:
    """MySQL re-uses a closed row only when the caller's transaction inserted it itself."""
    forward = TodoChanges(deleted=[_key("employee", "u1")], inserted=[_row("manager", "u2")])
    assert forward.shape("cte") == (1, 0, 1)
    assert forward.shape("join_update") is None
    assert forward.shape("join_update", frozenset({("manager", "u2")})) is None
    assert forward.shape("join_update", frozenset({("employee", "u1")})) == (1, 0, 1)
    assert forward.joined_rowcount() == 2
    assert forward.opened_here_after(frozenset({("employee", "u1")})) == {("manager", "u2")}


def test_only_one_closed_row_and_one_opened_are_re_keyed() -> None:
    opened_here = frozenset({("employee", "u1"), ("employee", "u2")})
    two = TodoChanges(
        deleted=[_key("employee", "u1"), _key("employee", "u2")],
        inserted=[_row("manager", "u3"), _row("manager", "u4")],
    )
    assert two.shape("join_update", opened_here) is None
    closing = TodoChanges(deleted=[_key("employee", "u1")])
    assert closing.shape("join_update", opened_here) is None


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


def test_the_re_key_sets_every_column_of_the_opened_row_but_its_instance(
    dialect_for: Callable[[str], Dialect],
) -> None:
    tables = FlowTables()
    repo = tables.repository
    update = (
        sa.update(repo)
        .where(repo.c.instant_id == sa.bindparam("row_key", type_=repo.c.instant_id.type))
        .values(states=sa.bindparam("states", type_=repo.c.states.type))
    )
    changes = TodoChanges(deleted=[_key("employee", "u1")], inserted=[_row("manager", "u2")])
    merged = TodoTable(tables).merged(
        update, changes, "join_update", frozenset({("employee", "u1")})
    )
    assert merged is not None
    sql = str(merged.compile(dialect=dialect_for("mariadb")))
    assert sql.startswith("UPDATE bpm_flow_repository, bpm_flow_todo SET")
    for column in (
        "graph_id",
        "node_id",
        "node_name",
        "state",
        "candidate",
        "lineage",
        "create_time",
    ):
        assert f"bpm_flow_todo.{column}=%s" in sql, column
    assert "bpm_flow_todo.instant_id=%s" not in sql.split(" WHERE ")[0]
    assert "DELETE" not in sql and "INSERT" not in sql


def test_more_rows_than_one_merged_statement_carries_take_separate_statements() -> None:
    from flow_sqla._todo import MERGE_ROWS

    rows = [_row("manager", f"u{n}") for n in range(MERGE_ROWS + 1)]
    assert TodoChanges(inserted=rows[:MERGE_ROWS]).shape("cte") == (0, 0, MERGE_ROWS)
    assert TodoChanges(inserted=rows).shape("cte") is None
