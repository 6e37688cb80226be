"""A built graph is immutable all the way down (issue 11 item 3).

A graph is shared by every instance and thread of a process: nothing a script or user code does
through ``node``/``node.graph`` may change it for the next instance.
"""

from __future__ import annotations

import contextlib
import copy
import json
import pickle
from typing import Any

import pytest

from flow import FlowContext, FlowEngine, FlowError, Graph, GraphSpec, ReadOnlyGraphError

TEXT = """
id: g
meta:
  $scripts: {approve: "approved = approved + 1"}
  roles: [a, [b, c]]
  form: {fields: [{name: amount, rules: {min: 1}}]}
layout:
  - id: s
    type: start
    meta: {actor: x, tags: [t1], deep: {k: [1, {v: 2}]}}
    link: {nextId: h, meta: {m: [1]}}
  - {id: h, when: hostile, task: "HOSTILE"}
  - {id: a, task: "$$scripts.approve"}
  - {id: e, type: end}
"""


def _graph(script: str = "x = 1") -> Graph:
    return Graph.from_text(TEXT.replace("HOSTILE", script.replace('"', '\\"')))


# -- scripts cannot change the graph for the next instance --------------------------------------
@pytest.mark.parametrize(
    "script",
    [
        'node.graph.meta["$scripts"].update({"approve": "approved = 100"})',
        'node.graph.meta.get("$scripts").setdefault("other", "approved = 100")',
        'node.graph.meta["$scripts"].pop("approve")',
        'node.graph.meta["$scripts"].clear()',
        'node.graph.meta["roles"].append("z")',
        'node.graph.meta["roles"][1].extend(["z"])',
        'node.graph.meta["roles"].clear()',
        'node.graph.meta["roles"].sort()',
        'node.graph.meta["form"]["fields"][0]["rules"].update({"min": 9})',
        'node.graph.nodes["s"].meta["tags"].insert(0, "z")',
        'node.graph.nodes["s"].meta["deep"]["k"][1].update({"v": 3})',
        'node.graph.links[0].meta["m"].remove(1)',
    ],
)
def test_a_script_cannot_change_graph_meta_for_later_instances(script: str) -> None:
    graph = _graph(script)
    before = graph.to_dict()
    engine = FlowEngine()
    with contextlib.suppress(FlowError):  # refusing loudly is fine; changing the graph is not
        engine.eval(graph, FlowContext.of("i1", {"hostile": True, "approved": 0}))
    assert graph.to_dict() == before
    later = engine.eval(graph, FlowContext.of("i2", {"approved": 0}))
    assert later.get("approved") == 1


