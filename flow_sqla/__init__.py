"""``flow_sqla`` — persistence for ``flow`` on SQLAlchemy Core (MySQL/MariaDB, PostgreSQL, SQLite).

The tables match the Go plugin's reference DDL; migrations ship in :mod:`flow_sqla.migrations`.
"""

from __future__ import annotations

from flow.errors import SnapshotError
from flow_sqla.errors import (
    AutocommitError,
    ColumnDifference,
    CommitOutcomeUnknownError,
    IdCollationError,
    InvalidArgumentError,
    InvalidIdentifierError,
    MigrationLockError,
    RepositoryError,
    SchemaMismatchError,
    StaleCacheError,
    TransactionEndedError,
    UnstorableGraphError,
    UnstorableValueError,
)

# --- repository / history (added by the repository engineer) -------------------------------
from flow_sqla.history import HistoryEntry, TaskHistoryRecorder
from flow_sqla.reindex import reindex
from flow_sqla.repository import Snapshot, SqlStateRepository
from flow_sqla.retry import is_retryable, run_in_transaction
from flow_sqla.tables import FlowTables
from flow_sqla.wiring import sql_workflow

# ---------------------------------------------------------------------------------------------

__all__ = [
    "AutocommitError",
    "ColumnDifference",
    "CommitOutcomeUnknownError",
    "FlowTables",
    "HistoryEntry",
    "IdCollationError",
    "InvalidArgumentError",
    "InvalidIdentifierError",
    "MigrationLockError",
    "RepositoryError",
    "SchemaMismatchError",
    "Snapshot",
    "SnapshotError",
    "SqlStateRepository",
    "StaleCacheError",
    "TaskHistoryRecorder",
    "TransactionEndedError",
    "UnstorableGraphError",
    "UnstorableValueError",
    "is_retryable",
    "reindex",
    "run_in_transaction",
    "sql_workflow",
]
