"""One call that wires the SQL repository and the history recorder into an executor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from flow.workflow.executor import WorkflowExecutor
from flow_sqla._engine import engine_for
from flow_sqla.history import TaskHistoryRecorder
from flow_sqla.repository import CacheMode, SqlStateRepository
from flow_sqla.tables import FlowTables

if TYPE_CHECKING:
    from flow.engine import FlowEngine
    from flow.workflow.controllers import StateController


def sql_workflow(
    bind: Engine | str,
    engine: FlowEngine,
    *,
    state_controller: StateController | None = None,
    tables: FlowTables | None = None,
    cache: CacheMode = "operation",
) -> WorkflowExecutor:
    """A :class:`WorkflowExecutor` whose states live in ``bpm_flow_repository`` and whose
    submits are recorded in ``bpm_flow_task``, both on one ``Engine`` (created once when
    ``bind`` is a URL), so a submit's state change and history row share one transaction.
    The repository resolves graphs stored only as their id through ``engine``."""
    db = engine_for(bind)
    tables = tables or FlowTables()
    return WorkflowExecutor(
        engine,
        state_controller,
        SqlStateRepository(db, tables, cache=cache, flow_engine=engine),
        recorder=TaskHistoryRecorder(db, tables),
    )


__all__ = ["sql_workflow"]