# -- user code gets read-only objects ------------------------------------------------------------
def _mutations(graph: Graph) -> list[tuple[str, Any]]:
    s = graph.nodes["s"]
    link = s.next_links[0]
    return [
        ("graph meta item", lambda: graph.meta.__setitem__("x", 1)),
        ("nested mapping item", lambda: graph.meta["$scripts"].__setitem__("approve", "x")),
        ("nested list append", lambda: graph.meta["roles"].append(1)),
        ("nested list item", lambda: graph.meta["roles"].__setitem__(0, 1)),
        ("nested list del", lambda: graph.meta["roles"].__delitem__(0)),
        ("nested list +=", lambda: graph.meta["roles"].__iadd__([1])),
        ("nested list *=", lambda: graph.meta["roles"].__imul__(2)),
        ("nested list pop", lambda: graph.meta["roles"].pop()),
        ("nested list remove", lambda: graph.meta["roles"].remove("a")),
        ("nested list reverse", lambda: graph.meta["roles"].reverse()),
        ("deep list in node meta", lambda: s.meta["deep"]["k"].append(1)),
        ("deep mapping in node meta", lambda: s.meta["deep"]["k"][1].__setitem__("v", 0)),
        ("link meta list", lambda: link.meta["m"].append(2)),
        ("node attribute", lambda: setattr(s, "task", "x = 1")),
        ("node meta attribute", lambda: setattr(s, "meta", {})),
        ("node neighbours", lambda: setattr(s, "next_link_list", ())),
        ("node delete", lambda: delattr(s, "title")),
        ("link attribute", lambda: setattr(link, "next_id", "e")),
        ("link target", lambda: setattr(link, "next_node", None)),
        ("graph attribute", lambda: setattr(graph, "start", s)),
        ("graph id", lambda: setattr(graph, "id", "other")),
        ("graph nodes", lambda: graph.nodes.__setitem__("x", s)),  # type: ignore[attr-defined]
        ("graph links", lambda: graph.links.append(link)),  # type: ignore[attr-defined]
        ("neighbour list", lambda: s.next_nodes.append(s)),  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("index", range(24))
def test_every_part_of_a_graph_refuses_changes(index: int) -> None:
    graph = _graph()
    before = graph.to_dict()
    name, mutate = _mutations(graph)[index]
    with pytest.raises((TypeError, AttributeError)):
        mutate()
    assert graph.to_dict() == before, name


def test_graph_model_changes_raise_the_typed_read_only_error() -> None:
    graph = _graph()
    with pytest.raises(ReadOnlyGraphError, match=r"Node\.task of graph 'g' is read-only"):
        graph.nodes["s"].task = "x"  # type: ignore[misc]
    with pytest.raises(ReadOnlyGraphError, match="list in graph meta"):
        graph.meta["roles"].append("z")
    assert issubclass(ReadOnlyGraphError, FlowError)


def test_meta_reads_like_plain_dicts_and_lists() -> None:
    graph = _graph()
    roles = graph.meta["roles"]
    assert roles == ["a", ["b", "c"]] and isinstance(roles, list)
    assert str(roles) == "['a', ['b', 'c']]"
    assert graph.meta["form"] == {"fields": [{"name": "amount", "rules": {"min": 1}}]}
    assert graph.nodes["s"].meta_get("actor") == "x"
    assert graph.nodes["s"].meta_as_str("tags") == "['t1']"
    assert json.loads(json.dumps(graph.meta["roles"])) == ["a", ["b", "c"]]
    plain = [*roles, "z"]
    assert plain == ["a", ["b", "c"], "z"] and roles == ["a", ["b", "c"]]


def test_frozen_lists_copy_and_pickle() -> None:
    roles = _graph().meta["roles"]
    for clone in (copy.copy(roles), copy.deepcopy(roles), pickle.loads(pickle.dumps(roles))):
        assert clone == ["a", ["b", "c"]]


# -- specs and graphs do not share mutable state -------------------------------------------------
def test_editing_the_spec_after_create_does_not_change_the_graph() -> None:
    nested: dict[str, Any] = {"list": [1], "map": {"k": "v"}}
    spec = GraphSpec("g")
    spec.meta_put("nested", nested)
    spec.add_start("s", meta={"nested": nested}).link_add("e", meta={"nested": nested})
    spec.add_end("e")
    graph = spec.create()
    nested["list"].append(2)
    nested["map"]["k"] = "changed"
    spec.meta["new"] = 1
    spec.nodes["s"].meta["new"] = 1
    spec.load_notes.duplicate_ids.append("s")
    assert graph.meta == {"nested": {"list": [1], "map": {"k": "v"}}}
    assert graph.nodes["s"].meta == {"nested": {"list": [1], "map": {"k": "v"}}}
    assert graph.links[0].meta == {"nested": {"list": [1], "map": {"k": "v"}}}
    assert graph.validate() == []


def test_from_graph_gives_plain_editable_meta_and_leaves_the_graph_alone() -> None:
    graph = _graph()
    spec = GraphSpec.from_graph(graph)
    spec.meta["roles"].append("z")
    spec.meta["$scripts"]["approve"] = "approved = 2"
    spec.nodes["s"].meta["deep"]["k"].append(3)
    spec.nodes["s"].links[0].meta["m"].append(2)
    assert type(spec.meta["roles"]) is list and type(spec.meta["$scripts"]) is dict
    edited = spec.create()
    assert edited.meta["roles"] == ["a", ["b", "c"], "z"]
    assert graph.meta["roles"] == ["a", ["b", "c"]]
    assert graph.meta["$scripts"]["approve"] == "approved = approved + 1"
    assert graph.nodes["s"].meta["deep"]["k"] == [1, {"v": 2}]
    assert graph.links[0].meta["m"] == [1]


def test_export_round_trips_frozen_meta() -> None:
    graph = _graph()
    for text in (graph.to_yaml(), graph.to_json()):
        assert Graph.from_text(text).to_dict() == graph.to_dict()
