"""Loading graph text (semantics.md §1): every rule of the reference loader, and its failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flow.errors import GraphDefinitionError
from flow.graph import Graph
from flow.node_type import NodeType
from flow.spec import GraphSpec


def ids(graph: Graph) -> list[str]:
    return list(graph.nodes)


def targets(graph: Graph, node_id: str) -> list[str]:
    return [link.next_id for link in graph.nodes[node_id].next_links]


# -- graph keys -----------------------------------------------------------------------------


def test_graph_keys_are_read() -> None:
    g = Graph.from_text(
        "id: g1\ntitle: My flow\ndriver: special\nmeta: {owner: hr}\nlayout: [{id: a}]\n"
    )
    assert (g.id, g.title, g.driver, dict(g.meta)) == ("g1", "My flow", "special", {"owner": "hr"})


def test_title_defaults_to_the_id_and_driver_to_empty() -> None:
    g = Graph.from_text("id: g1\nlayout: [{id: a}]")
    assert (g.title, g.driver, dict(g.meta)) == ("g1", "", {})


def test_json_text_loads_like_yaml() -> None:
    g = Graph.from_text(json.dumps({"id": "g", "layout": [{"id": "a"}, {"id": "b"}]}))
    assert ids(g) == ["a", "b"]


def test_yaml_flow_mapping_that_is_not_json_still_loads() -> None:
    g = Graph.from_text("{id: g, layout: [{id: a}]}")
    assert ids(g) == ["a"]


def test_nodes_is_an_alias_of_layout() -> None:
    assert ids(Graph.from_text("id: g\nnodes: [{id: a}]")) == ["a"]


def test_layout_wins_over_nodes_when_both_are_present() -> None:
    assert ids(Graph.from_text("id: g\nlayout: [{id: a}]\nnodes: [{id: b}]")) == ["a"]


def test_numeric_graph_id_becomes_text() -> None:
    assert Graph.from_text("id: 42\nlayout: [{id: a}]").id == "42"


# -- node keys ------------------------------------------------------------------------------


def test_node_keys_are_read() -> None:
    g = Graph.from_text(
        "id: g\nlayout:\n"
        "  - {id: a, type: activity, title: A, meta: {actor: bob}, when: ' x > 1 ', task: 'y = 2'}"
    )
    a = g.nodes["a"]
    assert (a.type, a.title, dict(a.meta), a.when, a.task) == (
        NodeType.ACTIVITY,
        "A",
        {"actor": "bob"},
        "x > 1",
        "y = 2",
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("start", NodeType.START),
        ("END", NodeType.END),
        ("Exclusive", NodeType.EXCLUSIVE),
        ("inclusive", NodeType.INCLUSIVE),
        ("parallel", NodeType.PARALLEL),
        ("loop", NodeType.LOOP),
        ("iterator", NodeType.LOOP),
    ],
)
def test_type_names_are_case_insensitive(name: str, expected: NodeType) -> None:
    g = Graph.from_text(f"id: g\nlayout: [{{id: s, type: start}}, {{id: a, type: {name}}}]")
    assert g.nodes["a"].type == expected


def test_missing_type_is_activity() -> None:
    assert Graph.from_text("id: g\nlayout: [{id: a}]").nodes["a"].type == NodeType.ACTIVITY


def test_unknown_type_is_activity() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, type: human}]")
    assert g.nodes["a"].type == NodeType.ACTIVITY


def test_node_without_id_gets_its_one_based_position() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a}, {title: B}, {}]")
    assert ids(g) == ["a", "n-2", "n-3"]


def test_empty_task_and_when_are_none() -> None:
    a = Graph.from_text("id: g\nlayout: [{id: a, when: '  ', task: ''}]").nodes["a"]
    assert (a.when, a.task) == (None, None)


# -- links ----------------------------------------------------------------------------------


def test_link_as_a_string() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, link: c}, {id: b}, {id: c}]")
    assert targets(g, "a") == ["c"]


def test_link_as_an_object_with_every_key() -> None:
    g = Graph.from_text(
        "id: g\nlayout:\n"
        "  - {id: a, link: {nextId: b, title: go, meta: {k: 1}, when: 'x == 1', priority: 3}}\n"
        "  - {id: b}"
    )
    link = g.nodes["a"].next_links[0]
    assert (link.next_id, link.title, dict(link.meta), link.when, link.priority) == (
        "b",
        "go",
        {"k": 1},
        "x == 1",
        3,
    )


def test_link_as_a_mixed_list() -> None:
    g = Graph.from_text(
        "id: g\nlayout: [{id: a, link: [b, {nextId: c}]}, {id: b, link: []}, {id: c}]"
    )
    assert targets(g, "a") == ["b", "c"]


def test_condition_is_an_alias_of_when() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, link: {nextId: b, condition: 'x'}}, {id: b}]")
    assert g.nodes["a"].next_links[0].when == "x"


def test_when_wins_over_condition() -> None:
    g = Graph.from_text(
        "id: g\nlayout: [{id: a, link: {nextId: b, when: w, condition: c}}, {id: b}]"
    )
    assert g.nodes["a"].next_links[0].when == "w"


def test_node_without_link_is_linked_to_the_next_node() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a}, {id: b}, {id: c}]")
    assert [targets(g, n) for n in ids(g)] == [["b"], ["c"], []]


def test_explicit_empty_link_list_is_not_auto_linked() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, type: start, link: []}, {id: b}]")
    assert targets(g, "a") == []


def test_null_link_is_auto_linked_like_a_missing_one() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, link: null}, {id: b}]")
    assert targets(g, "a") == ["b"]


def test_links_are_ordered_by_priority_highest_first_and_stable() -> None:
    g = Graph.from_text(
        "id: g\nlayout:\n"
        "  - {id: a, link: [{nextId: b}, {nextId: c, priority: 5}, {nextId: d}, "
        "{nextId: e, priority: '5'}, {nextId: f, priority: -1}]}\n"
        "  - {id: b}\n  - {id: c}\n  - {id: d}\n  - {id: e}\n  - {id: f}"
    )
    assert targets(g, "a") == ["c", "e", "b", "d", "f"]


def test_numeric_link_target_becomes_text() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, link: 2}, {id: 2}]")
    assert targets(g, "a") == ["2"]


# -- start node -----------------------------------------------------------------------------


def test_start_is_the_last_start_node() -> None:
    g = Graph.from_text(
        "id: g\nlayout: [{id: s1, type: start, link: []}, {id: s2, type: start}, {id: a}]"
    )
    assert g.start.id == "s2"


def test_start_without_start_type_is_the_first_node_with_no_incoming_link() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, link: c}, {id: b, link: a}, {id: c}]")
    assert g.start.id == "b"


def test_no_start_node_is_an_error() -> None:
    with pytest.raises(GraphDefinitionError, match="No start node"):
        Graph.from_text("id: g\nlayout: [{id: a, link: b}, {id: b, link: a}]")


def test_empty_layout_has_no_start_node() -> None:
    with pytest.raises(GraphDefinitionError, match="No start node"):
        Graph.from_text("id: g")


# -- leniency -------------------------------------------------------------------------------


def test_duplicate_id_last_definition_wins_at_the_first_position() -> None:
    g = Graph.from_text(
        "id: g\nlayout: [{id: a, title: first}, {id: b}, {id: a, title: last, link: []}]"
    )
    assert (ids(g), g.nodes["a"].title) == (["a", "b"], "last")


def test_dangling_link_loads_and_has_no_next_node() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, link: nowhere}]")
    link = g.nodes["a"].next_links[0]
    assert (link.next_node, list(g.nodes["a"].next_nodes)) == (None, [])


# -- failures -------------------------------------------------------------------------------


def test_unparsable_yaml_reports_line_and_column() -> None:
    with pytest.raises(GraphDefinitionError) as info:
        Graph.from_text("id: g\nlayout:\n  - {id: a\n  - {id: b}\n")
    assert (info.value.line, info.value.column) == (4, 5)


def test_broken_json_reports_line_and_column() -> None:
    with pytest.raises(GraphDefinitionError) as info:
        Graph.from_text('{"id": "g",\n "layout": [}')
    assert info.value.line == 2


def test_missing_graph_id_is_an_error() -> None:
    with pytest.raises(GraphDefinitionError, match="no 'id'"):
        Graph.from_text("title: t\nlayout: [{id: a}]")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- a\n- b", "must be a mapping"),
        ("id: g\nlayout: {id: a}", "'layout' of graph 'g' must be a list"),
        ("id: g\nlayout: [a]", "node #1 of graph 'g' must be a mapping"),
        ("id: g\nlayout: [{id: [1]}]", "node #1 'id' must be a string"),
        ("id: g\nlayout: [{id: a, meta: [1]}]", "node 'a' 'meta' must be a mapping"),
        ("id: g\nlayout: [{id: a, link: [[b]]}]", "a link of node 'a' must be"),
        ("id: g\nlayout: [{id: a, link: {nextId: b, priority: x}}]", "'priority'"),
        ("id: g\nlayout: [{id: a, when: [1]}]", "node 'a' 'when' must be a string"),
        ("id: {x: 1}", "graph 'id' must be a string"),
        ("id: g\nmeta: 3", "graph 'meta' must be a mapping"),
    ],
)
def test_wrong_shapes_are_graph_definition_errors(text: str, fragment: str) -> None:
    with pytest.raises(GraphDefinitionError, match=fragment.replace("[", r"\[")):
        Graph.from_text(text)


def test_non_string_text_is_an_error() -> None:
    with pytest.raises(GraphDefinitionError, match="must be a str"):
        Graph.from_text(b"id: g")  # type: ignore[arg-type]


def test_too_long_json_integer_is_a_graph_definition_error() -> None:
    text = '{"id": "g", "meta": {"n": ' + "9" * 5000 + '}, "layout": [{"id": "a"}]}'
    with pytest.raises(GraphDefinitionError, match="does not parse"):
        Graph.from_text(text)


def test_from_file_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "g.yml"
    path.write_text("id: g\nlayout: [{id: a}]", encoding="utf-8")
    assert Graph.from_file(path).id == "g"


def test_from_file_rejects_other_suffixes(tmp_path: Path) -> None:
    with pytest.raises(GraphDefinitionError, match=r"\.yml"):
        Graph.from_file(tmp_path / "g.txt")


def test_from_file_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GraphDefinitionError, match="cannot read"):
        Graph.from_file(tmp_path / "missing.json")


def test_from_dict_applies_the_same_rules() -> None:
    g = Graph.from_dict({"id": "g", "layout": [{"id": "a"}, {}]})
    assert (ids(g), targets(g, "a")) == (["a", "n-2"], ["n-2"])


# -- strict ---------------------------------------------------------------------------------


def test_strict_loading_raises_one_error_listing_every_error() -> None:
    text = "id: g\nlayout: [{id: a, link: [x, y]}, {id: a, link: []}, {id: b, link: z}]"
    with pytest.raises(GraphDefinitionError) as info:
        Graph.from_text(text, strict=True)
    assert len(info.value.problems) == 2 and info.value.graph_id == "g"


def test_strict_loading_lists_dangling_links_and_duplicates() -> None:
    text = "id: g\nlayout: [{id: a, link: x}, {id: b, link: y}, {id: b, link: []}]"
    with pytest.raises(GraphDefinitionError) as info:
        Graph.from_text(text, strict=True)
    assert sorted(info.value.problems) == [
        "error: node 'a', link a -> x: link to unknown node 'x'",
        "error: node 'b': node id defined 2 times; only the last definition is used",
    ]


def test_strict_loading_accepts_warnings() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: a, type: human, link: []}, {id: b}]", strict=True)
    assert [p.severity for p in g.validate()] == ["warning", "warning"]


def test_spec_create_strict_raises_on_errors() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("missing")
    with pytest.raises(GraphDefinitionError, match="1 error"):
        spec.create(strict=True)


def test_spec_create_is_lenient_by_default() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("missing")
    assert spec.create().start.id == "s"


def test_a_flow_mapping_key_followed_directly_by_a_list_loads_as_in_the_reference() -> None:
    """solon-flow's flow_case8 graph writes ``link:[ ... ]`` with no space after the colon;
    SnakeYAML accepts it (libyaml alone would not), so we load it too."""
    graph = Graph.from_text(
        """
id: f8
layout:
  - {id: s1, type: start, link: s3}
  - {id: s3, type: exclusive, link:[ {nextId: s3_1},
      {nextId: s3_2, when: '"type1".equals(dataType)'} ]}
  - {id: s3_1, link: e}
  - {id: s3_2, link: e}
  - {id: e, type: end}
"""
    )
    assert [link.next_id for link in graph.nodes["s3"].next_links] == ["s3_1", "s3_2"]
    assert graph.nodes["s3"].next_links[1].when == '"type1".equals(dataType)'


def test_the_problems_validate_returns_are_importable_from_flow() -> None:
    """api.md lists ``Problem`` under ``flow``: importable from the package named there."""
    import flow

    problems = Graph.from_text("id: p\nlayout:\n  - {id: a, link: missing}\n").validate()
    assert problems and all(isinstance(p, flow.Problem) for p in problems)
    assert "Problem" in flow.__all__
