"""Which root graph an instance runs, for the task index.

With the index an instance runs one root graph: its open tasks, status and inbox rows are
that graph's. An operation may still name one of the sub-graphs the root graph calls
(``task: "#id"``) — the reference claims a sub-graph's task on the sub-graph's own id — and
the aggregate stays the root graph's. An indexed instance records its root graph; for one not
indexed yet (written by the Go plugin, or with ``index=False``) the state keys
(``graph:node``) are all there is to tell: they must belong to the graph named, to a graph
calling it, or to their sub-graphs — else the operation would merge two instances' states
into one row, and index the instance under the wrong graph: its tasks gone from every inbox,
and every later operation naming its own graph refused.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from flow._graph_memo import GraphMemo
from flow.workflow.errors import GraphMismatchError

if TYPE_CHECKING:
    from flow.engine import FlowEngine
    from flow.graph import Graph, Node


def sub_graphs(engine: FlowEngine, root: Graph) -> list[Graph]:
    """The graphs of ``engine`` that ``root`` calls as sub-graphs (``task: "#id"``), at any
    depth, each once (``root`` itself only if it is called back)."""
    if not _direct_calls(root):
        return []  # most graphs call none: every claim and submit asks
    found: dict[str, Graph] = {}
    pending = [root]
    while pending:
        for graph_id in _direct_calls(pending.pop()):
            if graph_id not in found:
                called = engine.get_graph(graph_id)
                if called is not None:
                    found[graph_id] = called
                    pending.append(called)
    return list(found.values())


def graphs_called_by(engine: FlowEngine, node: Node) -> list[Graph] | None:
    """The graph ``node`` calls (``task: "#id"``) and every graph that one calls, at any
    depth, each once; ``[]`` for a node that calls none, ``None`` when the engine lacks
    one of them (what it would have run cannot be told)."""
    graph_id = _called_id(node)
    if graph_id is None:
        return []
    called = engine.get_graph(graph_id)
    if called is None or call_tree(engine, called) is None:
        return None
    return list({called.id: called, **{g.id: g for g in sub_graphs(engine, called)}}.values())


def called_graphs(engine: FlowEngine, root: Graph) -> set[str]:
    """The ids of the graphs ``root`` calls as sub-graphs, at any depth."""
    return {graph.id for graph in sub_graphs(engine, root)}


def call_tree(engine: FlowEngine, root: Graph) -> set[str] | None:
    """The ids of ``root`` and of every graph it calls, at any depth — or ``None`` when the
    engine lacks one of them: then which graphs' states an instance of ``root`` may hold
    cannot be told (those of the missing graph's own calls are unknown)."""
    found = {root.id}
    pending = [root]
    while pending:
        for graph_id in _direct_calls(pending.pop()):
            if graph_id not in found:
                called = engine.get_graph(graph_id)
                if called is None:
                    return None
                found.add(graph_id)
                pending.append(called)
    return found


def states_elsewhere(engine: FlowEngine, graph: Graph, state_keys: Collection[str]) -> bool:
    """Whether every state key (``graph:node``) belongs to a graph outside ``graph``'s call
    tree (:func:`call_tree`): the states of an instance indexed as ``graph`` that another
    writer (the Go plugin, an ``index=False`` service) replaced behind its index. ``False``
    for no states, and when the engine lacks a graph of the tree (the missing graph's own
    calls are unknown: the operation goes on, and its walk names the graph if it needs it).
    The common case — every key ``graph``'s own — costs one prefix test per key."""
    prefix = f"{graph.id}:"
    if all(key.startswith(prefix) for key in state_keys):
        return False
    tree = call_tree(engine, graph)
    return tree is not None and {key.split(":", 1)[0] for key in state_keys}.isdisjoint(tree)


_DIRECT_CALLS: GraphMemo[tuple[str, ...]] = GraphMemo()


def _direct_calls(graph: Graph) -> tuple[str, ...]:
    """The ids ``graph``'s own nodes call (``task: "#id"``), worked out once per graph object
    (graphs are immutable): claims and submits ask on every operation."""
    found = _DIRECT_CALLS.get(graph)
    if found is not None:
        return found
    calls = tuple(
        dict.fromkeys(
            called for node in graph.nodes.values() if (called := _called_id(node)) is not None
        )
    )
    return _DIRECT_CALLS.put(graph, calls)


def _called_id(node: Node) -> str | None:
    """The id of the graph ``node`` calls (``task: "#id"``), if it calls one."""
    task = node.task
    return task[1:] if isinstance(task, str) and task.startswith("#") and task[1:] else None


def root_by_states(
    engine: FlowEngine, named: Graph, instance_id: str, state_keys: Iterable[str]
) -> Graph:
    """The root graph of an instance not indexed yet, judged by its state keys, for an
    operation naming ``named``:

    - ``named`` when every state is its own or one of its sub-graphs' (a root graph's row
      may hold only a sub-graph's states);
    - else the first graph among the states' that calls ``named`` (the operation named one of
      its sub-graphs);
    - else ``named`` when some states are its very own (a row the reference let two graphs
      share: the operation goes on, as it would without the index);
    - else :class:`GraphMismatchError` naming the graph the states belong to: the operation
      would merge its states into another instance's row. (States of a sub-graph that
      ``named`` calls too do not make the row ``named``'s.)"""
    owners = list(dict.fromkeys(key.split(":", 1)[0] for key in state_keys))
    own = {named.id} | called_graphs(engine, named)
    foreign = [owner for owner in owners if owner not in own]
    if not foreign:
        return named
    loaded = [graph for graph in map(engine.get_graph, foreign) if graph is not None]
    for graph in loaded:
        if named.id in called_graphs(engine, graph):
            return graph
    if named.id in owners:
        return named
    root = next((g for g in loaded if set(owners) <= {g.id} | called_graphs(engine, g)), None)
    raise GraphMismatchError(instance_id, named.id, foreign[0] if root is None else root.id)


__all__ = [
    "call_tree",
    "called_graphs",
    "graphs_called_by",
    "root_by_states",
    "states_elsewhere",
    "sub_graphs",
]
