"""Rebuilding the task index for rows written without it (the Go plugin, ``index=False``, or
before revision ``flow0004``), in batches: one transaction per batch, resumable."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from flow.errors import GraphNotFoundError
from flow.graph import Graph
from flow_sqla._engine import engine_for
from flow_sqla.tables import FlowTables
from flow_sqla.wiring import sql_workflow

if TYPE_CHECKING:
    from flow.engine import FlowEngine
    from flow.workflow.controllers import StateController

#: Instances per transaction.
BATCH_SIZE = 500


def reindex(
    bind: Engine | str,
    engine: FlowEngine,
    *,
    state_controller: StateController,
    tables: FlowTables | None = None,
    batch_size: int = BATCH_SIZE,
    everything: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Compute status and open tasks of every instance whose row has none (NULL ``status``),
    ``batch_size`` rows per transaction, in ``id`` order; returns how many were indexed.

    Interrupted, it simply continues next time: indexed rows are no longer NULL. With
    ``everything=True`` every row is recomputed (after running with ``index=False`` or the Go
    plugin on the same tables). ``progress(rows_seen, indexed)`` is called after each batch.
    The graph of a row is the engine's graph with the stored graph's id (else the one in its
    state keys), else the stored graph itself; raises ``GraphNotFoundError`` naming the
    instance when there is none, ``SnapshotError`` for a malformed row — the batch is rolled
    back and the rows before it stay indexed.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    db = engine_for(bind)
    tables = tables or FlowTables()
    executor = sql_workflow(db, engine, state_controller=state_controller, tables=tables)
    repository: Any = executor.state_repository
    r = tables.repository
    stmt = sa.select(r.c.id, r.c.instant_id, r.c.graph, r.c.states).order_by(r.c.id)
    if not everything:
        stmt = stmt.where(r.c.status.is_(None))
    last, seen, indexed = 0, 0, 0
    while True:
        with db.begin() as conn:
            rows = conn.execute(stmt.where(r.c.id > last).limit(batch_size)).all()
            for row in rows:
                graph = _graph_of(engine, row.instant_id, row.graph, row.states)
                ctx = repository.restore_context(row.instant_id, connection=conn)
                indexed += executor.reindex(graph, ctx)
        if not rows:
            return indexed
        last = rows[-1].id
        seen += len(rows)
        if progress is not None:
            progress(seen, indexed)


def _graph_of(engine: FlowEngine, instance_id: str, doc: Any, states: Any) -> Graph:
    if isinstance(doc, str):  # a document encoded twice, or (Go plugin) the bare graph id
        text = doc.strip()
        doc = json.loads(text) if text.startswith("{") else {"id": text} if text else None
    graph_id = doc.get("id") if isinstance(doc, dict) else None
    if graph_id is None and isinstance(states, dict) and states:
        graph_id = str(next(iter(states))).split(":", 1)[0]
    loaded = engine.get_graph(graph_id) if isinstance(graph_id, str) else None
    if loaded is not None:
        return loaded
    if isinstance(doc, dict) and ("layout" in doc or "nodes" in doc):
        return Graph.from_dict(doc)
    raise GraphNotFoundError(f"{graph_id} (instance {instance_id!r})")


__all__ = ["BATCH_SIZE", "reindex"]
