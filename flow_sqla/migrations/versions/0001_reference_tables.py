"""Create the two reference tables (the Go plugin's ddl.sql, column for column).

Revision ID: flow0001
Revises:
Create Date: 2026-12-01

Hand-written: table and constraint names come from ``revision_names()`` at run time; the
column lists are frozen in ``flow_sqla.migrations._reference`` (shared with the check that
adopts tables the Go plugin created; later schema changes get their own revision).
"""

from __future__ import annotations

from alembic import op

from flow_sqla.migrations import revision_names
from flow_sqla.migrations._reference import TABLE_OPTIONS, repository_elements, task_elements

revision = "flow0001"
down_revision = None
branch_labels = ("flow_sqla",)
depends_on = None


def upgrade() -> None:
    names = revision_names()
    op.create_table(
        names.repo_table, *repository_elements(names), schema=names.schema, **TABLE_OPTIONS
    )
    op.create_table(names.task_table, *task_elements(), schema=names.schema, **TABLE_OPTIONS)


def downgrade() -> None:
    names = revision_names()
    op.drop_table(names.task_table, schema=names.schema)
    op.drop_table(names.repo_table, schema=names.schema)
