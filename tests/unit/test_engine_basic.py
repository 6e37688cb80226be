"""FlowEngine registry, drivers, interceptors and the node callbacks of a plain walk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flow import (
    FlowContext,
    FlowDriver,
    FlowEngine,
    FlowExchanger,
    FlowInterceptor,
    FlowInvocation,
    Graph,
    GraphDefinitionError,
    GraphNotFoundError,
    GraphSpec,
    Node,
    SimpleFlowDriver,
)


def _log(ctx: FlowContext, node: Node) -> None:
    ctx.data.setdefault("log", []).append(node.id)


def _linear(graph_id: str = "lin", *, driver: str | None = None) -> Graph:
    spec = GraphSpec(graph_id, driver=driver)
    spec.add_start("s").link_add("task1")
    spec.add_activity("task1", task=_log).link_add("task2")
    spec.add_activity("task2", task=_log).link_add("end")
    spec.add_end("end")
    return spec.create()


class _Recorder(FlowInterceptor):
    def __init__(self, events: list[str], name: str = "") -> None:
        self.events = events
        self.name = name

    def intercept_flow(self, invocation: FlowInvocation) -> None:
        self.events.append(f"{self.name}before-flow:{invocation.graph.id}")
        invocation.invoke()
        self.events.append(f"{self.name}after-flow:{invocation.graph.id}")

    def on_node_start(self, ctx: FlowContext, node: Node) -> None:
        self.events.append(f"{self.name}node-start:{node.id}")

    def on_node_end(self, ctx: FlowContext, node: Node) -> None:
        self.events.append(f"{self.name}node-end:{node.id}")


# -- walking ---------------------------------------------------------------------------
def test_linear_graph_runs_tasks_in_order_and_ends_at_end() -> None:
    ctx = FlowEngine().eval(_linear())
    assert ctx.get("log") == ["task1", "task2"]
    assert ctx.last_node_id == "end"
    assert ctx.last_record is not None and ctx.last_record.is_end


def test_eval_creates_a_context_when_none_is_given() -> None:
    ctx = FlowEngine().eval(_linear())
    assert isinstance(ctx, FlowContext)


def test_eval_returns_the_given_context() -> None:
    ctx = FlowContext.of("i")
    assert FlowEngine().eval(_linear(), ctx) is ctx


def test_eval_by_id_uses_the_loaded_graph() -> None:
    engine = FlowEngine()
    engine.load(_linear("by-id"))
    assert engine.eval("by-id").get("log") == ["task1", "task2"]


def test_eval_of_unknown_graph_id_raises_graph_not_found() -> None:
    with pytest.raises(GraphNotFoundError, match="nope"):
        FlowEngine().eval("nope")


def test_activity_flows_out_through_every_true_link_depth_first() -> None:
    spec = GraphSpec("fan")
    spec.add_start("s").link_add("a")
    spec.add_activity("a").link_add("b").link_add("c").link_add("d", when=lambda c: False)
    spec.add_activity("b", task=_log).link_add("b2")
    spec.add_activity("b2", task=_log)
    spec.add_activity("c", task=_log)
    spec.add_activity("d", task=_log)
    assert FlowEngine().eval(spec.create()).get("log") == ["b", "b2", "c"]


def test_links_are_followed_in_priority_order_highest_first() -> None:
    spec = GraphSpec("prio")
    spec.add_start("s").link_add("low").link_add("high", priority=5).link_add("mid", priority=1)
    for node_id in ("low", "high", "mid"):
        spec.add_activity(node_id, task=_log)
    assert FlowEngine().eval(spec.create()).get("log") == ["high", "mid", "low"]


def test_node_when_false_skips_only_the_task() -> None:
    spec = GraphSpec("when")
    spec.add_start("s").link_add("a")
    spec.add_activity("a", task=_log, when=lambda c: False).link_add("b")
    spec.add_activity("b", task=_log)
    assert FlowEngine().eval(spec.create()).get("log") == ["b"]


def test_start_and_end_nodes_never_run_a_task() -> None:
    spec = GraphSpec("se")
    spec.add_start("s", task=_log).link_add("e")
    spec.add_end("e", task=_log)
    ctx = FlowEngine().eval(spec.create())
    assert ctx.get("log") is None
    assert ctx.last_node_id == "e"


def test_link_to_an_unknown_node_ends_the_branch_silently() -> None:
    spec = GraphSpec("dangling")
    spec.add_start("s").link_add("ghost").link_add("a")
    spec.add_activity("a", task=_log)
    assert FlowEngine().eval(spec.create()).get("log") == ["a"]


def test_end_is_not_a_join_each_arriving_branch_fires_its_callbacks() -> None:
    spec = GraphSpec("two-ends")
    spec.add_start("s").link_add("a").link_add("b")
    spec.add_activity("a").link_add("e")
    spec.add_activity("b").link_add("e")
    spec.add_end("e")
    engine = FlowEngine()
    events: list[str] = []
    engine.add_interceptor(_Recorder(events))
    engine.eval(spec.create())
    assert events.count("node-start:e") == 2


# -- registry --------------------------------------------------------------------------
def test_load_unload_and_lookup_graphs() -> None:
    engine = FlowEngine()
    graph = _linear("g1")
    assert engine.load(graph) == [graph]
    assert engine.get_graph("g1") is graph
    assert dict(engine.graphs) == {"g1": graph}
    engine.unload("g1")
    assert engine.get_graph("g1") is None
    with pytest.raises(GraphNotFoundError):
        engine.get_graph_or_throw("g1")


_TEXT = "id: {id}\nlayout:\n  - {{id: s, type: start}}\n  - {{id: e, type: end}}\n"


def test_load_reads_a_graph_file(tmp_path: Path) -> None:
    path = tmp_path / "one.yml"
    path.write_text(_TEXT.format(id="file-graph"), encoding="utf-8")
    engine = FlowEngine()
    engine.load(path)
    assert engine.get_graph_or_throw("file-graph").start.id == "s"


def test_load_with_a_glob_reads_every_graph_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yml").write_text(_TEXT.format(id="ga"), encoding="utf-8")
    (tmp_path / "sub" / "b.yaml").write_text(_TEXT.format(id="gb"), encoding="utf-8")
    (tmp_path / "c.json").write_text(
        '{"id": "gc", "layout": [{"id": "s", "type": "start"}]}', encoding="utf-8"
    )
    (tmp_path / "notes.txt").write_text("not a graph", encoding="utf-8")
    engine = FlowEngine()
    loaded = engine.load(str(tmp_path / "**" / "*"))
    assert sorted(g.id for g in loaded) == ["ga", "gb", "gc"]
    assert sorted(engine.graphs) == ["ga", "gb", "gc"]


def test_load_of_a_missing_file_raises_graph_definition_error(tmp_path: Path) -> None:
    with pytest.raises(GraphDefinitionError):
        FlowEngine().load(tmp_path / "missing.yml")


# -- drivers ---------------------------------------------------------------------------
class _CountingDriver(SimpleFlowDriver):
    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[str] = []

    def handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
        self.tasks.append(node.id)
        super().handle_task(exchanger, node)


def test_graph_driver_name_selects_a_registered_driver() -> None:
    engine = FlowEngine()
    driver = _CountingDriver()
    engine.register_driver("counting", driver)
    graph = _linear("named", driver="counting")
    assert engine.get_driver(graph) is driver
    engine.eval(graph)
    assert driver.tasks == ["task1", "task2"]


def test_register_driver_with_none_name_replaces_the_default() -> None:
    engine = FlowEngine()
    driver = _CountingDriver()
    engine.register_driver(None, driver)
    assert engine.get_driver(_linear()) is driver


def test_engine_constructor_driver_is_the_default() -> None:
    driver = _CountingDriver()
    assert FlowEngine(driver).get_driver(_linear()) is driver


def test_unknown_driver_name_raises_graph_definition_error() -> None:
    with pytest.raises(GraphDefinitionError, match="No driver found for: 'ghost'"):
        FlowEngine().eval(_linear("x", driver="ghost"))


def test_driver_callbacks_run_after_interceptor_callbacks() -> None:
    events: list[str] = []

    class Driver(SimpleFlowDriver):
        def on_node_start(self, exchanger: FlowExchanger, node: Node) -> None:
            events.append(f"driver-start:{node.id}")

        def on_node_end(self, exchanger: FlowExchanger, node: Node) -> None:
            events.append(f"driver-end:{node.id}")

    engine = FlowEngine(Driver())
    engine.add_interceptor(_Recorder(events))
    spec = GraphSpec("one")
    spec.add_start("s")
    engine.eval(spec.create())
    assert events == [
        "before-flow:one",
        "node-start:s",
        "driver-start:s",
        "node-end:s",
        "driver-end:s",
        "after-flow:one",
    ]


def test_wrapping_driver_can_delegate_every_hook() -> None:
    seen: list[str] = []

    class Wrapper(FlowDriver):
        def __init__(self, delegate: FlowDriver) -> None:
            self.delegate = delegate

        def handle_condition(self, exchanger: FlowExchanger, condition: Any) -> bool:
            return self.delegate.handle_condition(exchanger, condition)

        def handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
            seen.append(node.id)
            self.delegate.handle_task(exchanger, node)

        def post_handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
            self.delegate.post_handle_task(exchanger, node)

    ctx = FlowEngine(Wrapper(SimpleFlowDriver())).eval(_linear())
    assert seen == ["task1", "task2"]
    assert ctx.get("log") == ["task1", "task2"]


# -- interceptors ----------------------------------------------------------------------
def test_interceptor_call_order_around_a_linear_flow() -> None:
    spec = GraphSpec("order")
    spec.add_start("s").link_add("task1")
    spec.add_activity("task1").link_add("end")
    spec.add_end("end")
    events: list[str] = []
    engine = FlowEngine()
    engine.add_interceptor(_Recorder(events))
    engine.eval(spec.create())
    assert events == [
        "before-flow:order",
        "node-start:s",
        "node-end:s",
        "node-start:task1",
        "node-end:task1",
        "node-start:end",
        "node-end:end",
        "after-flow:order",
    ]


def test_interceptors_run_in_ascending_index_then_insertion_order() -> None:
    events: list[str] = []
    engine = FlowEngine()
    engine.add_interceptor(_Recorder(events, "c:"), 20)
    engine.add_interceptor(_Recorder(events, "a:"), 10)
    engine.add_interceptor(_Recorder(events, "b:"), 10)
    spec = GraphSpec("idx")
    spec.add_start("s")
    engine.eval(spec.create())
    assert [e for e in events if "node-start" in e] == [
        "a:node-start:s",
        "b:node-start:s",
        "c:node-start:s",
    ]
    assert events[:3] == ["a:before-flow:idx", "b:before-flow:idx", "c:before-flow:idx"]


def test_removed_interceptor_is_no_longer_called() -> None:
    events: list[str] = []
    engine = FlowEngine()
    interceptor = _Recorder(events)
    engine.add_interceptor(interceptor)
    engine.remove_interceptor(interceptor)
    engine.eval(_linear())
    assert events == []


def test_intercept_flow_that_does_not_invoke_skips_the_evaluation() -> None:
    class Veto(FlowInterceptor):
        def intercept_flow(self, invocation: FlowInvocation) -> None:
            pass

    engine = FlowEngine()
    engine.add_interceptor(Veto())
    ctx = engine.eval(_linear())
    assert ctx.get("log") is None
    assert ctx.last_node_id is None


def test_interrupt_in_on_node_start_prevents_the_task_and_the_outflow() -> None:
    class Block(FlowInterceptor):
        def on_node_start(self, ctx: FlowContext, node: Node) -> None:
            if node.id == "task1":
                ctx.interrupt()

    engine = FlowEngine()
    engine.add_interceptor(Block())
    ctx = engine.eval(_linear())
    assert ctx.get("log") is None
    assert ctx.last_node_id == "task1"
    assert ctx.is_stopped is False


def test_invocation_start_node_is_the_node_the_eval_resumes_from() -> None:
    starts: list[str] = []

    class Spy(FlowInterceptor):
        def intercept_flow(self, invocation: FlowInvocation) -> None:
            starts.append(invocation.start_node.id)
            assert invocation.context.exchanger is invocation.exchanger
            invocation.invoke()

    engine = FlowEngine()
    engine.add_interceptor(Spy())
    ctx = engine.eval(_linear(), steps=2)
    engine.eval(_linear(), ctx)
    assert starts == ["s", "task2"]
