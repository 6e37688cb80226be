"""stop vs interrupt, step budgets, resuming (also from a JSON snapshot), the exchanger."""

from __future__ import annotations

from flow import (
    FlowContext,
    FlowEngine,
    FlowExchanger,
    FlowInterceptor,
    Graph,
    GraphSpec,
    Node,
)


def _log(ctx: FlowContext, node: Node) -> None:
    ctx.data.setdefault("log", []).append(node.id)


def _linear(*tasks: object) -> Graph:
    spec = GraphSpec("lin")
    previous = spec.add_start("s")
    for index, task in enumerate(tasks, 1):
        previous.link_add(f"t{index}")
        previous = spec.add_activity(f"t{index}", task=task)
    previous.link_add("e")
    spec.add_end("e")
    return spec.create()


class _Approval:
    """A task that stops the flow until ``approved`` is set (the reference's ControlFlowTest)."""

    def __init__(self) -> None:
        self.runs = 0

    def run(self, ctx: FlowContext, node: Node) -> None:
        self.runs += 1
        _log(ctx, node)
        if not ctx.get("approved"):
            ctx.stop()


# -- stop ------------------------------------------------------------------------------
def test_stop_ends_the_evaluation_after_the_current_task() -> None:
    def stop(ctx: FlowContext, node: Node) -> None:
        ctx.stop()
        _log(ctx, node)

    ctx = FlowEngine().eval(_linear(_log, stop, _log))
    assert ctx.get("log") == ["t1", "t2"]
    assert ctx.is_stopped is True
    assert ctx.last_node_id == "t2"
    assert ctx.last_record is not None and not ctx.last_record.is_end


def test_is_stopped_is_reset_when_the_next_eval_starts() -> None:
    approval = _Approval()
    engine = FlowEngine()
    graph = _linear(approval)
    ctx = engine.eval(graph)
    assert ctx.is_stopped is True
    ctx.put("approved", True)
    engine.eval(graph, ctx)
    assert ctx.is_stopped is False


def test_resume_runs_the_task_of_the_node_that_stopped_again() -> None:
    approval = _Approval()
    engine = FlowEngine()
    graph = _linear(_log, approval, _log)
    ctx = engine.eval(graph)
    assert ctx.last_node_id == "t2"
    ctx.put("approved", True)
    engine.eval(graph, ctx)
    assert approval.runs == 2
    assert ctx.get("log") == ["t1", "t2", "t2", "t3"]
    assert ctx.last_node_id == "e"


def test_snapshot_from_json_resumes_where_the_flow_stopped() -> None:
    approval = _Approval()
    engine = FlowEngine()
    graph = _linear(_log, approval, _log)
    first = engine.eval(graph, FlowContext.of("order-1"))
    restored = FlowContext.from_json(first.to_json())
    restored.put("approved", True)
    restored.remove("log")
    engine.eval(graph, restored)
    assert restored.get("log") == ["t2", "t3"]
    assert restored.last_node_id == "e"


def test_stop_in_one_parallel_branch_stops_the_sibling_branches() -> None:
    def stop(ctx: FlowContext, node: Node) -> None:
        _log(ctx, node)
        ctx.stop()

    spec = GraphSpec("par")
    spec.add_start("s").link_add("p")
    spec.add_parallel("p").link_add("a").link_add("b").link_add("c")
    spec.add_activity("a", task=_log)
    spec.add_activity("b", task=stop)
    spec.add_activity("c", task=_log)
    ctx = FlowEngine().eval(spec.create())
    assert ctx.get("log") == ["a", "b"]


# -- interrupt -------------------------------------------------------------------------
def test_interrupt_ends_only_the_current_branch() -> None:
    def interrupt(ctx: FlowContext, node: Node) -> None:
        _log(ctx, node)
        ctx.interrupt()

    spec = GraphSpec("par")
    spec.add_start("s").link_add("p")
    spec.add_parallel("p").link_add("a1").link_add("b1")
    spec.add_activity("a1", task=interrupt).link_add("a2")
    spec.add_activity("a2", task=_log).link_add("join")
    spec.add_activity("b1", task=_log).link_add("b2")
    spec.add_activity("b2", task=_log).link_add("join")
    spec.add_parallel("join", task=_log).link_add("e")
    spec.add_end("e")
    ctx = FlowEngine().eval(spec.create())
    assert ctx.get("log") == ["a1", "b1", "b2"]
    assert ctx.is_stopped is False


def test_interrupt_in_a_task_still_finishes_that_task() -> None:
    def interrupt_then_log(ctx: FlowContext, node: Node) -> None:
        ctx.interrupt()
        _log(ctx, node)

    ctx = FlowEngine().eval(_linear(interrupt_then_log, _log))
    assert ctx.get("log") == ["t1"]
    assert ctx.last_node_id == "t1"


def test_interrupt_flag_is_consumed_so_a_later_eval_runs_normally() -> None:
    calls = {"n": 0}

    def interrupt_once(ctx: FlowContext, node: Node) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            ctx.interrupt()

    engine = FlowEngine()
    graph = _linear(interrupt_once, _log)
    ctx = engine.eval(graph)
    engine.eval(graph, ctx)
    assert ctx.get("log") == ["t2"]


# -- steps -----------------------------------------------------------------------------
def test_steps_budget_records_the_next_node_without_running_it() -> None:
    engine = FlowEngine()
    graph = _linear(_log, _log, _log)
    ctx = engine.eval(graph, steps=2)
    assert ctx.get("log") == ["t1"]
    assert ctx.last_node_id == "t2"
    assert ctx.is_stopped is True


