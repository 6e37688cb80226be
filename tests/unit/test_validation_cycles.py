"""validate() warns about cycles that no human task breaks (issue 11 item 4)."""

from __future__ import annotations

import textwrap

import pytest

from flow import Graph, GraphSpec, NodeSpec, NodeType
from flow.validation import Problem


def _cycle_warnings(graph: Graph) -> list[Problem]:
    return [p for p in graph.validate() if "cycle" in p.message]


def _load(text: str) -> Graph:
    return Graph.from_text(textwrap.dedent(text))


def test_a_cycle_of_gateways_is_a_warning_naming_its_nodes() -> None:
    graph = _load(
        """
        id: g
        layout:
          - {id: s, type: start}
          - {id: a, type: exclusive, link: [{nextId: e, when: done}, b]}
          - {id: b, type: parallel, link: c}
          - {id: c, type: inclusive, link: a}
          - {id: e, type: end}
        """
    )
    (warning,) = _cycle_warnings(graph)
    assert warning.severity == "warning" and warning.node_id == "a"
    assert "cycle 'a' -> 'b' -> 'c' has no activity node" in warning.message
    assert "StepBudgetError" in warning.message
    Graph.from_text(graph.to_yaml(), strict=True)  # a warning, not an error


@pytest.mark.parametrize("node_type", ["exclusive", "inclusive", "parallel", "loop", "start"])
def test_a_node_linking_to_itself_is_a_cycle(node_type: str) -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("x")
    spec.add_node(NodeSpec("x", NodeType.of(node_type))).link_add("x").link_add("e")
    spec.add_end("e")
    (warning,) = _cycle_warnings(spec.create())
    assert warning.node_id == "x" and "cycle 'x' has" in warning.message


def test_a_cycle_through_an_activity_is_not_flagged() -> None:
    graph = _load(
        """
        id: g
        layout:
          - {id: s, type: start}
          - {id: apply}
          - {id: gw, type: exclusive, link: [{nextId: e, when: ok}, apply]}
          - {id: e, type: end}
        """
    )
    assert _cycle_warnings(graph) == []


def test_end_nodes_and_missing_targets_do_not_close_a_cycle() -> None:
    graph = _load(
        """
        id: g
        layout:
          - {id: s, type: start}
          - {id: a, type: exclusive, link: [e, missing]}
          - {id: e, type: end, link: a}
        """
    )
    assert _cycle_warnings(graph) == []


def test_each_cycle_is_reported_once() -> None:
    graph = _load(
        """
        id: g
        layout:
          - {id: s, type: start, link: [a, c]}
          - {id: a, type: exclusive, link: b}
          - {id: b, type: exclusive, link: [a, b]}
          - {id: c, type: parallel, link: d}
          - {id: d, type: parallel, link: [c, x]}
          - {id: x}
        """
    )
    assert [w.node_id for w in _cycle_warnings(graph)] == ["a", "c"]


def test_a_cycle_of_five_thousand_gateways_is_one_warning() -> None:
    spec = GraphSpec("big")
    spec.add_start("s").link_add("g0")
    for i in range(5_000):
        spec.add_exclusive(f"g{i}").link_add(f"g{(i + 1) % 5_000}")
    (warning,) = _cycle_warnings(spec.create())
    assert warning.node_id == "g0" and warning.message.count("->") == 7


def test_in_a_graph_naming_actors_a_cycle_of_activities_naming_none_is_a_warning() -> None:
    """Under ActorStateController an activity without an ``actor`` meta runs automatically:
    a cycle of such activities repeats until a workflow walk runs out of steps."""
    text = """
        id: g
        layout:
          - {id: s, type: start}
          - {id: apply, meta: {actor: employee}}
          - {id: a1, task: "n = 1"}
          - {id: a2, link: [{nextId: e, when: done}, a1]}
          - {id: e, type: end}
        """
    (warning,) = _cycle_warnings(_load(text))
    assert warning.node_id == "a1" and "cycle 'a1' -> 'a2'" in warning.message
    assert "no node whose meta names who operates it" in warning.message
    assert _cycle_warnings(_load(text.replace("meta: {actor: employee}", ""))) == []
    named = text.replace('{id: a2, link', "{id: a2, meta: {actor: boss}, link")
    assert _cycle_warnings(_load(named)) == []
    by_role = text.replace('{id: a2, link', "{id: a2, meta: {role: finance}, link")
    assert _cycle_warnings(_load(by_role)) == []  # ActorStateController("actor", "role")
    form_only = text.replace('{id: a2, link', "{id: a2, meta: {formId: 7}, link")
    assert len(_cycle_warnings(_load(form_only))) == 1


def test_a_task_calling_its_own_graph_is_a_warning() -> None:
    graph = _load(
        """
        id: g
        layout:
          - {id: s, type: start}
          - {id: n, task: "#g"}
          - {id: m, task: "#other"}
          - {id: e, type: end}
        """
    )
    (warning,) = [p for p in graph.validate() if "own graph" in p.message]
    assert warning.node_id == "n" and "max_depth" in warning.message
