"""Export (semantics.md §1): to_dict / to_json / to_yaml in loader shape, and round trips."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flow.errors import GraphDefinitionError
from flow.graph import Graph
from flow.spec import GraphSpec


def shape(graph: Graph) -> tuple[Any, ...]:
    """Everything a graph means, for comparing a graph with its re-parsed export."""
    nodes = [
        (
            n.id,
            n.type,
            n.title,
            dict(n.meta),
            n.when,
            n.task,
            [(k.next_id, k.title, dict(k.meta), k.when, k.priority) for k in n._links],
        )
        for n in graph.nodes.values()
    ]
    return (graph.id, graph.title, graph.driver, dict(graph.meta), graph.start.id, nodes)


def test_reference_parallel_graph_exports_exactly_like_the_reference() -> None:
    spec = GraphSpec("c1")
    spec.add_start("s1")
    spec.add_parallel("p1").link_add("n1").link_add("n2")
    spec.add_activity("n1").link_add("e1")
    spec.add_activity("n2").link_add("e1")
    spec.add_end("e1")
    assert spec.create().to_json() == (
        '{"id":"c1","title":"c1","layout":[{"id":"s1","type":"start"},'
        '{"id":"p1","type":"parallel","link":[{"nextId":"n1"},{"nextId":"n2"}]},'
        '{"id":"n1","type":"activity","link":[{"nextId":"e1"}]},'
        '{"id":"n2","type":"activity","link":[{"nextId":"e1"}]},'
        '{"id":"e1","type":"end"}]}'
    )


def _reference_c1() -> GraphSpec:
    spec = GraphSpec("c1")
    spec.add_start("s1")
    spec.add_parallel("p1").link_add("n1").link_add("n2")
    spec.add_activity("n1").link_add("e1")
    spec.add_activity("n2").link_add("e1")
    spec.add_end("e1")
    return spec


_REFERENCE_UPDATED = (
    '{"id":"c1","title":"c1","layout":[{"id":"s1","type":"start","link":[{"nextId":"p1"}]},'
    '{"id":"p1","type":"parallel","link":[{"nextId":"n1"},{"nextId":"n2"},{"nextId":"n3"}]},'
    '{"id":"n1","type":"activity","link":[{"nextId":"e1"}]},'
    '{"id":"n2","type":"activity","link":[{"nextId":"e1"}]},'
    '{"id":"e1","type":"end"},'
    '{"id":"n3","type":"activity","link":[{"nextId":"e1"}]}]}'
)


def _add_branch_n3(spec: GraphSpec) -> GraphSpec:
    """The reference's edit: p1 replaced with a third branch, n3 appended after the end node."""
    spec.add_parallel("p1").link_add("n1").link_add("n2").link_add("n3")
    spec.add_activity("n3").link_add("e1")
    return spec


def test_reparsed_then_edited_graph_exports_exactly_like_the_reference() -> None:
    """Graph.copy in the reference: from its own JSON, then edited; the end node is no longer
    last and has no links, and is exported without ``link`` as when built directly."""
    reparsed = Graph.from_text(_reference_c1().create().to_json())
    assert _add_branch_n3(GraphSpec.from_graph(reparsed)).create().to_json() == _REFERENCE_UPDATED
    direct = GraphSpec.from_text(_reference_c1().create().to_json())
    assert _add_branch_n3(direct).create().to_json() == _REFERENCE_UPDATED


@pytest.mark.parametrize("made", ["in code", "from text", "from text, copied"])
def test_export_of_a_linkless_node_does_not_depend_on_how_the_graph_was_made(made: str) -> None:
    """A node that says nothing about links exports the same wherever the rest came from."""
    if made == "in code":
        spec = GraphSpec("g")
        spec.add_start("s").link_add("e")
        spec.add_end("e")
    else:
        spec = GraphSpec.from_text(
            "id: g\nlayout: [{id: s, type: start, link: e}, {id: e, type: end}]"
        )
        if made.endswith("copied"):
            spec = GraphSpec.from_graph(spec.create())
    spec.add_activity("late")  # e is no longer last
    assert spec.create().to_dict()["layout"][1] == {"id": "e", "type": "end"}


