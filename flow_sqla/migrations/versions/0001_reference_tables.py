"""Create the two reference tables (the Go plugin's ddl.sql, column for column).

Revision ID: flow0001
Revises:
Create Date: 2026-12-01

Hand-written: table and constraint names come from ``revision_names()`` at run time; the
column list is frozen here on purpose (later schema changes get their own revision).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from flow_sqla.migrations import revision_names

revision = "flow0001"
down_revision = None
branch_labels = ("flow_sqla",)
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


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True)


def _audit() -> list[sa.Column[Any]]:
    return [
        sa.Column("creator", sa.String(64)),
        sa.Column("create_time", sa.DateTime()),
        sa.Column("updater", sa.String(64)),
        sa.Column("update_time", sa.DateTime()),
    ]


def upgrade() -> None:
    names = revision_names()
    op.create_table(
        names.repo_table,
        _id(),
        sa.Column("instant_id", sa.String(64), nullable=False),
        sa.Column("graph", sa.JSON()),
        sa.Column("states", sa.JSON()),
        sa.Column("vars", sa.JSON()),
        *_audit(),
        sa.UniqueConstraint("instant_id", name=names.instant_id_unique),
        schema=names.schema,
        **_TABLE_OPTIONS,
    )
    op.create_table(
        names.task_table,
        _id(),
        sa.Column("flow_ins_id", sa.String(64), nullable=False),
        sa.Column("proc_def_id", sa.String(64), nullable=False),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("source_node_code", sa.String(64), nullable=False),
        sa.Column("source_node_name", sa.String(64)),
        sa.Column("source_node_type", sa.String(64), nullable=False),
        sa.Column("target_node_code", sa.String(64), nullable=False),
        sa.Column("target_node_name", sa.String(64), nullable=False),
        sa.Column("target_node_type", sa.String(64), nullable=False),
        sa.Column("assignee", sa.String(64), nullable=False),
        sa.Column("status", sa.Integer()),
        sa.Column("form_id", sa.BigInteger()),
        sa.Column("variables", sa.JSON()),
        sa.Column("message", sa.Text()),
        *_audit(),
        schema=names.schema,
        **_TABLE_OPTIONS,
    )


def downgrade() -> None:
    names = revision_names()
    op.drop_table(names.task_table, schema=names.schema)
    op.drop_table(names.repo_table, schema=names.schema)
