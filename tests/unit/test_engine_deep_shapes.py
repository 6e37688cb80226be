"""Deep graphs of every shape run in constant Python stack depth (issue 11 item 9).

A node with several branches used to recurse into every branch but the last, so a 500-node
graph whose nodes each split raised a raw RecursionError. Walks are now iterative; sub-graph
calls, which go through the driver, nest at most ``FlowEngine.max_depth`` deep.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from flow import FlowContext, FlowEngine, Graph, GraphDefinitionError, GraphSpec, Node
from flow.workflow import (
    BlockStateController,
    InMemoryStateRepository,
    NotBlockStateController,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)


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


def _mark(ctx: FlowContext, node: Node) -> None:
    ctx.data.setdefault("ran", []).append(node.id)


def _forks(length: int, node_type: str, *, first: str = "next") -> Graph:
    """``length`` nodes in a chain, each also linking to the end: the chain goes on through
    the first link (``first="next"``, the branch the old walk recursed into) or the last."""
    spec = GraphSpec(f"forks-{node_type}-{length}-{first}")
    spec.add_start("s").link_add("n0")
    for i in range(length):
        following = f"n{i + 1}" if i + 1 < length else "e"
        node = spec.add_node(_node(f"n{i}", node_type))
        for target in (following, "e") if first == "next" else ("e", following):
            node.link_add(target)
    spec.add_end("e")
    return spec.create()


def _node(node_id: str, node_type: str) -> Any:
    from flow.node_type import NodeType
    from flow.spec import NodeSpec

    task = _mark if node_type == "activity" else None
    return NodeSpec(node_id, NodeType.of(node_type), task=task)


SHAPES = ["activity", "parallel", "inclusive", "exclusive"]


@pytest.mark.parametrize("node_type", SHAPES)
@pytest.mark.parametrize("length", [500, 5_000])
@pytest.mark.parametrize("first", ["next", "end"])
def test_deep_forking_graphs_evaluate_in_constant_stack(
    node_type: str, length: int, first: str
) -> None:
    graph = _forks(length, node_type, first=first)
    engine = FlowEngine()
    with _stack_headroom(80):
        ctx = engine.eval(graph)
    if node_type == "activity":
        assert ctx.get("ran") == [f"n{i}" for i in range(length)]
    assert ctx.trace.is_end(graph.id)


@pytest.mark.parametrize("node_type", SHAPES)
def test_deep_forking_graphs_run_through_the_workflow_layer(node_type: str) -> None:
    graph = _forks(2_000, node_type)
    engine = FlowEngine()
    engine.load(graph)
    repo = InMemoryStateRepository()
    with _stack_headroom(150):
        auto = WorkflowExecutor(engine, NotBlockStateController(), repo)
        assert auto.claim_task(graph, FlowContext.of("i1")) is None
    states = repo.states("i1")
    passed = 1 if node_type == "exclusive" else 2_000  # an exclusive takes its last default
    assert all(states[f"{graph.id}:n{i}"] == TaskState.COMPLETED for i in range(passed))


def test_back_through_a_long_chain_of_gateways_runs_in_constant_stack() -> None:
    spec = GraphSpec("gateways")
    spec.add_start("s").link_add("g0")
    for i in range(3_000):
        spec.add_exclusive(f"g{i}").link_add(f"g{i + 1}" if i < 2_999 else "task")
    spec.add_activity("task").link_add("e")
    spec.add_end("e")
    graph = spec.create()
    engine = FlowEngine()
    repo = InMemoryStateRepository()
    executor = WorkflowExecutor(engine, BlockStateController(), repo)
    ctx = FlowContext.of("i1")
    task = executor.claim_task(graph, ctx)
    assert task is not None and task.node.id == "task"
    with _stack_headroom(150):
        executor.submit_task(task, TaskAction.BACK, ctx)
    assert repo.states("i1") == {}


def test_iterative_walk_keeps_the_reference_order_across_splits() -> None:
    """Conditions of later links are tested after the earlier branch finished."""
    seen: list[str] = []

    def cond(name: str) -> Any:
        def test(ctx: FlowContext) -> bool:
            seen.append(f"test {name}")
            return True

        return test

    def task(ctx: FlowContext, node: Node) -> None:
        seen.append(node.id)

    spec = GraphSpec("order")
    spec.add_start("s").link_add("a", when=cond("a")).link_add("b", when=cond("b"))
    spec.add_activity("a", task=task).link_add("a1").link_add("a2", when=cond("a2"))
    spec.add_activity("a1", task=task)
    spec.add_activity("a2", task=task)
    spec.add_parallel("b", task=task).link_add("b1").link_add("b2")
    spec.add_activity("b1", task=task)
    spec.add_activity("b2", task=task)
    FlowEngine().eval(spec.create())
    assert seen == ["test a", "a", "a1", "test a2", "a2", "test b", "b", "b1", "b2"]


# -- sub-graphs ----------------------------------------------------------------------------------
def _nested(engine: FlowEngine, levels: int) -> Graph:
    for level in range(levels):
        spec = GraphSpec(f"g{level}")
        task = f"#g{level + 1}" if level + 1 < levels else "done = 1"
        spec.add_start("s").link_add("call")
        spec.add_activity("call", task=task).link_add("e")
        spec.add_end("e")
        engine.load(spec.create())
    return engine.get_graph_or_throw("g0")


def test_sub_graphs_nest_up_to_max_depth() -> None:
    engine = FlowEngine()
    graph = _nested(engine, FlowEngine.MAX_DEPTH + 1)  # the root plus 32 nested calls
    ctx = engine.eval(graph)
    assert ctx.get("done") == 1
    assert ctx.trace.is_end("g0")


@pytest.mark.parametrize("levels", [34, 500, 5_000])
def test_sub_graphs_nested_deeper_than_max_depth_raise_a_typed_error(levels: int) -> None:
    engine = FlowEngine()
    graph = _nested(engine, levels)
    with pytest.raises(GraphDefinitionError, match=r"more than 32 sub-graphs deep") as caught:
        engine.eval(graph)
    assert caught.value.graph_id == "g32"


def test_a_graph_calling_itself_raises_a_typed_error() -> None:
    engine = FlowEngine()
    spec = GraphSpec("self")
    spec.add_start("s").link_add("again")
    spec.add_activity("again", task="#self").link_add("e")
    spec.add_end("e")
    engine.load(spec.create())
    with pytest.raises(GraphDefinitionError, match="does a graph call itself"):
        engine.eval("self")
    executor = WorkflowExecutor(engine, NotBlockStateController())
    with pytest.raises(GraphDefinitionError, match="does a graph call itself"):
        executor.claim_task("self", FlowContext.of("i1"))


def test_max_depth_is_configurable() -> None:
    engine = FlowEngine(max_depth=2)
    graph = _nested(engine, 4)
    with pytest.raises(GraphDefinitionError, match="more than 2 sub-graphs deep"):
        engine.eval(graph)
    deep = FlowEngine(max_depth=60)
    assert deep.eval(_nested(deep, 61)).get("done") == 1
