"""Loop nodes: ``$for`` over ``$in`` (list, context variable, range text), loop ends, nesting."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flow import (
    FlowContext,
    FlowEngine,
    FlowError,
    Graph,
    GraphDefinitionError,
    GraphSpec,
    MapContainer,
    Node,
    SimpleFlowDriver,
    TaskError,
)


def _collect(ctx: FlowContext, node: Node) -> None:
    ctx.data.setdefault("seen", []).append(ctx.get("item"))


def _loop_graph(source: Any) -> Graph:
    spec = GraphSpec("loop")
    spec.add_start("s").link_add("for")
    spec.add_loop("for", meta={"$for": "item", "$in": source}).link_add("body")
    spec.add_activity("body", task=_collect).link_add("next")
    spec.add_loop("next").link_add("after")
    spec.add_activity("after", task=lambda c, n: c.put("after", c.get("item"))).link_add("e")
    spec.add_end("e")
    return spec.create()


def test_loop_over_a_list_runs_the_body_per_item() -> None:
    ctx = FlowEngine().eval(_loop_graph(["a", "b", "c"]))
    assert ctx.get("seen") == ["a", "b", "c"]
    assert ctx.last_node_id == "e"


def test_loop_end_continues_once_after_the_last_item() -> None:
    ctx = FlowEngine().eval(_loop_graph([1, 2, 3]))
    assert ctx.get("after") == 3


def test_loop_over_a_context_variable_iterates_its_value() -> None:
    ctx = FlowEngine().eval(_loop_graph("items"), FlowContext.of().put("items", (4, 5)))
    assert ctx.get("seen") == [4, 5]


def test_loop_over_a_context_iterator_consumes_it() -> None:
    def numbers() -> Iterator[int]:
        yield from range(3)

    ctx = FlowEngine().eval(_loop_graph("gen"), FlowContext.of().put("gen", numbers()))
    assert ctx.get("seen") == [0, 1, 2]


@pytest.mark.parametrize(
    ("text", "items"),
    [("1...4", [1, 2, 3]), ("0:10:4", [0, 4, 8]), ("5...1", None)],
)
def test_loop_over_a_range_text_excludes_the_end(text: str, items: list[int] | None) -> None:
    assert FlowEngine().eval(_loop_graph(text)).get("seen") == items


def test_loop_over_no_items_ends_the_branch_at_the_loop_node() -> None:
    """As in the reference: the loop flows out once per item, so with none nothing follows."""
    ctx = FlowEngine().eval(_loop_graph("5...1"))
    assert ctx.get("seen") is None
    assert ctx.get("after") is None
    assert ctx.last_node_id == "for"


def test_loop_variable_keeps_its_last_value_after_the_loop() -> None:
    ctx = FlowEngine().eval(_loop_graph(["a", "b", "c"]))
    assert ctx.get("item") == "c"


@pytest.mark.parametrize(("text", "last"), [("1...9", 8), ("1:3:1", 2)])
def test_reference_demo_loops_leave_the_last_range_value(text: str, last: int) -> None:
    graph = Graph.from_text(
        "id: demo\nlayout:\n"
        f"  - {{type: loop, meta: {{'$for': itemId, '$in': '{text}'}}}}\n"
        "  - task: 'context.put(\"temp\", itemId)'\n"
    )
    assert FlowEngine().eval(graph).get("temp") == last


_FETCH = """
id: fetch2
layout:
  - task: "@community"
  - { type: loop, id: fetch-album, meta: { "$for": "communityId", "$in": "communityIds" } }
  - task: "@album"
  - { type: loop, id: fetch-course,  meta: { "$for": "albumId", "$in": "albumIds" } }
  - task: "@course"
  - { type: loop, id: fetch-content, meta: { "$for": "courseId", "$in": "courseIds" } }
  - task: "@content"
  - {type: loop, id: fetch-content_end}
  - task: "@count_a"
  - {type: loop, id: fetch-course_end}
  - task: "@count_b"
  - {type: loop, id: fetch-album_end}
  - task: "@count_c"
"""


def _fetch_container() -> MapContainer:
    def count(key: str) -> Any:
        return lambda ctx, node: ctx.put(key, ctx.get(key, 0) + 1)

    container = MapContainer()
    container.put_component("community", lambda c, n: c.put("communityIds", ["a1", "a2", "a3"]))
    container.put_component(
        "album", lambda c, n: c.put("albumIds", [f"{c.get('communityId')}_b{i}" for i in (1, 2, 3)])
    )
    container.put_component(
        "course", lambda c, n: c.put("courseIds", [f"{c.get('albumId')}_c{i}" for i in (1, 2, 3)])
    )
    container.put_component("content", lambda c, n: c.put(f"content_{c.get('courseId')}", 1))
    for key in ("a", "b", "c"):
        container.put_component(f"count_{key}", count(key))
    return container


def test_nested_loops_close_innermost_first() -> None:
    engine = FlowEngine(SimpleFlowDriver(container=_fetch_container()))
    ctx = engine.eval(Graph.from_text(_FETCH))
    assert (ctx.get("a"), ctx.get("b"), ctx.get("c")) == (9, 3, 1)
    assert sum(1 for key in ctx.data if key.startswith("content_")) == 27


def test_nested_loops_without_loop_ends_run_the_tail_per_innermost_item() -> None:
    text = _FETCH.split("  - {type: loop, id: fetch-content_end}")[0]
    engine = FlowEngine(SimpleFlowDriver(container=_fetch_container()))
    ctx = engine.eval(Graph.from_text(text))
    assert sum(1 for key in ctx.data if key.startswith("content_")) == 27
    assert ctx.get("a") is None


def test_loop_in_that_is_neither_list_nor_text_is_a_graph_definition_error() -> None:
    with pytest.raises(GraphDefinitionError, match="must be a list or a string"):
        FlowEngine().eval(_loop_graph(5))


def test_loop_over_a_bad_range_text_is_a_graph_definition_error() -> None:
    with pytest.raises(GraphDefinitionError, match="step must be > 0"):
        FlowEngine().eval(_loop_graph("1:5:0"))


@pytest.mark.parametrize("value", [None, 7, "text", {"k": 1}])
def test_loop_over_a_variable_that_is_not_a_collection_raises_flow_error(value: Any) -> None:
    ctx = FlowContext.of().put("items", value)
    with pytest.raises(FlowError, match="'items' is not a collection"):
        FlowEngine().eval(_loop_graph("items"), ctx)


def test_loop_end_without_an_open_loop_passes_through() -> None:
    spec = GraphSpec("lonely-end")
    spec.add_start("s").link_add("end_loop")
    spec.add_loop("end_loop", task=_collect).link_add("e")
    spec.add_end("e")
    ctx = FlowEngine().eval(spec.create())
    assert ctx.get("seen") == [None]
    assert ctx.last_node_id == "e"


def test_an_iterator_that_fails_while_a_loop_takes_its_next_item_is_a_task_error() -> None:
    """Escaped bare (a ValueError), where the same failure in a task or a condition is
    typed and names graph and node."""

    def feed() -> Iterator[int]:
        yield 1
        raise ValueError("feed broke")

    graph = _loop_graph("items")
    with pytest.raises(TaskError, match="loop / for") as raised:
        FlowEngine().eval(graph, FlowContext.of("inst-3", {"items": feed()}))
    assert raised.value.instance_id == "inst-3"
    assert isinstance(raised.value.__cause__, ValueError)