def test_replacing_a_node_said_empty_forgets_its_empty_link_list() -> None:
    spec = GraphSpec.from_text("id: g\nlayout: [{id: s, type: start, link: []}, {id: b}]")
    assert spec.create().to_dict()["layout"][0] == {"id": "s", "type": "start", "link": []}
    spec.add_start("s")
    assert spec.create().to_dict()["layout"][0] == {"id": "s", "type": "start"}


def test_a_node_said_empty_keeps_its_empty_link_list_through_a_copy_and_an_edit() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: s, type: start, link: []}, {id: b}]")
    spec = GraphSpec.from_graph(g)
    spec.add_activity("c")
    exported = spec.create().to_json()
    assert '{"id":"s","type":"start","link":[]}' in exported
    assert Graph.from_text(exported).get_node("s").next_links == ()


def test_every_key_is_exported_in_loader_order() -> None:
    spec = GraphSpec("g", title="T", driver="drv")
    spec.meta_put("owner", "hr")
    spec.add_start("s", title="Start", meta={"a": 1}, when="x > 1", task="y = 1").link_add(
        "e", title="go", when="z", priority=2, meta={"b": [1, 2]}
    )
    spec.add_end("e")
    assert spec.create().to_dict() == {
        "id": "g",
        "title": "T",
        "driver": "drv",
        "meta": {"owner": "hr"},
        "layout": [
            {
                "id": "s",
                "type": "start",
                "title": "Start",
                "meta": {"a": 1},
                "when": "x > 1",
                "task": "y = 1",
                "link": [
                    {
                        "nextId": "e",
                        "title": "go",
                        "meta": {"b": [1, 2]},
                        "when": "z",
                        "priority": 2,
                    }
                ],
            },
            {"id": "e", "type": "end"},
        ],
    }


def test_empty_titles_meta_and_zero_priority_are_left_out() -> None:
    spec = GraphSpec("g")
    spec.add_start("s", title="", meta={}).link_add("e", title="", priority=0, meta={})
    spec.add_end("e")
    assert spec.create().to_dict()["layout"][0] == {
        "id": "s",
        "type": "start",
        "link": [{"nextId": "e"}],
    }


def test_links_keep_definition_order_with_their_priorities() -> None:
    g = Graph.from_text(
        "id: g\nlayout: [{id: a, link: [b, {nextId: c, priority: 9}]}, {id: b}, {id: c}]"
    )
    assert g.to_dict()["layout"][0]["link"] == [{"nextId": "b"}, {"nextId": "c", "priority": 9}]


def test_json_keeps_non_ascii_text() -> None:
    g = Graph.from_text("id: g\ntitle: 请假审批\nlayout: [{id: a, title: 申请}]")
    assert '"title":"请假审批"' in g.to_json()


def test_yaml_export_keeps_key_order_and_non_ascii() -> None:
    g = Graph.from_text("id: g\ntitle: 审批\nlayout: [{id: a}]")
    assert g.to_yaml() == "id: g\ntitle: 审批\nlayout:\n- id: a\n  type: activity\n"


def test_yaml_export_parses_back_to_the_same_dict() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, meta: {r: '1:5', n: null}, link: b}, {id: b}]")
    assert yaml.safe_load(g.to_yaml()) == g.to_dict()


def test_linkless_node_loaded_from_text_exports_an_empty_link_list() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: s, type: start, link: []}, {id: b}]")
    assert g.to_dict()["layout"] == [
        {"id": "s", "type": "start", "link": []},
        {"id": "b", "type": "activity"},
    ]


