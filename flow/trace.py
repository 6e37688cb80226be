"""The per-context trace: the last node reached in each graph (where a resumed eval goes on)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flow.node_type import NodeType

if TYPE_CHECKING:
    from flow.graph import Graph, Node


@dataclass(frozen=True, kw_only=True)
class NodeRecord:
    """A node as recorded in a trace; ``timestamp`` is milliseconds since the epoch."""

    graph_id: str
    id: str
    title: str | None
    type: NodeType
    timestamp: int

    @property
    def is_end(self) -> bool:
        return self.type == NodeType.END

    @classmethod
    def of(cls, node: Node, timestamp_ns: int | None = None) -> NodeRecord:
        """A record of ``node`` taken now (or at ``timestamp_ns``, nanoseconds since the epoch)."""
        ns = time.time_ns() if timestamp_ns is None else timestamp_ns
        return cls(
            graph_id=node.graph.id,
            id=node.id,
            title=node.title,
            type=node.type,
            timestamp=ns // 1_000_000,
        )


class FlowTrace:
    """Last record per graph, plus the root graph (the first graph recorded since :meth:`clear`).

    When ``enabled`` is false nothing is recorded and every getter answers as if the trace were
    empty (``last_node`` gives the graph's start node). Recording is on the engine's hot path, so
    a :class:`NodeRecord` is only built when someone reads it.
    """

    __slots__ = ("_entries", "enabled", "root_graph_id")

    def __init__(self) -> None:
        self.enabled: bool = True
        self.root_graph_id: str | None = None
        self._entries: dict[str, NodeRecord | tuple[Node, int]] = {}

    @property
    def records(self) -> dict[str, NodeRecord]:
        """Every graph's last record (a copy), whether or not the trace is enabled."""
        return {graph_id: self._record(graph_id) for graph_id in list(self._entries)}

    def _record(self, graph_id: str) -> NodeRecord:
        entry = self._entries[graph_id]
        if isinstance(entry, tuple):
            entry = NodeRecord.of(*entry)
            self._entries[graph_id] = entry
        return entry

    def clear(self) -> None:
        self.root_graph_id = None
        self._entries.clear()

    def record_node(self, graph: Graph, node: Node | None) -> None:
        """Record ``node`` as the last node of ``graph`` (``None`` forgets the graph's record)."""
        if not self.enabled:
            return
        if self.root_graph_id is None:
            self.root_graph_id = graph.id
        if node is None:
            self._entries.pop(graph.id, None)
        else:
            self._entries[graph.id] = (node, time.time_ns())

    def put_record(self, record: NodeRecord) -> None:
        """Store a record as read from a snapshot (does not touch the root graph id)."""
        self._entries[record.graph_id] = record

    def last_record(self, graph_id: str | None = None) -> NodeRecord | None:
        """The record of ``graph_id``, or of the root graph when ``None``."""
        if not self.enabled:
            return None
        key = self.root_graph_id if graph_id is None else graph_id
        try:
            return None if key is None or key not in self._entries else self._record(key)
        except TypeError:  # a list: no graph has that id (as Graph.get_node answers)
            return None

    def last_node(self, graph: Graph) -> Node:
        """The recorded node of ``graph`` or its start node; raises ``NodeNotFoundError`` if the
        recorded id is not in the graph (a snapshot taken on another version of the graph)."""
        record = self.last_record(graph.id)
        return graph.start if record is None else graph.get_node_or_throw(record.id)

    def last_node_id(self, graph_id: str | None = None) -> str | None:
        record = self.last_record(graph_id)
        return None if record is None else record.id

    def is_end(self, graph_id: str | None = None) -> bool:
        record = self.last_record(graph_id)
        return record is not None and record.is_end

    def last_records(self) -> list[NodeRecord]:
        return list(self.records.values()) if self.enabled else []

    def __repr__(self) -> str:
        return f"FlowTrace(root={self.root_graph_id!r}, graphs={list(self._entries)!r})"


__all__ = ["FlowTrace", "NodeRecord"]
