"""claim_task / find_task / find_next_tasks under each controller, on lines, gateways and
parallel branches (ports of solon-flow-workflow's BasicGraphTests, ExecutorMethodTests,
WorkflowComplexTest, HelloTest, NotBlockStateFlowTest)."""

from __future__ import annotations

import pytest
from wf_support import LINE, PARALLEL_ACTORS, load

from flow import FlowContext, FlowEngine, FlowInterceptor, MapContainer, Node, SimpleFlowDriver
from flow.errors import GraphNotFoundError
from flow.exchanger import FlowExchanger
from flow.workflow import (
    ActorStateController,
    BlockStateController,
    NotBlockStateController,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)

EXCLUSIVE = """
id: excl
layout:
  - {id: start, type: start, link: gw}
  - {id: gw, type: exclusive, link: [{nextId: A, when: "x > 10"}, {nextId: B, when: "x <= 10"},
                                     {nextId: C}]}
  - {id: A, link: end}
  - {id: B, link: end}
  - {id: C, link: end}
  - {id: end, type: end}
"""

INCLUSIVE = """
id: incl
layout:
  - {id: start, type: start, link: gw}
  - {id: gw, type: inclusive, link: [{nextId: A, when: option1}, {nextId: B, when: option2},
                                     {nextId: C, when: option3}]}
  - {id: A, link: end}
  - {id: B, link: end}
  - {id: C, link: end}
  - {id: end, type: end}
"""


# -- Block (the default controller) ----------------------------------------------------
def test_claim_on_a_fresh_instance_returns_the_first_activity_waiting(engine: FlowEngine) -> None:
    graph = load(engine, LINE)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    assert wf.get_state(graph.nodes["A"], ctx) is TaskState.UNKNOWN
    task = wf.claim_task("line", ctx)
    assert task is not None and (task.node_id, task.state) == ("A", TaskState.WAITING)
    assert task.root_graph is graph
    assert wf.get_state(graph.nodes["A"], ctx) is TaskState.WAITING


def test_claim_find_and_find_next_agree_on_a_line(engine: FlowEngine) -> None:
    load(engine, LINE)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    claimed, found = wf.claim_task("line", ctx), wf.find_task("line", ctx)
    assert claimed is not None and found is not None
    assert claimed.node_id == found.node_id == "A"
    assert [t.node_id for t in wf.find_next_tasks("line", ctx)] == ["A"]


def test_claim_accepts_a_graph_object_or_its_id(engine: FlowEngine) -> None:
    graph = load(engine, LINE)
    wf = WorkflowExecutor(engine)
    assert wf.claim_task(graph, FlowContext.of("i1")) == wf.claim_task("line", FlowContext.of("i1"))


@pytest.mark.parametrize("graph_id", ["nope", 5, None, ["line"], {"id": "line"}])
def test_an_unknown_graph_id_raises_graph_not_found(engine: FlowEngine, graph_id: object) -> None:
    """Also for an id that is no string at all — a JSON list or object taken from a request
    — which used to fail the dict lookup with a bare ``TypeError`` (unhashable)."""
    load(engine, LINE)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    for query in (wf.claim_task, wf.find_task, wf.find_next_tasks, wf.withdraw):
        with pytest.raises(GraphNotFoundError):
            query(graph_id, ctx)  # type: ignore[arg-type]


def test_claim_returns_none_and_the_trace_ends_when_the_flow_is_finished(
    engine: FlowEngine,
) -> None:
    load(engine, LINE)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    for node_id in "ABC":
        wf.submit_task_at("line", node_id, TaskAction.FORWARD, ctx)
    task = wf.claim_task("line", ctx)
    assert task is None
    assert ctx.last_record is not None and ctx.last_record.is_end


def test_task_is_end_follows_the_context_trace(engine: FlowEngine) -> None:
    load(engine, LINE)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    task = wf.claim_task("line", ctx)
    assert task is not None and not task.is_end
    assert task.last_record is not None and task.last_record.id == "A"


def test_exclusive_gateway_leads_to_the_branch_whose_condition_holds(engine: FlowEngine) -> None:
    load(engine, EXCLUSIVE)
    wf = WorkflowExecutor(engine)
    big = wf.find_next_tasks("excl", FlowContext.of("i1", {"x": 15}))
    small = wf.find_next_tasks("excl", FlowContext.of("i2", {"x": 5}))
    assert [t.node_id for t in big] == ["A"] and [t.node_id for t in small] == ["B"]