def test_linkless_node_built_in_code_exports_without_link_like_the_reference() -> None:
    spec = GraphSpec("g")
    spec.add_start("s")
    spec.add_end("e")
    exported = spec.create().to_dict()
    assert exported["layout"][0] == {"id": "s", "type": "start"}


def test_graph_from_spec_from_graph_keeps_the_faithful_export() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: s, type: start, link: []}, {id: b}]")
    assert GraphSpec.from_graph(g).create().to_json() == g.to_json()


def test_component_condition_cannot_be_exported() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("e", when=lambda ctx: True)
    spec.add_end("e")
    with pytest.raises(GraphDefinitionError, match=r"link s -> e of node 's'.*'@name'"):
        spec.create().to_json()


def test_component_task_cannot_be_exported() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("a")
    spec.add_activity("a", task=lambda ctx, node: None)
    with pytest.raises(GraphDefinitionError, match="'task' of node 'a'"):
        spec.create().to_dict()


def test_unrepresentable_meta_is_a_graph_definition_error() -> None:
    spec = GraphSpec("g")
    spec.add_start("s", meta={"when": object()})
    graph = spec.create()
    with pytest.raises(GraphDefinitionError, match="JSON"):
        graph.to_json()
    with pytest.raises(GraphDefinitionError, match="YAML"):
        graph.to_yaml()


def test_meta_json_cannot_write_is_refused_naming_whose_meta_it_is() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("e", meta={"due": datetime.date(2020, 1, 1)})
    spec.add_end("e")
    with pytest.raises(GraphDefinitionError, match="in link s -> e: Object of type date"):
        spec.create().to_json()


# -- meta that no graph text can hold: refused (or made text) when the graph is built ---------
_NODE_META = "id: g\nlayout:\n  - {id: s, type: start, meta: %s}\n"
_JSON_META = '{"id": "g", "layout": [{"id": "s", "type": "start", "meta": %s}]}'


_NO_NAN = "which JSON cannot write (no NaN or infinity)"
_SURROGATE = "holds text that is not valid Unicode (lone surrogate)"
_SAME_TEXT = "has the keys 1 and '1', which are both '1' as text (meta keys are text)"


@pytest.mark.parametrize(
    ("text", "problem", "path"),
    [
        (_NODE_META % "{x: .nan}", f"holds nan, {_NO_NAN}", "meta.x"),
        (_NODE_META % "{a: [1, {b: -.inf}]}", f"holds -inf, {_NO_NAN}", "meta.a[1].b"),
        (_JSON_META % '{"m": {"n n": Infinity}}', f"holds inf, {_NO_NAN}", "meta.m['n n']"),
        (_JSON_META % '{"t": ["\\udc00"]}', f"{_SURROGATE}: '\\udc00'", "meta.t[0]"),
        (_JSON_META % '{"m": {"\\ud800": 1}}', f"{_SURROGATE}: '\\ud800'", "meta.m"),
        (_NODE_META % "{m: {1: a, '1': b, ~: c}}", _SAME_TEXT, "meta.m"),
        (_NODE_META % "{$m: {x: {1: a, '1': c}}}", _SAME_TEXT, "meta.$m.x"),
    ],
)  # fmt: skip
def test_meta_no_graph_text_can_hold_is_refused_at_load_naming_node_and_path(
    text: str, problem: str, path: str
) -> None:
    """Such meta loaded, then to_json() wrote NaN (JSON no reader takes) or silently dropped one
    of two keys that became the same text; flow_sqla refused to store the graph."""
    with pytest.raises(GraphDefinitionError) as caught:
        Graph.from_text(text)
    assert str(caught.value) == f"The meta of node 's' in graph 'g' {problem} (at {path})"
    assert caught.value.graph_id == "g"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda s: s.meta_put(1, "a").meta_put("1", "b"),
            f"The meta of the graph in graph 'g' {_SAME_TEXT} (at meta)",
        ),
        (
            lambda s: s.add_start("s").link_add("e", meta={"n": [10**5000]}),
            "The meta of link s -> e in graph 'g' holds an integer of more than 4,300 decimal "
            "digits (Python's limit for turning integers into text) (at meta.n[0])",
        ),
        (
            lambda s: s.add_start("s", meta={"f": float("nan")}),
            f"The meta of node 's' in graph 'g' holds nan, {_NO_NAN} (at meta.f)",
        ),
        (
            lambda s: setattr(s.add_start("t"), "meta", [1]),
            "The meta of node 't' in graph 'g' must be a mapping, not list",
        ),
        (
            lambda s: s.add_start("s").meta_put("k", {"\udfff"}),
            f"The meta of node 's' in graph 'g' {_SURROGATE}: '\\udfff' (at meta.k)",
        ),
    ],
)
def test_meta_no_graph_text_can_hold_is_refused_by_create(
    build: Callable[[GraphSpec], object], message: str
) -> None:
    spec = GraphSpec("g")
    spec.add_start("s")
    build(spec)
    with pytest.raises(GraphDefinitionError) as caught:
        spec.create()
    assert str(caught.value) == message


