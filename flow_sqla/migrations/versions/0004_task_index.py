"""The task index: instance status and open tasks (the approval aggregate).

Revision ID: flow0004
Revises: flow0003
Create Date: 2026-12-02

Additive only, so a Go service that names its columns keeps working on the same tables:
nullable ``graph_id``, ``status``, ``finish_time`` and ``open_tasks`` on the repository table
with an index on ``(status, graph_id, id)``; nullable ``action`` on the task table; the new
open-task table (one row per open task and candidate) with its unique key and its
``(candidate, id)`` index for the inbox. Id columns (graph, instance, node, candidate) are
created with the exact collation of revision ``flow0003`` on MySQL/MariaDB. Rows written
before (or by the Go plugin) have a NULL status until ``flow_sqla.reindex`` runs. The column
lists are frozen here on purpose.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import context, op

from flow_sqla._dialect import ExactString
from flow_sqla.migrations import revision_names
from flow_sqla.migrations._adopt import refuse_leftover_tables

revision = "flow0004"
down_revision = "flow0003"
branch_labels = None
depends_on = None

_TABLE_OPTIONS: dict[str, Any] = {
    f"{prefix}_{key}": value
    for prefix in ("mysql", "mariadb")
    for key, value in (
        ("engine", "InnoDB"),
        ("charset", "utf8mb4"),
        ("collate", "utf8mb4_unicode_ci"),
    )
}


def _json() -> sa.JSON:
    return sa.JSON(none_as_null=True)


def upgrade() -> None:
    names = revision_names()
    if not context.is_offline_mode():  # (SQL written for a DBA has no tables to look at)
        refuse_leftover_tables(op.get_bind(), names, down_revision)
    repo, schema = names.repo_table, names.schema
    op.add_column(repo, sa.Column("graph_id", ExactString(64)), schema=schema)
    op.add_column(repo, sa.Column("status", sa.Integer()), schema=schema)
    op.add_column(repo, sa.Column("finish_time", sa.DateTime()), schema=schema)
    op.add_column(repo, sa.Column("open_tasks", _json()), schema=schema)
    op.create_index(names.status_index, repo, ["status", "graph_id", "id"], schema=schema)
    op.add_column(names.task_table, sa.Column("action", sa.Integer()), schema=schema)
    op.create_table(
        names.todo_table,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("instant_id", ExactString(64), nullable=False),
        sa.Column("graph_id", ExactString(64), nullable=False),
        sa.Column("node_id", ExactString(64), nullable=False),
        sa.Column("node_name", sa.String(64)),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("candidate", ExactString(128), nullable=False),
        sa.Column("lineage", _json()),
        sa.Column("create_time", sa.DateTime()),
        sa.UniqueConstraint("instant_id", "node_id", "candidate", name=names.todo_unique),
        schema=schema,
        # Ids are inbox cursors: never reused on SQLite either (see FlowTables).
        sqlite_autoincrement=True,
        **_TABLE_OPTIONS,
    )
    op.create_index(names.candidate_index, names.todo_table, ["candidate", "id"], schema=schema)


def downgrade() -> None:
    names = revision_names()
    repo, schema = names.repo_table, names.schema
    op.drop_index(names.candidate_index, table_name=names.todo_table, schema=schema)
    op.drop_table(names.todo_table, schema=schema)
    op.drop_column(names.task_table, "action", schema=schema)
    op.drop_index(names.status_index, table_name=repo, schema=schema)
    for column in ("open_tasks", "finish_time", "status", "graph_id"):
        op.drop_column(repo, column, schema=schema)
