"""The statements SqlStateRepository and TaskHistoryRecorder execute, compiled per dialect.

They are built once with bound parameters (each operation only binds values); the text is
checked in under ``expected/repository/``. The history INSERT must not fetch a generated key.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ClauseElement

from flow_sqla import SqlStateRepository, TaskHistoryRecorder

DIALECTS = ["mysql", "mysql8", "mariadb", "postgresql", "sqlite"]
HISTORY_COLUMNS = [
    "flow_ins_id",
    "proc_def_id",
    "task_id",
    "source_node_code",
    "source_node_name",
    "source_node_type",
    "target_node_code",
    "target_node_name",
    "target_node_type",
    "assignee",
    "status",
    "form_id",
    "variables",
    "message",
    "creator",
    "create_time",
]


def _engine(key: str, dialect_for: Callable[[str], Dialect]) -> sa.Engine:
    """An engine that never connects, carrying the snapshot's dialect object.

    The statements are only compiled, so no driver may be needed: the engine is made for the
    standard library's sqlite3 and then given the dialect under test.
    """
    engine = sa.create_engine("sqlite://")
    engine.dialect = dialect_for(key)
    return engine


def _text(stmt: object, d: Dialect, keys: list[str] | None = None) -> str:
    assert isinstance(stmt, ClauseElement)
    return f"{stmt.compile(dialect=d, column_keys=keys)}\n"


@pytest.mark.parametrize("key", DIALECTS)
def test_history_insert_compiles_to_the_checked_in_sql_without_returning(
    key: str,
    snapshot: Callable[[str, str], None],
    dialect_for: Callable[[str], Dialect],
) -> None:
    engine = _engine(key, dialect_for)
    text = _text(TaskHistoryRecorder(engine)._insert, engine.dialect, HISTORY_COLUMNS)
    assert "RETURNING" not in text
    snapshot(f"repository/{key}/history_insert.sql", text)


@pytest.mark.parametrize("key", DIALECTS)
def test_repository_statements_compile_to_the_checked_in_sql(
    key: str,
    snapshot: Callable[[str, str], None],
    dialect_for: Callable[[str], Dialect],
) -> None:
    engine = _engine(key, dialect_for)
    repo = SqlStateRepository(engine)
    parts = [
        "-- locking read, instance not known to this process",
        *(_text(s, engine.dialect) for s in repo._locking_statements(False)),
        "-- locking read, instance known",
        *(_text(s, engine.dialect) for s in repo._locking_statements(True)),
        "-- flush",
        _text(repo._upsert_statement(False), engine.dialect),
        "-- flush of a new instance (with its graph)",
        _text(repo._upsert_statement(True), engine.dialect),
    ]
    snapshot(f"repository/{key}/state_statements.sql", "\n".join(parts))