def test_exclusive_gateway_takes_the_default_link_when_nothing_matches(engine: FlowEngine) -> None:
    load(engine, EXCLUSIVE)
    tasks = WorkflowExecutor(engine).find_next_tasks("excl", FlowContext.of("i1"))
    assert [t.node_id for t in tasks] == ["C"]


def test_gateways_are_completed_automatically_when_passed(engine: FlowEngine) -> None:
    graph = load(engine, EXCLUSIVE)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1", {"x": 1})
    wf.claim_task("excl", ctx)
    assert wf.get_state(graph.nodes["gw"], ctx) is TaskState.COMPLETED


def test_inclusive_gateway_find_next_returns_every_matching_branch(engine: FlowEngine) -> None:
    load(engine, INCLUSIVE)
    ctx = FlowContext.of("i1", {"option1": True, "option2": True, "option3": False})
    tasks = WorkflowExecutor(engine).find_next_tasks("incl", ctx)
    assert sorted(t.node_id for t in tasks) == ["A", "B"]
    assert all(t.state is TaskState.WAITING for t in tasks)


def test_parallel_split_find_next_returns_both_branches_and_claim_the_first(
    engine: FlowEngine,
) -> None:
    load(engine, PARALLEL_ACTORS)
    wf = WorkflowExecutor(engine)
    assert [t.node_id for t in wf.find_next_tasks("par", FlowContext.of("i1"))] == ["A", "B"]
    task = wf.claim_task("par", FlowContext.of("i2"))
    assert task is not None and task.node_id == "A"


def test_find_next_marks_every_frontier_task_waiting(engine: FlowEngine) -> None:
    graph = load(engine, PARALLEL_ACTORS)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    wf.find_next_tasks("par", ctx)
    assert wf.get_state(graph.nodes["B"], ctx) is TaskState.WAITING


# -- Actor --------------------------------------------------------------------------------
ACTOR_LINE = """
id: actors
layout:
  - {id: start, type: start}
  - {id: A, meta: {actor: user1}}
  - {id: B, meta: {actor: user2}}
  - {id: end, type: end}
"""


def test_claim_by_someone_who_may_not_operate_the_current_task_returns_none(
    engine: FlowEngine,
) -> None:
    load(engine, ACTOR_LINE)
    wf = WorkflowExecutor(engine, ActorStateController())
    assert wf.claim_task("actors", FlowContext.of("i1", {"actor": "user2"})) is None


def test_find_by_someone_else_returns_the_current_task_unknown(engine: FlowEngine) -> None:
    load(engine, ACTOR_LINE)
    wf = WorkflowExecutor(engine, ActorStateController())
    mine = wf.claim_task("actors", FlowContext.of("i1", {"actor": "user1"}))
    theirs = wf.find_task("actors", FlowContext.of("i1", {"actor": "user2"}))
    assert mine is not None and (mine.node_id, mine.state) == ("A", TaskState.WAITING)
    assert theirs is not None and (theirs.node_id, theirs.state) == ("A", TaskState.UNKNOWN)


def test_find_next_reports_tasks_others_must_do_as_unknown(engine: FlowEngine) -> None:
    load(engine, PARALLEL_ACTORS)
    wf = WorkflowExecutor(engine, ActorStateController())
    nobody = wf.find_next_tasks("par", FlowContext.of("i1"))
    user1 = wf.find_next_tasks("par", FlowContext.of("i1", {"actor": "user1"}))
    assert [t.state for t in nobody] == [TaskState.UNKNOWN, TaskState.UNKNOWN]
    assert [(t.node_id, t.state) for t in user1] == [
        ("A", TaskState.WAITING),
        ("B", TaskState.UNKNOWN),
    ]


def test_claim_keeps_looking_in_sibling_branches_for_an_operatable_task(
    engine: FlowEngine,
) -> None:
    load(engine, PARALLEL_ACTORS)
    wf = WorkflowExecutor(engine, ActorStateController())
    task = wf.claim_task("par", FlowContext.of("i1", {"actor": "user2"}))
    assert task is not None and (task.node_id, task.state) == ("B", TaskState.WAITING)