def test_non_text_meta_keys_are_text_at_every_depth_so_export_loads_back_the_same() -> None:
    """The loader always read top-level meta keys as text; nested ones kept their YAML type
    and export turned them into text, so the stored graph differed from the loaded one."""
    g = Graph.from_text(_NODE_META % "{2: top, m: {1: a, ~: c, 2.5: d}, l: [{3: x}]}")
    meta = {"2": "top", "m": {"1": "a", "None": "c", "2.5": "d"}, "l": [{"3": "x"}]}
    assert dict(g.nodes["s"].meta) == meta
    for text in (g.to_json(), g.to_yaml()):
        assert shape(Graph.from_text(text)) == shape(g)
    spec = GraphSpec("g")
    spec.add_start("s", meta={"m": {1: "a"}})
    assert dict(spec.create().nodes["s"].meta) == {"m": {"1": "a"}}


@pytest.mark.parametrize(
    ("pair", "first", "second"),
    [
        ("{1: a, true: b}", "'1'", "'true'"),
        ("{1.0: a, 1: b}", "'1.0'", "'1'"),
        ("{0: a, x: y, false: b}", "'0'", "'false'"),
        ("{0.0: a, -0.0: b}", "'0.0'", "'-0.0'"),
    ],
)
def test_two_keys_python_would_merge_are_refused_not_one_silently_dropped(
    pair: str, first: str, second: str
) -> None:
    """PyYAML built ``{1: a, true: b}`` as ``{1: "b"}`` (``1 == True`` in Python), so ``a`` and
    the key ``true`` were lost before the keys became text — as nested meta and as a node's."""
    for text in (
        f"id: g\nmeta: {{x: {pair}}}\nlayout: [{{id: s, type: start}}]",
        _NODE_META % pair,
    ):
        with pytest.raises(GraphDefinitionError) as caught:
            Graph.from_text(text)
        message = str(caught.value)
        assert f"The keys {first} (line " in message and f"and {second} (line " in message
        assert "graph 'g'" in message and caught.value.graph_id == "g"
    # Written as text, both are kept.
    quoted = pair.replace("1.0", "'1.0'").replace("true", "'true'").replace("false", "'false'")
    quoted = quoted.replace("-0.0", "'-0.0'")
    assert len(Graph.from_text(_NODE_META % quoted).nodes["s"].meta) == pair.count(":")


@pytest.mark.parametrize(
    "merged",
    [
        "base: &b {1: a}\nlayout:\n  - {id: s, type: start, meta: {x: {<<: *b, true: b}}}",
        "b1: &b1 {1: a}\nb2: &b2 {true: b}\n"
        "layout:\n  - {id: s, type: start, meta: {x: {<<: [*b1, *b2]}}}",
    ],
)
def test_keys_python_would_merge_are_refused_when_a_merge_key_brings_them(merged: str) -> None:
    with pytest.raises(GraphDefinitionError, match=r"The keys .* of one mapping in graph 'g'"):
        Graph.from_text("id: g\n" + merged)


