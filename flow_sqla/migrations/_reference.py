"""The schema of revision ``flow0001``: the Go plugin's ``ddl.sql``, frozen.

Shared by the revision that creates the two tables and by the adoption check that compares
tables created elsewhere (by the Go plugin, by hand) with them, so both always mean the same
schema. Frozen on purpose: a later schema change gets its own revision, never an edit here.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.schema import SchemaItem

from flow_sqla.tables import TableNames

#: The first revision: the two reference tables as the Go plugin's ``ddl.sql`` creates them.
REFERENCE_REVISION = "flow0001"
#: The revision that adds the optional history indexes (``TableNames.flow_ins_id_index`` and
#: ``TableNames.assignee_index``).
INDEX_REVISION = "flow0002"
#: The revision that gives the id columns an exact collation on MySQL/MariaDB.
EXACT_ID_REVISION = "flow0003"

#: The id columns revision ``flow0003`` makes exact, per table: the repository table's, then
#: the history table's. Shared by the revision and by the adoption check that tells whether
#: unrecorded tables have been through it.
EXACT_REPOSITORY_COLUMNS = ("instant_id",)
EXACT_TASK_COLUMNS = (
    "flow_ins_id",
    "proc_def_id",
    "task_id",
    "source_node_code",
    "target_node_code",
    "assignee",
)

TABLE_OPTIONS: dict[str, Any] = {
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


def repository_elements(names: TableNames) -> list[SchemaItem]:
    """Columns and unique key of the repository table (new objects on every call)."""
    return [
        _id(),
        sa.Column("instant_id", sa.String(64), nullable=False),
        sa.Column("graph", sa.JSON()),
        sa.Column("states", sa.JSON()),
        sa.Column("vars", sa.JSON()),
        *_audit(),
        sa.UniqueConstraint("instant_id", name=names.instant_id_unique),
    ]


def task_elements() -> list[SchemaItem]:
    """Columns of the history table (new objects on every call)."""
    return [
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
    ]


def reference_metadata(names: TableNames) -> sa.MetaData:
    """Both tables at ``flow0001`` on a new ``MetaData``, for comparing existing tables."""
    metadata = sa.MetaData()
    sa.Table(
        names.repo_table,
        metadata,
        *repository_elements(names),
        schema=names.schema,
        **TABLE_OPTIONS,
    )
    sa.Table(names.task_table, metadata, *task_elements(), schema=names.schema, **TABLE_OPTIONS)
    return metadata


__all__ = [
    "EXACT_ID_REVISION",
    "EXACT_REPOSITORY_COLUMNS",
    "EXACT_TASK_COLUMNS",
    "INDEX_REVISION",
    "REFERENCE_REVISION",
    "TABLE_OPTIONS",
    "reference_metadata",
    "repository_elements",
    "task_elements",
]
