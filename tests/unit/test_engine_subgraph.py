"""Sub-graphs (``#graphId`` tasks): shared context, own trace record, caller interruption."""

from __future__ import annotations

import pytest

from flow import (
    FlowContext,
    FlowEngine,
    FlowInterceptor,
    FlowInvocation,
    Graph,
    GraphNotFoundError,
    GraphSpec,
    Node,
)


def _log(ctx: FlowContext, node: Node) -> None:
    ctx.data.setdefault("log", []).append(f"{node.graph.id}:{node.id}")


def _stop(ctx: FlowContext, node: Node) -> None:
    _log(ctx, node)
    ctx.stop()


def _interrupt(ctx: FlowContext, node: Node) -> None:
    _log(ctx, node)
    ctx.interrupt()


def _sub(sub_task: object = _log, *, reach_end: bool = True) -> Graph:
    spec = GraphSpec("sub")
    spec.add_start("s").link_add("t1")
    spec.add_activity("t1", task=_log).link_add("t2")
    gw = spec.add_exclusive("t2", task=sub_task)
    gw.link_add("e", when=None if reach_end else (lambda c: False))
    spec.add_end("e")
    return spec.create()


def _main(first_task: object = _log) -> Graph:
    spec = GraphSpec("main")
    spec.add_start("s").link_add("m1")
    spec.add_activity("m1", task=first_task).link_add("call")
    spec.add_activity("call", task="#sub").link_add("m2")
    spec.add_activity("m2", task=_log).link_add("e")
    spec.add_end("e")
    return spec.create()


def _engine(*graphs: Graph) -> FlowEngine:
    engine = FlowEngine()
    for graph in graphs:
        engine.load(graph)
    return engine


def test_sub_graph_runs_with_the_same_context_then_the_caller_continues() -> None:
    ctx = _engine(_main(), _sub()).eval("main")
    assert ctx.get("log") == ["main:m1", "sub:t1", "sub:t2", "main:m2"]


def test_sub_graph_has_its_own_trace_record_and_root_stays_the_caller() -> None:
    ctx = _engine(_main(), _sub()).eval("main")
    assert ctx.trace.last_node_id("sub") == "e"
    assert ctx.last_node_id == "e"
    assert ctx.trace.root_graph_id == "main"


def test_sub_graph_not_reaching_end_interrupts_the_calling_branch() -> None:
    ctx = _engine(_main(), _sub(reach_end=False)).eval("main")
    assert ctx.get("log") == ["main:m1", "sub:t1", "sub:t2"]
    assert ctx.last_node_id == "call"
    assert ctx.is_stopped is False


def test_interrupt_inside_a_sub_graph_also_cuts_the_calling_branch() -> None:
    ctx = _engine(_main(), _sub(_interrupt)).eval("main")
    assert ctx.get("log") == ["main:m1", "sub:t1", "sub:t2"]
    assert ctx.trace.last_node_id("sub") == "t2"


def test_stop_inside_a_sub_graph_stops_the_caller_too() -> None:
    ctx = _engine(_main(), _sub(_stop)).eval("main")
    assert ctx.get("log") == ["main:m1", "sub:t1", "sub:t2"]
    assert ctx.is_stopped is True


def test_stop_before_the_call_never_enters_the_sub_graph() -> None:
    ctx = _engine(_main(_stop), _sub()).eval("main")
    assert ctx.get("log") == ["main:m1"]
    assert ctx.trace.last_record("sub") is None
    assert ctx.last_node_id == "m1"


def test_resume_after_stop_in_sub_graph_continues_inside_the_sub_graph() -> None:
    calls = {"n": 0}

    def stop_once(ctx: FlowContext, node: Node) -> None:
        calls["n"] += 1
        _log(ctx, node)
        if calls["n"] == 1:
            ctx.stop()

    engine = _engine(_main(), _sub(stop_once))
    ctx = engine.eval("main")
    ctx.data["log"] = []
    engine.eval("main", ctx)
    assert ctx.get("log") == ["sub:t2", "main:m2"]
    assert ctx.last_node_id == "e"


def test_missing_sub_graph_raises_graph_not_found_unwrapped() -> None:
    with pytest.raises(GraphNotFoundError, match="sub"):
        _engine(_main()).eval("main")


def test_a_missing_sub_graph_names_the_calling_node_and_the_instance() -> None:
    """In a process of many graphs, which one holds the bad ``#id``?"""
    with pytest.raises(GraphNotFoundError) as raised:
        _engine(_main()).eval("main", FlowContext.of("inst-9"))
    error = raised.value
    caller = next(n for n in _main().nodes.values() if n.task == "#sub")
    assert (error.graph_id, error.called_from, error.instance_id) == (
        "sub",
        f"main:{caller.id}",
        "inst-9",
    )
    assert f"called by node 'main:{caller.id}'" in str(error) and "'inst-9'" in str(error)


def test_intercept_flow_also_wraps_sub_graph_evaluations() -> None:
    events: list[str] = []

    class Spy(FlowInterceptor):
        def intercept_flow(self, invocation: FlowInvocation) -> None:
            events.append(f"before:{invocation.graph.id}")
            invocation.invoke()
            events.append(f"after:{invocation.graph.id}")

    engine = _engine(_main(), _sub())
    engine.add_interceptor(Spy())
    engine.eval("main")
    assert events == ["before:main", "before:sub", "after:sub", "after:main"]


