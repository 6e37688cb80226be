"""One call that wires the SQL repository and the history recorder into an executor."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from flow.codec import CodecLimits
from flow.workflow.executor import WorkflowExecutor
from flow_sqla import _options as options
from flow_sqla._engine import engine_for
from flow_sqla._vars import DEFAULT_IDENTITY_KEYS
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
    plain_json: bool = False,
    limits: CodecLimits | None = None,
    max_steps: int | None = WorkflowExecutor.MAX_STEPS,
    index: bool = True,
    vars_filter: Iterable[str] | None = None,
) -> WorkflowExecutor:
    """A :class:`WorkflowExecutor` whose states live in ``bpm_flow_repository`` and whose
    submits are recorded in ``bpm_flow_task``, both on one ``Engine`` (created once when
    ``bind`` is a URL), so a submit's state change and history row share one transaction.
    The repository resolves graphs stored only as their id through ``engine``.

    ``plain_json=True`` stores dates, times, decimals and UUIDs as plain JSON strings in both
    tables (for fleets shared with Go services; such values read back as ``str``); ``limits``
    bounds the stored variables (:class:`flow.codec.CodecLimits`). ``max_steps`` is the
    executor's step budget per walk (see :class:`WorkflowExecutor`).

    ``index=True`` (default; needs revision ``flow0004``) also keeps instance status and open
    tasks in that transaction, for ``inbox``/``instances``/``withdraw``/``send_back``.
    ``index=False`` uses the two reference tables only (a Go-plugin-compatible deployment);
    those calls then raise :class:`~flow.workflow.IndexUnavailableError`.

    The stored variables leave out the identity keys (``actor``, ``auditor``, ``creator``)
    and the controller's own ``keys`` (``ActorStateController("actor", "role")``: ``role``):
    who acts belongs to the request, and a stored ``role`` would be merged into the next
    caller's context and let someone without it claim the role's task. A gateway that routes
    on such a key must find it in each submitting context; ``vars_filter`` replaces the
    whole set (see :class:`SqlStateRepository`). The history rows leave out the same keys.
    A wrongly typed option raises ``TypeError`` naming it."""
    db = engine_for(bind)
    tables = tables or FlowTables()
    # The history rows leave out the same keys as the instance row (a role, a secret).
    excluded = options.context_keys("vars_filter", vars_filter)
    if excluded is None:
        excluded = identity_keys(state_controller)
    return WorkflowExecutor(
        engine,
        state_controller,
        SqlStateRepository(
            db,
            tables,
            cache=cache,
            flow_engine=engine,
            plain_json=plain_json,
            limits=limits,
            index=index,
            vars_filter=excluded,
        ),
        recorder=TaskHistoryRecorder(
            db, tables, plain_json=plain_json, limits=limits, index=index, vars_filter=excluded
        ),
        max_steps=max_steps,
    )


def identity_keys(state_controller: object) -> frozenset[str]:
    """The context keys never stored in ``vars``: the default identity keys and the
    controller's ``keys`` attribute when it has one (as :class:`ActorStateController`)."""
    keys = getattr(state_controller, "keys", ())
    if not isinstance(keys, tuple | list | frozenset | set):
        keys = ()
    return DEFAULT_IDENTITY_KEYS | {k for k in keys if isinstance(k, str)}


__all__ = ["identity_keys", "sql_workflow"]
