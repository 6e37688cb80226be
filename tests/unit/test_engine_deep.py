"""Deep graphs: a long chain must not grow the Python stack and must run in linear time."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from flow import FlowContext, FlowEngine, Graph, GraphSpec, Node


def _count(ctx: FlowContext, node: Node) -> None:
    ctx.data["count"] = ctx.data.get("count", 0) + 1


def _chain(length: int, *, task: object = _count) -> Graph:
    spec = GraphSpec(f"chain-{length}")
    spec.add_start("s").link_add("n0")
    for i in range(length):
        spec.add_activity(f"n{i}", task=task).link_add(f"n{i + 1}" if i < length - 1 else "e")
    spec.add_end("e")
    return spec.create()


def _depth() -> int:
    frame = sys._getframe()
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


@contextmanager
def _stack_headroom(frames: int) -> Iterator[None]:
    """Allow only ``frames`` more Python frames than the caller already uses."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_depth() + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize("length", [1_000, 10_000])
def test_long_linear_graph_runs_every_node_once(length: int) -> None:
    ctx = FlowEngine().eval(_chain(length))
    assert ctx.get("count") == length
    assert ctx.last_node_id == "e"


def test_linear_walk_uses_constant_python_stack_depth() -> None:
    graph = _chain(10_000)
    engine = FlowEngine()
    with _stack_headroom(60):
        ctx = engine.eval(graph)
    assert ctx.get("count") == 10_000


def test_long_chain_of_script_tasks_runs() -> None:
    ctx = FlowEngine().eval(
        _chain(1_000, task="count = count + 1"), FlowContext.of().put("count", 0)
    )
    assert ctx.get("count") == 1_000


def test_long_chain_resumes_after_stop_near_the_end() -> None:
    def stop_at(ctx: FlowContext, node: Node) -> None:
        _count(ctx, node)
        if node.id == "n9990" and not ctx.get("resumed"):
            ctx.stop()

    engine = FlowEngine()
    graph = _chain(10_000, task=stop_at)
    ctx = engine.eval(graph)
    assert ctx.last_node_id == "n9990"
    ctx.put("resumed", True)
    with _stack_headroom(60):
        engine.eval(graph, ctx)
    assert ctx.get("count") == 10_001
    assert ctx.last_node_id == "e"


def test_many_sequential_parallel_diamonds_do_not_grow_the_stack() -> None:
    spec = GraphSpec("diamonds")
    spec.add_start("s").link_add("split0")
    rounds = 500
    for i in range(rounds):
        spec.add_parallel(f"split{i}").link_add(f"a{i}").link_add(f"b{i}")
        spec.add_activity(f"a{i}", task=_count).link_add(f"join{i}")
        spec.add_activity(f"b{i}", task=_count).link_add(f"join{i}")
        nxt = f"split{i + 1}" if i < rounds - 1 else "e"
        spec.add_parallel(f"join{i}").link_add(nxt)
    spec.add_end("e")
    graph = spec.create()
    with _stack_headroom(80):
        ctx = FlowEngine().eval(graph)
    assert ctx.get("count") == 2 * rounds
    assert ctx.last_node_id == "e"