def test_zero_steps_runs_nothing_and_stops() -> None:
    """As in the reference, the start node of a fresh context is the resume point, so it is
    not recorded; with no budget nothing else is reached."""
    events: list[str] = []

    class Spy(FlowInterceptor):
        def on_node_start(self, ctx: FlowContext, node: Node) -> None:
            events.append(node.id)

    engine = FlowEngine()
    engine.add_interceptor(Spy())
    ctx = engine.eval(_linear(_log), steps=0)
    assert events == []
    assert ctx.last_node_id is None
    assert ctx.is_stopped is True


def test_steps_resume_runs_one_node_per_eval() -> None:
    """The start node spends the first step of a fresh context; later evals resume at the
    recorded node, which spends the step it could not spend before."""
    engine = FlowEngine()
    graph = _linear(_log, _log)
    ctx = FlowContext.of()
    visited = []
    for _ in range(4):
        engine.eval(graph, ctx, steps=1)
        visited.append(ctx.last_node_id)
    assert visited == ["t1", "t2", "e", "e"]
    assert ctx.get("log") == ["t1", "t2"]


_BACKFLOW = """
id: backflow
layout:
  - {id: n0, type: start, title: start}
  - {id: n1, title: act1}
  - id: n2
    type: exclusive
    title: gw1
    link: [{nextId: n3}, {nextId: n4, condition: "a > 3"}]
  - {id: n3, title: act2, link: n6}
  - {id: n4, title: act3, link: n5}
  - id: n5
    type: exclusive
    title: gw2
    link: [{nextId: n1, condition: "b > 5"}, {nextId: n6}]
  - {id: n6, type: end, title: end}
"""


def test_steps_follow_a_back_link_to_an_earlier_node() -> None:
    """Port of the reference's StepBackflowTest (expression conditions, one step per eval)."""
    engine = FlowEngine()
    graph = Graph.from_text(_BACKFLOW)
    ctx = FlowContext.of("x1").put("a", 4).put("b", 6)
    titles = []
    for _ in range(5):
        engine.eval(graph, ctx, steps=1)
        assert ctx.last_record is not None
        titles.append(ctx.last_record.title)
    assert titles == ["act1", "gw1", "act3", "gw2", "act1"]


# -- resume walk -----------------------------------------------------------------------
def test_re_evaluating_a_finished_context_only_refires_end_callbacks() -> None:
    events: list[str] = []

    class Spy(FlowInterceptor):
        def on_node_start(self, ctx: FlowContext, node: Node) -> None:
            events.append(node.id)

    engine = FlowEngine()
    engine.add_interceptor(Spy())
    graph = _linear(_log)
    ctx = engine.eval(graph)
    events.clear()
    engine.eval(graph, ctx)
    assert events == ["e"]
    assert ctx.get("log") == ["t1"]


def test_resume_walk_still_evaluates_link_conditions() -> None:
    """If conditions changed so the recorded node is no longer reached, nothing runs."""
    spec = GraphSpec("cond")
    spec.add_start("s").link_add("a", when=lambda c: c.get("go", False))
    spec.add_activity("a", task=lambda c, n: c.stop()).link_add("b")
    spec.add_activity("b", task=_log)
    engine = FlowEngine()
    graph = spec.create()
    ctx = engine.eval(graph, FlowContext.of().put("go", True))
    assert ctx.last_node_id == "a"
    ctx.put("go", False)
    engine.eval(graph, ctx)
    assert ctx.get("log") is None
    assert ctx.last_node_id == "a"


def test_clearing_the_trace_restarts_from_the_start_node() -> None:
    engine = FlowEngine()
    graph = _linear(_log)
    ctx = engine.eval(graph)
    ctx.trace.clear()
    engine.eval(graph, ctx)
    assert ctx.get("log") == ["t1", "t1"]


# -- exchanger -------------------------------------------------------------------------
def test_eval_exchanger_without_reverting_walks_from_the_start() -> None:
    engine = FlowEngine()
    graph = _linear(_log, _log)
    ctx = engine.eval(graph)
    exchanger = FlowExchanger(graph, engine, engine.get_driver(graph), ctx)
    exchanger.reverting = False
    engine.eval_exchanger(graph, exchanger)
    assert ctx.get("log") == ["t1", "t2", "t1", "t2"]


def test_exchanger_is_reachable_from_the_context_only_during_an_eval() -> None:
    seen: list[FlowExchanger | None] = []
    ctx = FlowEngine().eval(_linear(lambda c, n: seen.append(c.exchanger)))
    assert seen[0] is not None and seen[0].context is ctx
    assert ctx.exchanger is None


def test_exchanger_copy_shares_context_driver_and_step_counter() -> None:
    engine = FlowEngine()
    graph = _linear()
    ex = FlowExchanger(graph, engine, engine.get_driver(graph), FlowContext.of(), steps=5)
    ex.next_step()
    ex.counter_incr(graph, "join")
    copy = ex.copy(graph)
    assert (copy.context, copy.driver, copy.engine) == (ex.context, ex.driver, ex.engine)
    copy.next_step()
    assert ex.step_count == 2
    assert copy.counter_incr(graph, "join") == 1
    assert copy.reverting is True and copy.is_interrupted is False


def test_exchanger_stop_marks_the_context_stopped() -> None:
    engine = FlowEngine()
    graph = _linear()
    ctx = FlowContext.of()
    ex = FlowExchanger(graph, engine, engine.get_driver(graph), ctx)
    ex.stop()
    assert ex.is_stopped and ctx.is_stopped


def test_exchanger_record_clear_forgets_the_trace() -> None:
    engine = FlowEngine()
    graph = _linear()
    ctx = engine.eval(graph)
    FlowExchanger(graph, engine, engine.get_driver(graph), ctx).record_clear()
    assert ctx.last_record is None
