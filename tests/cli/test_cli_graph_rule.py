"""``flow reindex``'s controller choice per graph (:class:`flow_cli._session.GraphRule`): a
row that stores its own graph document gets a graph object of its own, freed after the row."""

from __future__ import annotations

from flow import Graph
from flow_cli._session import GraphRule

_WITH_ACTOR = """
id: ga
layout:
  - {id: start, type: start, link: t}
  - {id: t, meta: {actor: boss}, link: end}
  - {id: end, type: end}
"""
_WITHOUT_ACTORS = _WITH_ACTOR.replace("id: ga", "id: gb").replace("meta: {actor: boss}, ", "")


def test_each_graph_gets_its_own_choice_even_when_a_freed_graph_left_its_id() -> None:
    """Graphs parsed one per row and dropped: a new graph may take a freed one's ``id()``.
    Choosing by ``id()`` alone once gave a row of an actor-less graph the actor controller
    of the graph freed before it (its task then in nobody's inbox, the instance COMPLETED)
    and the reverse (the boss's task in everyone's)."""
    rule = GraphRule()
    wrong = []
    for n in range(3000):
        graph = Graph.from_text(_WITH_ACTOR if n % 2 == 0 else _WITHOUT_ACTORS)
        expected = ("actor:boss",) if n % 2 == 0 else ("*",)
        found = rule.candidates(graph.get_node_or_throw("t"))
        if found != expected:
            wrong.append((n, found))
        del graph
    assert wrong == []
