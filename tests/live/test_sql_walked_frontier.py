"""The open tasks an operation stores when its own walk already showed them.

On a graph whose walks follow one path, a claim or a FORWARD takes the instance's open task
from where its own walk stopped instead of walking the graph again (``walked_frontier``).
That is only right when nothing the second walk would not see decided the first one: here
a variable changed behind a gateway the walk had passed — by task code, by a condition, by
an interceptor, by the graph driver's node callback — sends the next walk down the other
branch, and the inbox must list the task that walk finds, not the one the submit's walk
stopped at.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import sqlalchemy as sa
from _support import migrate

from flow import FlowContext, FlowEngine, Graph, MapContainer, Node, SimpleFlowDriver
from flow.exchanger import FlowExchanger
from flow.interceptor import FlowInterceptor
from flow.workflow import ActorStateController, InstanceStatus, TaskAction, WorkflowExecutor
from flow_sqla.wiring import sql_workflow

#: ``flip`` runs after the gateway chose it on ``x == 1``; each case below sets x to 2 there,
#: so every later walk takes the gateway's other branch.
FLIP = """
id: flip
layout:
  - {id: s, type: start, link: apply}
  - {id: apply, meta: {actor: alice}, link: gw}
  - id: gw
    type: exclusive
    link:
      - {nextId: flip, when: "x == 1"}
      - {nextId: other}
  - {id: flip, TASK, link: mgr}
  - {id: mgr, title: Manager, meta: {actor: boss}, link: e}
  - {id: other, title: Other, meta: {actor: carol}, link: e}
  - {id: e, type: end}
"""


def _set_x(ctx: FlowContext, node: Node) -> None:
    ctx.put("x", 2)


class _FlipInterceptor(FlowInterceptor):
    def on_node_start(self, ctx: FlowContext, node: Node) -> None:
        if node.id == "flip":
            _set_x(ctx, node)


class _FlipOnStart(SimpleFlowDriver):
    def on_node_start(self, exchanger: FlowExchanger, node: Node) -> None:
        if node.id == "flip":
            _set_x(exchanger.context, node)


class _FlipOnEnd(SimpleFlowDriver):
    def on_node_end(self, exchanger: FlowExchanger, node: Node) -> None:
        if node.id == "flip":
            _set_x(exchanger.context, node)


#: The gateway's own condition sets x to 2 once it chose ``flip`` (the sandbox lets a
#: condition call ``context.put``).
FLIP_BY_CONDITION = FLIP.replace('"x == 1"', "\"x == 1 && context.put('x', 2) != None\"").replace(
    "TASK", "type: activity"
)


def _engine(how: str) -> FlowEngine:
    if how == "condition":
        engine = FlowEngine()
        engine.load(Graph.from_text(textwrap.dedent(FLIP_BY_CONDITION)))
        return engine
    task = 'task: "@flip"' if how == "task code" else "type: activity"
    if how == "task code":
        engine = FlowEngine(SimpleFlowDriver(container=MapContainer({"flip": _set_x})))
    elif how == "driver start callback":
        engine = FlowEngine(_FlipOnStart())
    elif how == "driver end callback":
        engine = FlowEngine(_FlipOnEnd())
    else:
        engine = FlowEngine()
        engine.add_interceptor(_FlipInterceptor())
    # ``flip`` is automatic: no actor in its meta.
    engine.load(Graph.from_text(textwrap.dedent(FLIP).replace("TASK", task)))
    return engine


def _executor(db: sa.Engine, engine: FlowEngine) -> WorkflowExecutor:
    return sql_workflow(db, engine, state_controller=ActorStateController(), index=True)


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _forward(ex: WorkflowExecutor, instance_id: str, actor: str, **data: Any) -> None:
    c = FlowContext.of(instance_id, {"actor": actor, **data})
    assert ex.submit_task_if_waiting(ex.claim_task("flip", c), TaskAction.FORWARD, c)


@pytest.mark.parametrize(
    "how",
    ["task code", "condition", "interceptor", "driver start callback", "driver end callback"],
)
def test_a_variable_changed_behind_a_passed_gateway_indexes_the_task_the_next_walk_finds(
    db: sa.Engine, how: str
) -> None:
    ex = _executor(db, _engine(how))
    _forward(ex, "f1", "alice", x=1)

    # The stored variables now send every walk to ``other``: carol's task is the open one
    # (read before any other operation, which would store the aggregate again).
    assert [t.node_id for t in ex.open_tasks("f1")] == ["other"]
    inbox = ex.inbox(FlowContext.of(None, {"actor": "carol"}))
    assert [(t.instance_id, t.node_id) for t in inbox] == [("f1", "other")]
    assert ex.inbox(FlowContext.of(None, {"actor": "boss"})) == []
    found = ex.find_task("flip", FlowContext.of("f1", {"actor": "carol"}))
    assert found is not None and found.node.id == "other"

    _forward(ex, "f1", "carol")
    assert ex.open_tasks("f1") == []
    assert ex.status("f1") == InstanceStatus.COMPLETED