def test_keys_the_reference_also_reads_as_one_load_as_before() -> None:
    """The same key twice, a merged key overridden, a set and a collection key are the
    building's business, as before the check of keys Python would merge."""
    twice = Graph.from_text(_NODE_META % "{x: {1: a, 1: b}}")
    assert dict(twice.nodes["s"].meta["x"]) == {"1": "b"}
    overridden = Graph.from_text(
        "id: g\nbase: &b {1: a, k: z}\nlayout:\n  - {id: s, type: start, meta: {x: {<<: *b, 1: b}}}"
    )
    assert dict(overridden.nodes["s"].meta["x"]) == {"1": "b", "k": "z"}
    assert Graph.from_text(_NODE_META % "{x: !!set {1: null, true: null}}").nodes["s"].meta["x"]
    with pytest.raises(GraphDefinitionError, match="unhashable key"):
        Graph.from_text(_NODE_META % "{x: {? {1: a, true: b} : c}}")


def test_oa_graph_round_trips_through_json_and_yaml() -> None:
    text = (
        "id: oa\nlayout:\n"
        "  - {id: s, type: start}\n"
        "  - {id: apply, meta: {actor: employee}}\n"
        "  - {id: gw, type: exclusive, link: [{nextId: m, when: 'amount < 5000'}, d]}\n"
        "  - {id: m, meta: {actor: manager}, link: e}\n"
        "  - {id: d, meta: {actor: director}}\n"
        "  - {id: e, type: end}\n"
    )
    g = Graph.from_text(text)
    assert shape(Graph.from_text(g.to_json())) == shape(g)
    assert shape(Graph.from_text(g.to_yaml())) == shape(g)


# -- round-trip property --------------------------------------------------------------------

_texts = st.text(st.characters(codec="utf-8"), max_size=8)
_ids = st.sampled_from(["a", "b", "c", "n-2", "end", "1", "é"]) | _texts
_scalars = st.none() | st.booleans() | st.integers(-5, 5) | _texts
_meta = st.dictionaries(st.sampled_from(["actor", "$for", "$in", "x"]), _scalars, max_size=3)
_types = st.sampled_from(["start", "end", "activity", "exclusive", "parallel", "loop", "odd"])
_link_objects = st.fixed_dictionaries(
    {"nextId": _ids},
    optional={"title": _texts, "meta": _meta, "when": _texts, "priority": st.integers(-3, 3)},
)
_links = _ids | _link_objects | st.lists(_ids | _link_objects, max_size=3)
_nodes = st.fixed_dictionaries(
    {},
    optional={
        "id": _ids,
        "type": _types,
        "title": _texts,
        "meta": _meta,
        "when": _texts,
        "task": _texts,
        "link": _links,
    },
)
_documents = st.fixed_dictionaries(
    {"id": st.sampled_from(["g", "flow-1"]), "layout": st.lists(_nodes, min_size=1, max_size=6)},
    optional={"title": _texts, "driver": _texts, "meta": _meta},
)


def _load(document: dict[str, Any], as_yaml: bool) -> Graph | None:
    text = yaml.safe_dump(document, allow_unicode=True) if as_yaml else json.dumps(document)
    try:
        return Graph.from_text(text)
    except GraphDefinitionError:
        return None  # no determinable start node


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=_documents, as_yaml=st.booleans())
def test_graphs_loaded_from_text_round_trip_through_json_and_yaml(
    document: dict[str, Any], as_yaml: bool
) -> None:
    graph = _load(document, as_yaml)
    if graph is None:
        return
    assert shape(Graph.from_text(graph.to_json())) == shape(graph)
    assert shape(Graph.from_text(graph.to_yaml())) == shape(graph)