def test_actor_controller_with_several_keys_lets_any_key_match(engine: FlowEngine) -> None:
    load(
        engine,
        """
        id: keys
        layout:
          - {id: start, type: start}
          - {id: A, meta: {role: admin}}
          - {id: B, meta: {department: sales}}
          - {id: end, type: end}
        """,
    )
    wf = WorkflowExecutor(engine, ActorStateController("role", "department"))
    admin, sales = (
        FlowContext.of("i1", {"role": "admin"}),
        FlowContext.of("i1", {"department": "sales"}),
    )
    assert wf.claim_task("keys", sales) is None
    first = wf.claim_task("keys", admin)
    assert first is not None and first.node_id == "A"
    wf.submit_task(first, TaskAction.FORWARD, admin)
    second = wf.claim_task("keys", sales)
    assert second is not None and second.node_id == "B"


def test_a_gateway_with_an_actor_meta_is_a_human_task_under_the_actor_controller(
    engine: FlowEngine,
) -> None:
    load(
        engine,
        """
        id: gwtask
        layout:
          - {id: start, type: start}
          - {id: review, type: exclusive, meta: {actor: reviewer}, link: [{nextId: ok}]}
          - {id: ok, link: end}
          - {id: end, type: end}
        """,
    )
    wf = WorkflowExecutor(engine, ActorStateController())
    task = wf.claim_task("gwtask", FlowContext.of("i1", {"actor": "reviewer"}))
    assert task is not None and (task.node_id, task.state) == ("review", TaskState.WAITING)


# -- NotBlock -----------------------------------------------------------------------------
def _counting_engine(calls: list[str]) -> FlowEngine:
    container = MapContainer()
    container.put_component("count", lambda ctx, node: calls.append(node.id))
    return FlowEngine(SimpleFlowDriver(container=container))


def test_not_block_claim_runs_the_whole_flow_and_returns_none(engine: FlowEngine) -> None:
    calls: list[str] = []
    engine = _counting_engine(calls)
    load(
        engine,
        """
        id: auto
        layout:
          - {id: start, type: start}
          - {id: A, task: "@count"}
          - {id: gw, type: exclusive}
          - {id: B, task: "@count"}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine, NotBlockStateController()), FlowContext.of("i1")
    assert wf.claim_task("auto", ctx) is None
    assert ctx.last_record is not None and ctx.last_record.is_end
    assert calls == ["A", "B"]
    assert wf.find_next_tasks("auto", ctx) == []
    assert calls == ["A", "B"]  # completed nodes never run twice


def test_not_block_a_task_that_stops_the_flow_waits_and_runs_again_on_the_next_claim() -> None:
    calls: list[str] = []
    container = MapContainer()

    def approve(ctx: FlowContext, node: Node) -> None:
        calls.append(node.id)
        if not ctx.get("approved"):
            ctx.stop()

    container.put_component("approve", approve)
    engine = FlowEngine(SimpleFlowDriver(container=container))
    graph = load(
        engine,
        """
        id: stopper
        layout:
          - {id: start, type: start}
          - {id: A, task: "@approve"}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine, NotBlockStateController()), FlowContext.of("i1")
    task = wf.claim_task("stopper", ctx)
    assert task is not None and (task.node_id, task.state) == ("A", TaskState.WAITING)
    assert wf.get_state(graph.nodes["A"], ctx) is TaskState.WAITING
    ctx.put("approved", True)
    assert wf.claim_task("stopper", ctx) is None
    assert calls == ["A", "A"]
    assert wf.get_state(graph.nodes["A"], ctx) is TaskState.COMPLETED


