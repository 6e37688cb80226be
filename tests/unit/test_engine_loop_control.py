"""Loop nodes honour ``stop()`` and ``steps=`` (issue 11 item 4; semantics.md §2 "Steps").

A loop used to keep taking items after the evaluation stopped — forever with an endless
iterator — because only the nodes of its body checked the stop flag.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from flow import FlowContext, FlowEngine, Graph, GraphSpec, Node


def _loop(source: Any, body: Any) -> Graph:
    spec = GraphSpec("loop")
    spec.add_start("s").link_add("for")
    spec.add_loop("for", meta={"$for": "item", "$in": source}).link_add("body")
    spec.add_activity("body", task=body).link_add("next")
    spec.add_loop("next").link_add("after")
    spec.add_activity("after", task=lambda c, n: c.put("after", True)).link_add("e")
    spec.add_end("e")
    return spec.create()


def _collect(ctx: FlowContext, node: Node) -> None:
    ctx.data.setdefault("seen", []).append(ctx.get("item"))


def _stop_at(item: int) -> Any:
    def body(ctx: FlowContext, node: Node) -> None:
        _collect(ctx, node)
        if ctx.get("item") == item:
            ctx.stop()

    return body


@pytest.mark.parametrize("source", ["items", "0:1000000000000:1", "0...1000000000000"])
def test_stop_in_a_loop_body_ends_the_loop(source: str) -> None:
    ctx = FlowContext.of("i", {"items": itertools.count()})
    FlowEngine().eval(_loop(source, _stop_at(5)), ctx)
    assert ctx.get("seen") == [0, 1, 2, 3, 4, 5]
    assert ctx.is_stopped and ctx.get("item") == 5 and ctx.get("after") is None
    assert ctx.last_node_id == "body"


def test_stop_ends_a_finite_loop_without_taking_more_items() -> None:
    taken: list[int] = []

    def items() -> Any:
        for i in range(10):
            taken.append(i)
            yield i

    ctx = FlowContext.of("i", {"items": items()})
    FlowEngine().eval(_loop("items", _stop_at(2)), ctx)
    assert ctx.get("seen") == [0, 1, 2]
    # The reference looks one item ahead (hasNext) before running an item's last branch;
    # after the stop the loop asks for nothing more.
    assert taken == [0, 1, 2, 3]


@pytest.mark.parametrize("steps", [0, 1, 3, 10, 25])
def test_steps_bound_a_loop_over_an_endless_iterator(steps: int) -> None:
    ctx = FlowContext.of("i", {"items": itertools.count()})
    FlowEngine().eval(_loop("items", _collect), ctx, steps=steps)
    assert ctx.is_stopped
    # start, loop start, then body and loop end per item: the budget caps the items run
    assert len(ctx.get("seen", [])) <= max(0, steps - 2)


def test_interrupt_in_a_loop_body_ends_only_that_iteration() -> None:
    def body(ctx: FlowContext, node: Node) -> None:
        _collect(ctx, node)
        if ctx.get("item") == 1:
            ctx.interrupt()

    ctx = FlowEngine().eval(_loop([0, 1, 2], body))
    assert ctx.get("seen") == [0, 1, 2]
    assert not ctx.is_stopped and ctx.get("after") is True


def test_stop_in_a_nested_loop_ends_both_loops() -> None:
    spec = GraphSpec("nested")
    spec.add_start("s").link_add("outer")
    spec.add_loop("outer", meta={"$for": "x", "$in": "outer_items"}).link_add("inner")
    spec.add_loop("inner", meta={"$for": "y", "$in": "0:1000000000:1"}).link_add("body")

    def body(ctx: FlowContext, node: Node) -> None:
        ctx.data.setdefault("seen", []).append((ctx.get("x"), ctx.get("y")))
        if ctx.get("y") == 2:
            ctx.stop()

    spec.add_activity("body", task=body).link_add("inner_end")
    spec.add_loop("inner_end").link_add("outer_end")
    spec.add_loop("outer_end").link_add("e")
    spec.add_end("e")
    ctx = FlowContext.of("i", {"outer_items": itertools.count()})
    FlowEngine().eval(spec.create(), ctx)
    assert ctx.get("seen") == [(0, 0), (0, 1), (0, 2)]


def test_stop_in_a_task_after_a_split_inside_a_loop_ends_the_loop() -> None:
    """The stop happens in the first of two branches; the loop must not take another item."""
    spec = GraphSpec("split")
    spec.add_start("s").link_add("for")
    spec.add_loop("for", meta={"$for": "item", "$in": "items"}).link_add("a").link_add("b")
    spec.add_activity("a", task=_stop_at(3))
    spec.add_activity("b", task=lambda c, n: c.data.setdefault("b", []).append(c.get("item")))
    ctx = FlowContext.of("i", {"items": itertools.count()})
    FlowEngine().eval(spec.create(), ctx)
    assert ctx.get("seen") == [0, 1, 2, 3]
    assert ctx.get("b") == [0, 1, 2]
