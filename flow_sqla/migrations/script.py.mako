"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Hand-written: table names come from ``revision_names()`` at run time, never literals.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from flow_sqla.migrations import revision_names
${imports if imports else ""}
revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    names = revision_names()
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    names = revision_names()
    ${downgrades if downgrades else "pass"}
