"""Which graphs an instance of a root graph may hold states of (its call tree)."""

from __future__ import annotations

from flow import FlowEngine, Graph
from flow.workflow._root_graph import call_tree


def _calling(graph_id: str, *called: str) -> Graph:
    """A graph whose nodes call ``called`` in turn (``task: "#id"``)."""
    nodes = "".join(f'  - {{id: c{n}, task: "#{c}"}}\n' for n, c in enumerate(called))
    return Graph.from_text(
        f"id: {graph_id}\nlayout:\n  - {{id: s, type: start}}\n{nodes}  - {{id: e, type: end}}\n"
    )


def _engine(*graphs: Graph) -> FlowEngine:
    engine = FlowEngine()
    for graph in graphs:
        engine.load(graph)
    return engine


def test_the_call_tree_holds_the_root_and_every_graph_it_calls_at_any_depth() -> None:
    top, mid, leaf = _calling("top", "mid", "side"), _calling("mid", "leaf"), _calling("leaf")
    engine = _engine(top, mid, leaf, _calling("side"), _calling("apart"))
    assert call_tree(engine, top) == {"top", "mid", "leaf", "side"}
    assert call_tree(engine, leaf) == {"leaf"}


def test_a_graph_calling_itself_or_its_caller_ends_the_tree() -> None:
    ping, pong = _calling("ping", "pong", "ping"), _calling("pong", "ping")
    assert call_tree(_engine(ping, pong), ping) == {"ping", "pong"}


def test_a_graph_the_engine_lacks_at_any_depth_leaves_the_tree_unknown() -> None:
    top, mid = _calling("top", "mid"), _calling("mid", "gone")
    assert call_tree(_engine(top, mid), top) is None
    assert call_tree(_engine(top), top) is None
