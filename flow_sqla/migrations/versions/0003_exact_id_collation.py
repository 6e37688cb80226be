"""Make the id columns compare exactly: binary NO PAD collation on MySQL/MariaDB.

Revision ID: flow0003
Revises: flow0002
Create Date: 2026-12-02

The reference DDL gives every column the table collation ``utf8mb4_unicode_ci``, under which
``"Ab3xZ"``/``"ab3xz"``, ``"café-1"``/``"cafe-1"`` and ``"inv-7"``/``"inv-7 "`` are equal: two
instances would share one row and one history. This revision gives the id columns
``utf8mb4_nopad_bin`` (MariaDB) or ``utf8mb4_0900_bin`` (MySQL 8) with one ``ALTER TABLE ...
MODIFY`` per table (each table is rebuilt once). PostgreSQL and SQLite compare ids exactly
already: nothing to do there. Idempotent: running it on columns that have the collation
already changes nothing.

Downgrade restores ``VARCHAR(64) NOT NULL`` in the table's default collation; it fails with a
duplicate-key error if instance ids that differ only in case, accents or trailing spaces
exist by then (they would be one instance again).
"""

from __future__ import annotations

from alembic import op

from flow_sqla._dialect import ModifyIdColumns, exact_collation
from flow_sqla.migrations import revision_names
from flow_sqla.migrations._reference import EXACT_REPOSITORY_COLUMNS, EXACT_TASK_COLUMNS

revision = "flow0003"
down_revision = "flow0002"
branch_labels = None
depends_on = None

# Frozen on purpose (in _reference, shared with the adoption check): the columns this
# revision changes.
_REPOSITORY_COLUMNS = EXACT_REPOSITORY_COLUMNS
_TASK_COLUMNS = EXACT_TASK_COLUMNS
_LENGTH = 64


def _modify(*, exact: bool) -> None:
    if exact_collation(op.get_context().dialect) is None:
        return
    names = revision_names()
    for table, columns in (
        (names.repo_table, _REPOSITORY_COLUMNS),
        (names.task_table, _TASK_COLUMNS),
    ):
        op.execute(
            ModifyIdColumns(table, columns, length=_LENGTH, exact=exact, schema=names.schema)
        )


def upgrade() -> None:
    _modify(exact=True)


def downgrade() -> None:
    _modify(exact=False)
