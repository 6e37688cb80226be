"""The guard of send-back: which earlier task a task goes back to, and what lies between.

A task goes back to P, the last node of its lineage, only when P's submit led to this task
alone: nothing between them may split or join (parallel, inclusive or loop nodes, or any
other node with several outgoing links except an exclusive gateway — or an inclusive split
whose conditions took only this task's branch), P must be an activity of the same root graph,
and no other open task may come from P. Everything between P and the task
(gateways, automatic nodes) is what P's submit settled on the way, and loses its state —
the nodes of a sub-graph called on the way (``task: "#id"``) too, at any depth: the
sub-graph ran to its end in that submit, and runs again (its gateways evaluated afresh) when
P is forwarded again. Its splits and joins ran within that submit too, so they open no task
to undo; a human task of it that holds a state was operated by someone, though, and refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from flow.node_type import NodeType
from flow.workflow.errors import SendBackError

if TYPE_CHECKING:
    from flow.graph import Graph, Node
    from flow.workflow.aggregate import IndexedTask, InstanceIndex

_SPLITS = (NodeType.PARALLEL, NodeType.INCLUSIVE, NodeType.LOOP)


def send_back_target(
    instance_id: str,
    graph: Graph,
    task: IndexedTask,
    index: InstanceIndex,
    is_human: Callable[[Node], bool],
    settled: Callable[[Node], bool],
    called: Callable[[Node], Sequence[Graph] | None],
) -> tuple[Node, tuple[Node, ...]]:
    """P and the nodes between P and ``task`` (exclusive of both), followed by the nodes of
    the sub-graphs called on the way. ``settled(node)`` says whether the instance holds a
    state for ``node``; ``called(node)`` gives the graphs ``node`` calls, at any depth
    (``None`` when one of them is not loaded). Raises :class:`SendBackError` saying why when
    the guard refuses."""

    def refuse(reason: str) -> SendBackError:
        return SendBackError(instance_id, graph.id, task.node_id, reason)

    if not task.lineage:
        raise refuse(
            "its lineage is empty: it is the first task of the instance, or it was opened "
            "before the instance was reindexed (a reindex cannot tell who sent a task)"
        )
    previous = graph.get_node(task.lineage[-1])
    if previous is None or previous.type != NodeType.ACTIVITY:
        raise refuse(f"the task before it, {task.lineage[-1]!r}, is not an activity of the graph")
    target = graph.get_node_or_throw(task.node_id)
    siblings = [
        t.node_id
        for t in index.tasks
        if t.lineage[-1:] == (previous.id,) and t.graph_of(index) == graph.id
    ]
    if len(siblings) > 1:
        raise refuse(f"{previous.id!r} opened several tasks: {', '.join(siblings)}")
    between = _between(previous, target, is_human)
    if between is None:
        raise refuse(f"it is not reached from {previous.id!r} without another human task")
    on_the_way = {*between, target}
    for node in (previous, *between):
        if _single_branch_split(node, target, on_the_way, settled):
            continue
        if node.type in _SPLITS:
            kind = node.type.name.lower()
            raise refuse(
                f"the {kind} gateway {node.id!r} on the way from {previous.id!r} to this task "
                "splits or joins branches"
            )
        if node.type != NodeType.EXCLUSIVE and len(node.next_links) > 1:
            raise refuse(f"{node.id!r} may open more than one task (several outgoing links)")
    inner = _called_on_the_way(between, graph, called, is_human, settled, refuse)
    return previous, (*between, *inner)


def _called_on_the_way(
    between: tuple[Node, ...],
    graph: Graph,
    called: Callable[[Node], Sequence[Graph] | None],
    is_human: Callable[[Node], bool],
    settled: Callable[[Node], bool],
    refuse: Callable[[str], SendBackError],
) -> tuple[Node, ...]:
    """The nodes of the sub-graphs that the nodes ``between`` call, at any depth (those
    P's submit ran hold states), after checking that none of them is a human task holding a
    state — operated by someone, not settled on the way."""
    inner: dict[Node, None] = {}
    for node in between:
        graphs = called(node)
        if graphs is None:
            raise refuse(f"{node.id!r} on the way calls a sub-graph that is not loaded")
        for sub in graphs:
            if sub is graph:
                raise refuse(f"{node.id!r} on the way calls back graph {graph.id!r}")
            for inside in sub.nodes.values():
                if inside.type == NodeType.ACTIVITY and settled(inside) and is_human(inside):
                    raise refuse(
                        f"{inside.id!r} of sub-graph {sub.id!r}, called on the way by "
                        f"{node.id!r}, is a human task that was operated"
                    )
                inner[inside] = None
    return tuple(inner)


def _single_branch_split(
    node: Node, target: Node, on_the_way: set[Node], settled: Callable[[Node], bool]
) -> bool:
    """Whether ``node`` is an inclusive split (one way in) whose conditions took one branch
    only, the one on the way to the task: exactly one of its next nodes was reached (holds a
    state, or is the task itself). Clearing the way back then leaves nothing behind, and
    forwarding P again evaluates the conditions afresh. A second branch reached — even one
    that could also lead to the task — may have moved on, and is never undone."""
    if node.type != NodeType.INCLUSIVE or len(node.prev_nodes) != 1:
        return False
    reached = [n for n in node.next_nodes if n is target or settled(n)]
    return len(reached) == 1 and reached[0] in on_the_way


def _between(start: Node, end: Node, is_human: Callable[[Node], bool]) -> tuple[Node, ...] | None:
    """Nodes on some path ``start`` → ``end`` whose inner nodes are not human tasks (layout
    order), or ``None`` when ``end`` is not reached that way."""
    forward = _reach(start, end, lambda n: n.next_nodes, is_human)
    if end not in forward:
        return None
    backward = _reach(end, start, lambda n: n.prev_nodes, is_human)
    inner = (forward & backward) - {start, end}
    return tuple(n for n in start.graph.nodes.values() if n in inner)


def _reach(
    origin: Node,
    stop: Node,
    step: Callable[[Node], Iterable[Node]],
    is_human: Callable[[Node], bool],
) -> set[Node]:
    seen: set[Node] = set()
    todo = list(step(origin))
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if node is stop or node is origin or is_human(node):
            continue
        todo.extend(step(node))
    return seen


__all__ = ["send_back_target"]