def test_an_interceptor_interrupting_a_node_leaves_the_flow_unfinished() -> None:
    """Port of NotBlockStateFlowTest#caseInterceptorBlock."""

    class BlockN1(FlowInterceptor):
        def on_node_start(self, ctx: FlowContext, node: Node) -> None:
            if node.id == "n1":
                ctx.interrupt()

    engine = FlowEngine()
    blocker = BlockN1()
    engine.add_interceptor(blocker)
    load(
        engine,
        """
        id: t1
        layout:
          - {id: s, type: start}
          - {id: n0}
          - {id: n1}
          - {id: n2}
          - {id: e, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine, NotBlockStateController()), FlowContext.of("2")
    first = wf.claim_task("t1", ctx)
    assert first is not None and (first.node_id, first.state) == ("n0", TaskState.COMPLETED)
    assert wf.claim_task("t1", ctx) is None
    assert ctx.last_record is not None and not ctx.last_record.is_end
    engine.remove_interceptor(blocker)
    assert wf.claim_task("t1", ctx) is None
    assert ctx.last_record is not None and ctx.last_record.is_end


def test_a_node_whose_when_is_false_is_passed_without_becoming_a_task(engine: FlowEngine) -> None:
    graph = load(
        engine,
        """
        id: guarded
        layout:
          - {id: start, type: start}
          - {id: A, when: "skip != true"}
          - {id: B}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1", {"skip": True})
    task = wf.claim_task("guarded", ctx)
    assert task is not None and task.node_id == "B"
    assert wf.get_state(graph.nodes["A"], ctx) is TaskState.UNKNOWN


def test_repository_variables_are_merged_into_the_context_at_every_node(
    engine: FlowEngine,
) -> None:
    from flow.workflow import InMemoryStateRepository

    class VarsRepo(InMemoryStateRepository):
        def vars_get(self, ctx: FlowContext, node: Node) -> dict[str, object]:
            return {"x": 50}

    load(engine, EXCLUSIVE)
    wf, ctx = WorkflowExecutor(engine, state_repository=VarsRepo()), FlowContext.of("i1")
    task = wf.claim_task("excl", ctx)
    assert task is not None and task.node_id == "A"
    assert ctx.get("x") == 50


def test_the_workflow_intent_is_in_the_context_only_during_a_call(engine: FlowEngine) -> None:
    seen: list[object] = []
    container = MapContainer()
    container.put_component("peek", lambda ctx, node: seen.append(ctx.get("WorkflowIntent")))
    engine = FlowEngine(SimpleFlowDriver(container=container))
    load(
        engine,
        """
        id: peek
        layout:
          - {id: start, type: start}
          - {id: gw, type: exclusive, task: "@peek"}
          - {id: A}
          - {id: end, type: end}
        """,
    )
    ctx = FlowContext.of("i1")
    WorkflowExecutor(engine).claim_task("peek", ctx)
    assert seen and seen[0] is not None
    assert "WorkflowIntent" not in ctx


class _CallbackDriver(SimpleFlowDriver):
    """A graph driver with its own node callbacks: it logs them and stops the walk at ``B``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def on_node_start(self, exchanger: FlowExchanger, node: Node) -> None:
        self.seen.append(f"start {node.id}")
        if node.id == "B":
            exchanger.stop()

    def on_node_end(self, exchanger: FlowExchanger, node: Node) -> None:
        self.seen.append(f"end {node.id}")


def test_the_graph_drivers_own_node_callbacks_run_under_the_workflow_driver() -> None:
    engine = FlowEngine()
    driver = _CallbackDriver()
    engine.register_driver(None, driver)
    load(engine, LINE)
    wf, ctx = WorkflowExecutor(engine, NotBlockStateController()), FlowContext.of("cb")
    task = wf.claim_task("line", ctx)
    # A runs and completes; the driver's on_node_start of B stops the walk before B's task.
    assert task is not None and (task.node_id, task.state) == ("A", TaskState.COMPLETED)
    assert driver.seen == ["start start", "end start", "start A", "end A", "start B"]
    assert wf.get_state(_line_node(engine, "B"), ctx) is TaskState.UNKNOWN


def _line_node(engine: FlowEngine, node_id: str) -> Node:
    return engine.get_graph_or_throw("line").get_node_or_throw(node_id)


# -- what the controller is asked ------------------------------------------------------
class _CountingController(BlockStateController):
    """Counts, per node id, how often the walk asks whether a node auto-forwards."""

    def __init__(self) -> None:
        self.asked: dict[str, int] = {}

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool:
        self.asked[node.id] = self.asked.get(node.id, 0) + 1
        return super().is_auto_forward(ctx, node)


def test_a_walk_does_not_ask_the_controller_about_completed_nodes(engine: FlowEngine) -> None:
    graph = load(engine, LINE)
    controller = _CountingController()
    wf = WorkflowExecutor(engine, controller)
    wf.submit_task_at(graph, "A", TaskAction.FORWARD, FlowContext.of("c1"))
    controller.asked.clear()
    task = wf.find_task(graph, FlowContext.of("c1"))
    assert task is not None and task.node.id == "B"
    assert controller.asked == {"B": 1}  # A is COMPLETED: passed without asking
