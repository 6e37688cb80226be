"""Where the migrations take table names from: -x arguments, then environment, then defaults."""

from __future__ import annotations

import pytest

from flow_sqla import InvalidIdentifierError
from flow_sqla.migrations import resolve_names


def test_defaults_use_the_reference_tables_and_flow_alembic_version() -> None:
    names = resolve_names({}, {})
    assert (names.repo_table, names.task_table, names.version_table) == (
        "bpm_flow_repository",
        "bpm_flow_task",
        "flow_alembic_version",
    )


def test_environment_names_apply_without_x_arguments() -> None:
    names = resolve_names({}, {"FLOW_REPO_TABLE": "env_repo", "FLOW_TASK_TABLE": "env_task"})
    assert (names.repo_table, names.task_table, names.version_table) == (
        "env_repo",
        "env_task",
        "env_repo_alembic_version",
    )


def test_x_arguments_win_over_the_environment() -> None:
    names = resolve_names(
        {"repo_table": "x_repo", "schema": "flow", "version_table": "x_version"},
        {"FLOW_REPO_TABLE": "env_repo"},
    )
    assert (names.repo_table, names.schema, names.version_table) == ("x_repo", "flow", "x_version")


def test_a_bad_name_from_the_command_line_is_rejected_before_any_sql() -> None:
    with pytest.raises(InvalidIdentifierError, match="x;drop"):
        resolve_names({"repo_table": "x;drop"}, {})


def test_schema_differences_are_listed_in_a_stable_order() -> None:
    """The schema comparison finds differences in set order: the error lists them by table
    and column, so two runs on the same tables print the same message."""
    from flow_sqla.errors import ColumnDifference, SchemaMismatchError

    found = [
        ColumnDifference(table="bpm_flow_task", column="zeta", kind="extra", found="TEXT"),
        ColumnDifference(table="bpm_flow_repository", column="beta", kind="extra", found="INT"),
        ColumnDifference(table="typo_task", column=None, kind="missing table"),
        ColumnDifference(table="bpm_flow_task", column="alpha", kind="extra", found="INT"),
    ]
    forwards = SchemaMismatchError(found, revision="flow0001")
    backwards = SchemaMismatchError(reversed(found), revision="flow0001")
    assert str(forwards) == str(backwards)
    # A missing table first: the likely cause of the rest.
    assert [(d.table, d.column) for d in forwards.differences] == [
        ("typo_task", None),
        ("bpm_flow_repository", "beta"),
        ("bpm_flow_task", "alpha"),
        ("bpm_flow_task", "zeta"),
    ]
