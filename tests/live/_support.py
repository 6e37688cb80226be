"""Helpers shared by the live flow_sqla tests and their worker processes (spawn-importable)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from flow.context import FlowContext
from flow.engine import FlowEngine
from flow.graph import Graph
from flow.workflow import ActorStateController, TaskAction, WorkflowExecutor
from flow_sqla import migrations
from flow_sqla.wiring import sql_workflow

OA_FILE = Path(__file__).resolve().parents[2] / "examples" / "oa.yml"


def oa_graph() -> Graph:
    return Graph.from_file(OA_FILE)


def flow_engine() -> FlowEngine:
    engine = FlowEngine()
    engine.load(oa_graph())
    return engine


def migrate(engine: sa.Engine) -> sa.Engine:
    migrations.upgrade(engine)
    return engine


def executor(
    bind: sa.Engine | str, *, cache: str = "operation", index: bool = False
) -> WorkflowExecutor:
    """The OA executor; ``index=False`` by default: most live tests pin the reference
    tables' behaviour (the task index has its own tests)."""
    return sql_workflow(
        bind,
        flow_engine(),
        state_controller=ActorStateController(),
        cache=cache,  # type: ignore[arg-type]
        index=index,
    )


def ctx(instance_id: str, actor: str, conn: Any = None, **data: Any) -> FlowContext:
    return FlowContext.of(instance_id, {"actor": actor, **data}, connection=conn)


def approve(ex: WorkflowExecutor, instance_id: str, actor: str, **data: Any) -> bool:
    """Claim the task ``actor`` may operate and forward it if it is still waiting."""
    c = ctx(instance_id, actor, **data)
    task = ex.claim_task("oa", c)
    return ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def raw_row(engine: sa.Engine, instance_id: str) -> dict[str, Any] | None:
    """The repository row read with plain SQL (JSON parsed here, never compared as text)."""
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT states, vars, graph FROM bpm_flow_repository WHERE instant_id = :i"),
            {"i": instance_id},
        ).first()
    if row is None:
        return None
    return {"states": _json(row[0]), "vars": _json(row[1]), "graph": _json(row[2])}


def count_rows(engine: sa.Engine, table: str, instance_id: str | None = None) -> int:
    column = "instant_id" if table == "bpm_flow_repository" else "flow_ins_id"
    sql = f"SELECT COUNT(*) FROM {table}"
    params: dict[str, Any] = {}
    if instance_id is not None:
        sql += f" WHERE {column} = :i"
        params["i"] = instance_id
    with engine.connect() as conn:
        return int(conn.execute(sa.text(sql), params).scalar_one())


def manager_approvals(engine: sa.Engine, instance_id: str) -> int:
    """History rows of the OA manager's approval of ``instance_id`` (one at most, ever)."""
    sql = (
        "SELECT COUNT(*) FROM bpm_flow_task WHERE flow_ins_id = :id "
        "AND source_node_code = 'manager'"
    )
    with engine.connect() as check:
        return int(check.execute(sa.text(sql), {"id": instance_id}).scalar_one())


def every_row(engine: sa.Engine) -> list[tuple[Any, ...]]:
    """Every column of every row of the three tables (what "writes nothing" compares)."""
    with engine.connect() as conn:
        return [
            tuple(row)
            for table in ("bpm_flow_repository", "bpm_flow_task", "bpm_flow_todo")
            for row in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY id"))
        ]


class StatementCounter:
    """Counts cursor executions (BEGIN/COMMIT are not cursor executes) on an engine."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    @property
    def count(self) -> int:
        return len(self.statements)


@contextmanager
def counting(engine: sa.Engine) -> Iterator[StatementCounter]:
    counter = StatementCounter()
    sa.event.listen(engine, "before_cursor_execute", counter)
    try:
        yield counter
    finally:
        sa.event.remove(engine, "before_cursor_execute", counter)


#: States after the employee applied (amount below 5000) and the manager claimed.
APPLIED_STATES = {"oa:apply": 1002, "oa:amount": 1002}
CLAIMED_STATES = {**APPLIED_STATES, "oa:manager": 1001}
