"""A graph built in code is held to the rules the loader applies to text: each field has its
declared type, every text is valid Unicode, every node has an id. A wrong value is refused by
``create()`` with a GraphDefinitionError naming the graph, the node and the field — not an
AttributeError or TypeError from an export or a picture later."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from flow import Graph, GraphDefinitionError, GraphSpec, NodeNotFoundError, NodeSpec, NodeType

Build = Callable[[GraphSpec], object]


def refusal(create: Callable[[], object]) -> GraphDefinitionError:
    """The GraphDefinitionError ``create`` raises, for its message and graph id."""
    with pytest.raises(GraphDefinitionError) as caught:
        create()
    return caught.value


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: s.add_start(1), "The id of node #1 of graph 'g' must be a string, not int"),
        (
            lambda s: s.add_start("s").link_add(2),
            "The nextId of a link of node 's' of graph 'g' must be a string, not int",
        ),
        (
            lambda s: s.add_start("s").link_add("e", priority="1"),
            "The priority of link s -> e of graph 'g' must be an integer, not str",
        ),
        (
            lambda s: s.add_start("s").link_add("e", priority=True),
            "The priority of link s -> e of graph 'g' must be an integer, not bool",
        ),
        (
            lambda s: s.add_start("s").link_add("e", priority=float("nan")),
            "The priority of link s -> e of graph 'g' must be an integer, not float",
        ),
        (
            lambda s: s.add_start("s").link_add("e", priority=10**5000),
            "The priority of link s -> e of graph 'g' is an integer of more than 4,300 decimal",
        ),
        (
            lambda s: s.add_node(NodeSpec("s", "start")),  # type: ignore[arg-type]
            "The type of node 's' of graph 'g' must be a NodeType, not str",
        ),
        (
            lambda s: s.add_start("s", title=5),  # type: ignore[typeddict-item]
            "The title of node 's' of graph 'g' must be a string, not int",
        ),
        (
            lambda s: s.add_start("s").link_add("e", title=5),  # type: ignore[arg-type]
            "The title of link s -> e of graph 'g' must be a string, not int",
        ),
    ],
)
def test_a_wrong_field_given_in_code_is_refused_when_the_graph_is_created(
    build: Build, message: str
) -> None:
    spec = GraphSpec("g")
    build(spec)
    error = refusal(spec.create)
    assert str(error).startswith(message)
    assert error.graph_id == "g"


@pytest.mark.parametrize(
    ("field", "message"),
    [("title", "The title of graph 'g'"), ("driver", "The driver of graph 'g'")],
)
def test_a_graph_title_or_driver_that_is_not_text_is_refused(field: str, message: str) -> None:
    spec = GraphSpec("g")
    spec.add_start("s")
    setattr(spec, field, 7)
    assert str(refusal(spec.create)).startswith(f"{message} must be a string, not int")


def test_a_node_built_with_an_empty_id_is_refused_as_text_never_has_one() -> None:
    """Text names a node without an id 'n-<position>', so an empty id exported from code
    would load back as another node and leave its links dangling."""
    spec = GraphSpec("g")
    spec.add_start("s").link_add("")
    spec.add_activity("").link_add("e")
    spec.add_end("e")
    assert str(refusal(spec.create)) == "The id of node #2 of graph 'g' is empty"
    assert Graph.from_text("id: g\nlayout: [{id: '', type: start}]").start.id == "n-1"


def test_a_node_whose_id_changed_after_it_was_added_is_refused() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").id = "t"
    with pytest.raises(GraphDefinitionError, match="is 't' but the node was added as 's'"):
        spec.create()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: s.add_activity(["a"]), "A node id of graph 'g' must be a string, not list"),
        (lambda s: s.add_node(NodeSpec({})), "A node id of graph 'g' must be a string, not dict"),
        (lambda s: s.add_node("a"), "Graph 'g' takes a NodeSpec as a node, not str"),
        (lambda s: s.add_node(None), "Graph 'g' takes a NodeSpec as a node, not NoneType"),
    ],
)
def test_a_node_that_cannot_be_added_is_refused_when_added(build: Build, message: str) -> None:
    """An id that cannot key the nodes failed with a bare TypeError (unhashable), anything but
    a NodeSpec with an AttributeError."""
    spec = GraphSpec("g")
    error = refusal(lambda: build(spec))
    assert (str(error), error.graph_id, spec.nodes) == (message, "g", {})


def test_an_id_no_node_can_have_is_looked_up_as_a_missing_node() -> None:
    """As ``Graph.get_node``/``get_node_or_throw`` answer it (it was a bare TypeError)."""
    spec = GraphSpec("g")
    spec.add_start("s")
    assert spec.get_node(["s"]) is None
    with pytest.raises(NodeNotFoundError, match="in graph 'g'"):
        spec.remove_node(["s"])
    spec.remove_node("s")
    assert spec.nodes == {}


def test_node_spec_repr_shows_a_type_given_as_text() -> None:
    assert repr(NodeSpec("s", "start")) == "NodeSpec('s', 'start')"  # type: ignore[arg-type]


def test_an_int_subclass_priority_is_kept_as_a_plain_int_that_exports() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("e", priority=NodeType.END)
    spec.add_end("e")
    graph = spec.create()
    assert type(graph.links[0].priority) is int
    assert "priority: 2" in graph.to_yaml()


# -- lone surrogates ---------------------------------------------------------------------------
_NODE = {"id": "a", "type": "start"}
SURROGATE_DOCUMENTS: list[tuple[dict[str, Any], str]] = [
    ({"id": "g", "title": "\ud800", "layout": [_NODE]}, "The title of graph 'g'"),
    ({"id": "g", "driver": "d\ud800", "layout": [_NODE]}, "The driver of graph 'g'"),
    ({"id": "g", "layout": [{**_NODE, "title": "x\ud800y"}]}, "The title of node 'a' of graph 'g'"),
    (
        {"id": "g", "layout": [{**_NODE, "when": "x\udfff"}]},
        "The condition of node 'a' of graph 'g'",
    ),
    (
        {"id": "g", "layout": [{**_NODE, "task": "x = '\udfff'"}]},
        "The task of node 'a' of graph 'g'",
    ),
    (
        {"id": "g", "layout": [{**_NODE, "link": [{"nextId": "a", "title": "\ud800"}]}]},
        "The title of link a -> a of graph 'g'",
    ),
    (
        {"id": "g", "layout": [{**_NODE, "link": [{"nextId": "a", "when": "\ud800"}]}]},
        "The condition of link a -> a of graph 'g'",
    ),
    (
        {"id": "g", "layout": [{**_NODE, "link": [{"nextId": "a", "condition": "\ud800"}]}]},
        "The condition of link a -> a of graph 'g'",
    ),
]


@pytest.mark.parametrize(("document", "message"), SURROGATE_DOCUMENTS)
def test_text_with_a_lone_surrogate_is_refused_at_load_naming_the_field(
    document: dict[str, Any], message: str
) -> None:
    """Such text loaded and validated, then made every export, picture and terminal fail."""
    for load in (Graph.from_dict, lambda d: Graph.from_text(json.dumps(d))):
        error = refusal(lambda: load(document))  # noqa: B023 - called at once
        assert str(error).startswith(f"{message} is not valid Unicode text (lone surrogate)")
        assert error.graph_id == "g"
        assert "\\ud" in str(error)  # printable and loggable


def test_a_lone_surrogate_given_in_code_is_refused_by_create() -> None:
    spec = GraphSpec("g", title="t\ud800")
    spec.add_start("s")
    assert str(refusal(spec.create)).startswith("The title of graph 'g' is not valid Unicode")
    spec = GraphSpec("g")
    spec.add_start("s", title="\udc00")
    message = str(refusal(spec.create))
    assert message.startswith("The title of node 's' of graph 'g' is not valid Unicode")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda s: s.add_start("s", meta=5),  # type: ignore[typeddict-item]
            "The meta of node 's' must be a mapping, not int",
        ),
        (
            lambda s: s.add_start("s").link_add("e", meta="ab"),  # type: ignore[arg-type]
            "The meta of link to 'e' must be a mapping, not str",
        ),
    ],
)
def test_a_meta_that_is_not_a_mapping_is_refused_when_given(build: Build, message: str) -> None:
    error = refusal(lambda: build(GraphSpec("g")))
    assert str(error).startswith(message)


def _spec_with(edit: Callable[[GraphSpec], None]) -> GraphSpec:
    spec = GraphSpec("g")
    spec.add_exclusive("s")
    spec.add_end("e")
    edit(spec)
    return spec


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s.nodes["s"].links.append("e"),  # type: ignore[arg-type]
            "Link #1 of node 's' of graph 'g' must be a LinkSpec",
        ),
        (
            lambda s: setattr(s.nodes["s"], "links", None),
            "The links of node 's' of graph 'g' must be a list of LinkSpec, not NoneType",
        ),
        (
            lambda s: s.nodes.__setitem__("x", "x"),  # type: ignore[arg-type]
            "Node #3 of graph 'g' ('x') must be a NodeSpec, not str",
        ),
        (
            lambda s: s.nodes["s"].link_add("e", when=5),
            "The condition of link s -> e of graph 'g' must be a string or a component",
        ),
        (
            lambda s: setattr(s.nodes["e"], "task", b"x"),
            "The task of node 'e' of graph 'g' must be a string or a component object, not bytes",
        ),
        (
            lambda s: setattr(s.nodes["s"], "meta", 0),
            "The meta of node 's' in graph 'g' must be a mapping, not int",
        ),
        (
            lambda s: setattr(s.nodes["s"], "meta", []),
            "The meta of node 's' in graph 'g' must be a mapping, not list",
        ),
    ],
)
def test_a_spec_edited_by_hand_into_a_wrong_shape_is_refused_by_create(
    edit: Callable[[GraphSpec], None], message: str
) -> None:
    error = refusal(_spec_with(edit).create)
    assert str(error).startswith(message)
    assert error.graph_id == "g"
