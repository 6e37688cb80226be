"""Values worked out once per graph object.

Graphs are immutable, so what is derived from one (its JSON document, the sub-graphs it calls,
the controller a CLI picks for it) can be kept for as long as the object lives. The memo is
keyed by ``id(graph)`` and keeps the graph with its value: a graph freed while its id is still
a key would otherwise hand its value to the next graph that gets the same id. Bounded: past
its capacity (an app that builds graphs per request, a reindex parsing one per row) it starts
over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from flow.graph import Graph

_V = TypeVar("_V")


class GraphMemo(Generic[_V]):
    """``graph`` → a value derived from it, by identity."""

    __slots__ = ("_capacity", "_found")

    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = capacity
        self._found: dict[int, tuple[Graph, _V]] = {}

    def get(self, graph: Graph) -> _V | None:
        """The value kept for this very graph object, else ``None``."""
        found = self._found.get(id(graph))
        return found[1] if found is not None and found[0] is graph else None

    def put(self, graph: Graph, value: _V) -> _V:
        """Keep ``value`` for ``graph`` and return it."""
        if len(self._found) >= self._capacity:
            self._found.clear()
        self._found[id(graph)] = (graph, value)
        return value


__all__ = ["GraphMemo"]
