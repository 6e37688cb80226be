"""FlowTables: reference columns, configurable names, identifier validation."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from flow.errors import FlowError
from flow_sqla import FlowTables, InvalidIdentifierError
from flow_sqla.tables import TableNames

REPO_COLUMNS = [
    ("id", False),
    ("instant_id", False),
    ("graph", True),
    ("states", True),
    ("vars", True),
    ("creator", True),
    ("create_time", True),
    ("updater", True),
    ("update_time", True),
]
TASK_COLUMNS = [
    ("id", False),
    ("flow_ins_id", False),
    ("proc_def_id", False),
    ("task_id", False),
    ("source_node_code", False),
    ("source_node_name", True),
    ("source_node_type", False),
    ("target_node_code", False),
    ("target_node_name", False),
    ("target_node_type", False),
    ("assignee", False),
    ("status", True),
    ("form_id", True),
    ("variables", True),
    ("message", True),
    ("creator", True),
    ("create_time", True),
    ("updater", True),
    ("update_time", True),
]


def test_repository_table_has_the_reference_columns_in_order() -> None:
    table = FlowTables().repository
    assert table.name == "bpm_flow_repository"
    columns = [(c.name, c.nullable) for c in table.columns]
    # The reference columns first, in order; then the task index's nullable additions.
    assert columns[: len(REPO_COLUMNS)] == REPO_COLUMNS
    assert columns[len(REPO_COLUMNS) :] == [
        ("graph_id", True),
        ("status", True),
        ("finish_time", True),
        ("open_tasks", True),
    ]


def test_task_table_has_the_reference_columns_in_order() -> None:
    table = FlowTables().task
    assert table.name == "bpm_flow_task"
    assert [(c.name, c.nullable) for c in table.columns] == [*TASK_COLUMNS, ("action", True)]


def test_todo_table_has_its_unique_key_and_inbox_index() -> None:
    tables = FlowTables()
    todo = tables.todo
    assert todo.name == "bpm_flow_todo"
    uniques = [c for c in todo.constraints if isinstance(c, sa.UniqueConstraint)]
    assert [(u.name, [c.name for c in u.columns]) for u in uniques] == [
        ("uq_bpm_flow_todo_task", ["instant_id", "node_id", "candidate"])
    ]
    assert [(i.name, [c.name for c in i.columns]) for i in todo.indexes] == [
        ("ix_bpm_flow_todo_candidate", ["candidate", "id"])
    ]
    assert [(i.name, [c.name for c in i.columns]) for i in tables.repository.indexes] == [
        ("ix_bpm_flow_repository_status", ["status", "graph_id", "id"])
    ]


def test_default_repository_keeps_the_reference_unique_key_name() -> None:
    uniques = [c for c in FlowTables().repository.constraints if isinstance(c, sa.UniqueConstraint)]
    assert [(u.name, [c.name for c in u.columns]) for u in uniques] == [
        ("uniq_instantId", ["instant_id"])
    ]


def test_custom_names_derive_constraint_and_index_names_from_the_table() -> None:
    tables = FlowTables(repo_table="acme_repo", task_table="acme_task")
    uniques = {c.name for c in tables.repository.constraints if isinstance(c, sa.UniqueConstraint)}
    assert uniques == {"uq_acme_repo_instant_id"}
    assert {i.name for i in tables.task.indexes} == {
        "ix_acme_task_flow_ins_id",
        "ix_acme_task_assignee",
    }


def test_json_none_is_stored_as_sql_null() -> None:
    graph_type = FlowTables().repository.c.graph.type
    assert isinstance(graph_type, sa.JSON)
    assert graph_type.none_as_null


def test_tables_share_a_given_metadata() -> None:
    metadata = sa.MetaData()
    FlowTables(metadata)
    FlowTables(metadata, repo_table="acme_repo", task_table="acme_task")
    assert set(metadata.tables) == {
        "bpm_flow_repository",
        "bpm_flow_task",
        "bpm_flow_todo",
        "acme_repo",
        "acme_task",
        "acme_repo_todo",
    }


def test_schema_is_applied_to_both_tables() -> None:
    tables = FlowTables(schema="flow")
    assert (tables.repository.schema, tables.task.schema) == ("flow", "flow")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"repo_table": "x;drop"},
        {"task_table": "bpm flow"},
        {"repo_table": ""},
        {"task_table": "1task"},
        {"schema": "public; DROP TABLE x"},
        {"repo_table": "a" * 64},
    ],
)
def test_bad_identifier_is_rejected_naming_it(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidIdentifierError) as info:
        FlowTables(**kwargs)
    (value,) = kwargs.values()
    assert info.value.identifier == value
    assert repr(value) in str(info.value)


def test_invalid_identifier_error_is_a_value_error_and_a_flow_error() -> None:
    with pytest.raises(ValueError):
        FlowTables(repo_table="x;drop")
    assert issubclass(InvalidIdentifierError, FlowError)


def test_table_name_whose_derived_names_are_too_long_is_rejected() -> None:
    with pytest.raises(InvalidIdentifierError, match="choose a shorter table name"):
        FlowTables(repo_table="r" * 55)


def test_version_table_is_flow_alembic_version_for_default_names() -> None:
    assert TableNames.create().version_table == "flow_alembic_version"


def test_version_table_follows_a_custom_repo_table_name() -> None:
    names = TableNames.create(repo_table="acme_repo", task_table="acme_task")
    assert names.version_table == "acme_repo_alembic_version"


def test_custom_task_table_alone_also_gets_its_own_version_table() -> None:
    assert TableNames.create(task_table="acme_task").version_table == (
        "bpm_flow_repository_alembic_version"
    )


def test_bad_version_table_is_rejected() -> None:
    with pytest.raises(InvalidIdentifierError, match="version table"):
        TableNames.create(version_table="v-1")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"repo_table": "same", "task_table": "same"},
        {"repo_table": "r1", "task_table": "t1", "todo_table": "t1"},
        {"repo_table": "r1", "task_table": "t1", "version_table": "r1"},
        {"repo_table": "r1", "task_table": "t1", "version_table": "T1"},
        {"repo_table": "r1", "task_table": "r1_todo"},  # the todo table derived from r1
    ],
)
def test_one_table_named_for_two_roles_is_rejected_before_any_sql(kwargs: dict[str, Any]) -> None:
    """SQLAlchemy refused the second definition with its own error, and a migration created
    part of the set first (MariaDB commits each DDL statement)."""
    with pytest.raises(InvalidIdentifierError, match="must name different tables"):
        TableNames.create(**kwargs)
    table_kwargs = {k: v for k, v in kwargs.items() if k != "version_table"}
    if "version_table" not in kwargs:
        with pytest.raises(InvalidIdentifierError, match="must name different tables"):
            FlowTables(**table_kwargs)
