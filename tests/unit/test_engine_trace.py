"""FlowTrace and NodeRecord: what the engine resumes from."""

from __future__ import annotations

from flow import FlowTrace, Graph, GraphSpec, NodeRecord, NodeType


def _graph(graph_id: str) -> Graph:
    spec = GraphSpec(graph_id)
    spec.add_start("s").link_add("a")
    spec.add_activity("a", title="A").link_add("e")
    spec.add_end("e")
    return spec.create()


def test_record_node_keeps_the_last_node_per_graph() -> None:
    g = _graph("g")
    trace = FlowTrace()
    trace.record_node(g, g.get_node_or_throw("s"))
    trace.record_node(g, g.get_node_or_throw("a"))
    record = trace.last_record("g")
    assert record is not None
    assert (record.graph_id, record.id, record.title, record.type) == (
        "g",
        "a",
        "A",
        NodeType.ACTIVITY,
    )


def test_root_graph_is_the_first_graph_recorded_after_clear() -> None:
    main, sub = _graph("main"), _graph("sub")
    trace = FlowTrace()
    trace.record_node(main, main.start)
    trace.record_node(sub, sub.get_node_or_throw("a"))
    assert trace.root_graph_id == "main"
    assert trace.last_node_id() == "s"
    assert trace.last_node_id("sub") == "a"
    trace.clear()
    trace.record_node(sub, sub.start)
    assert trace.root_graph_id == "sub"


def test_recording_none_forgets_the_graph() -> None:
    g = _graph("g")
    trace = FlowTrace()
    trace.record_node(g, g.start)
    trace.record_node(g, None)
    assert trace.last_record("g") is None


def test_last_node_is_the_start_node_when_nothing_is_recorded() -> None:
    g = _graph("g")
    assert FlowTrace().last_node(g) is g.start


def test_is_end_is_true_only_when_the_last_record_is_an_end_node() -> None:
    g = _graph("g")
    trace = FlowTrace()
    assert trace.is_end("g") is False
    trace.record_node(g, g.get_node_or_throw("a"))
    assert trace.is_end("g") is False
    trace.record_node(g, g.get_node_or_throw("e"))
    assert trace.is_end("g") is True
    assert trace.is_end() is True


def test_disabled_trace_records_nothing_and_answers_empty() -> None:
    g = _graph("g")
    trace = FlowTrace()
    trace.record_node(g, g.get_node_or_throw("e"))
    trace.enabled = False
    trace.record_node(g, g.get_node_or_throw("a"))
    assert trace.last_record("g") is None
    assert trace.last_node_id("g") is None
    assert trace.is_end("g") is False
    assert trace.last_node(g) is g.start
    trace.enabled = True
    assert trace.last_node_id("g") == "e"


def test_node_record_is_end_follows_its_type() -> None:
    end = NodeRecord(graph_id="g", id="e", title=None, type=NodeType.END, timestamp=0)
    act = NodeRecord(graph_id="g", id="a", title=None, type=NodeType.ACTIVITY, timestamp=0)
    assert (end.is_end, act.is_end) == (True, False)