def test_context_exchanger_is_restored_after_a_sub_graph() -> None:
    seen: list[str] = []

    def spy(ctx: FlowContext, node: Node) -> None:
        assert ctx.exchanger is not None
        seen.append(ctx.exchanger.graph.id)

    spec = GraphSpec("main")
    spec.add_start("s").link_add("call")
    spec.add_activity("call", task="#sub").link_add("after")
    spec.add_activity("after", task=spy)
    sub = GraphSpec("sub")
    sub.add_start("s").link_add("x")
    sub.add_activity("x", task=spy).link_add("e")
    sub.add_end("e")
    ctx = _engine(spec.create(), sub.create()).eval("main")
    assert seen == ["sub", "main"]
    assert ctx.exchanger is None


_STEPFLOW = """
id: stepflow
layout:
  - {id: n0, type: start, title: start}
  - {id: n1, title: act1}
  - id: n2
    type: exclusive
    title: gw1
    link: [{nextId: n3}, {nextId: n4, condition: "a > 3"}]
  - {id: n3, title: act2, link: n6}
  - {id: n4, title: act3, task: "#stepflow_sub", link: n5}
  - id: n5
    type: exclusive
    title: gw2
    link: [{nextId: n1, condition: "b > 5"}, {nextId: n6}]
  - {id: n6, type: end, title: end}
"""


def test_steps_budget_walks_into_and_back_out_of_a_sub_graph() -> None:
    """Port of the reference's StepFlowTest: one node per eval, across the sub-graph."""
    sub_text = (
        _STEPFLOW.replace("stepflow", "stepflow_sub")
        .replace('task: "#stepflow_sub_sub", ', "")
        .replace("title: ", "title: sub-")
    )
    engine = FlowEngine()
    engine.load(Graph.from_text(_STEPFLOW))
    engine.load(Graph.from_text(sub_text))
    ctx = FlowContext.of("x1").put("a", 4).put("b", 5)
    titles = []
    for _ in range(3):
        engine.eval("stepflow", ctx, steps=1)
        assert ctx.last_record is not None
        titles.append(ctx.last_record.title)
    assert titles == ["act1", "gw1", "act3"]
    ctx = FlowContext.from_json(ctx.to_json())
    sub_titles = []
    for _ in range(5):
        engine.eval("stepflow", ctx, steps=1)
        record = ctx.trace.last_record("stepflow_sub")
        assert record is not None
        sub_titles.append(record.title)
    assert sub_titles == ["sub-act1", "sub-gw1", "sub-act3", "sub-gw2", "sub-end"]
    back = []
    for _ in range(2):
        engine.eval("stepflow", ctx, steps=1)
        assert ctx.last_record is not None
        back.append(ctx.last_record.title)
    assert back == ["gw2", "end"]


def _chain_graph(graph_id: str, task: object) -> Graph:
    spec = GraphSpec(graph_id)
    spec.add_start("s").link_add("t")
    spec.add_activity("t", task=task).link_add("e")
    spec.add_end("e")
    return spec.create()


def test_sub_graphs_nest_several_levels_deep() -> None:
    engine = _engine(
        _chain_graph("level1", "#level2"),
        _chain_graph("level2", "#level3"),
        _chain_graph("level3", _log),
    )
    ctx = engine.eval("level1")
    assert ctx.get("log") == ["level3:t"]
    assert [ctx.trace.last_node_id(g) for g in ("level1", "level2", "level3")] == ["e"] * 3


def test_parallel_branches_each_run_their_sub_graph_before_the_join() -> None:
    spec = GraphSpec("main")
    spec.add_start("s").link_add("p")
    spec.add_parallel("p").link_add("c1").link_add("c2")
    spec.add_activity("c1", task="#sub1").link_add("join")
    spec.add_activity("c2", task="#sub2").link_add("join")
    spec.add_parallel("join", task=_log).link_add("e")
    spec.add_end("e")
    engine = _engine(spec.create(), _chain_graph("sub1", _log), _chain_graph("sub2", _log))
    ctx = engine.eval("main")
    assert ctx.get("log") == ["sub1:t", "sub2:t", "main:join"]


def test_calling_a_finished_sub_graph_again_only_refires_its_end() -> None:
    """Reference behaviour: a sub-graph resumes at its own last record, so a second call in
    the same context (here from a second branch) finds it at END and runs no task."""
    spec = GraphSpec("main")
    spec.add_start("s").link_add("c1").link_add("c2")
    spec.add_activity("c1", task="#sub").link_add("after1")
    spec.add_activity("after1", task=_log)
    spec.add_activity("c2", task="#sub").link_add("after2")
    spec.add_activity("after2", task=_log)
    ctx = _engine(spec.create(), _chain_graph("sub", _log)).eval("main")
    assert ctx.get("log") == ["sub:t", "main:after1", "main:after2"]


def test_sub_graphs_are_looked_up_through_get_graph_or_throw() -> None:
    """An engine that loads graphs on demand overrides ``get_graph_or_throw``."""
    sub = _sub()

    class OnDemand(FlowEngine):
        def get_graph_or_throw(self, graph_id: str) -> Graph:
            if graph_id == "sub" and self.get_graph("sub") is None:
                self.load(sub)
            return super().get_graph_or_throw(graph_id)

    engine = OnDemand()
    engine.load(_main())
    assert engine.eval("main").get("log")
