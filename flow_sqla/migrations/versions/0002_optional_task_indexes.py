"""Add the OPTIONAL indexes on task(flow_ins_id) and task(assignee).

Revision ID: flow0002
Revises: flow0001
Create Date: 2026-12-01

Not in the reference DDL. They speed up ``history(instance_id)`` and ``by_assignee(...)`` on
large history tables; no code requires them, so a database created by the Go plugin without
them keeps working. Index names derive from the task table name (PostgreSQL index names are
per schema).
"""

from __future__ import annotations

from alembic import op

from flow_sqla.migrations import revision_names

revision = "flow0002"
down_revision = "flow0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    names = revision_names()
    op.create_index(names.flow_ins_id_index, names.task_table, ["flow_ins_id"], schema=names.schema)
    op.create_index(names.assignee_index, names.task_table, ["assignee"], schema=names.schema)


def downgrade() -> None:
    names = revision_names()
    op.drop_index(names.assignee_index, table_name=names.task_table, schema=names.schema)
    op.drop_index(names.flow_ins_id_index, table_name=names.task_table, schema=names.schema)
