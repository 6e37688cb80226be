"""The immutable graph model: :class:`Graph`, :class:`Node` and :class:`Link`.

A graph is built once (from text or from a :class:`~flow.spec.GraphSpec`) and never changes
afterwards, so the engine can share it between threads and precompute every neighbour list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from flow.errors import GraphDefinitionError, NodeNotFoundError
from flow.node_type import NodeType

if TYPE_CHECKING:
    from flow.spec import GraphSpec, LinkSpec, NodeSpec
    from flow.validation import Problem

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _freeze(meta: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(meta)) if meta else _EMPTY


class Link:
    """A directed edge ``prev_id -> next_id`` with an optional condition and priority.

    ``when`` holds the condition as written (a stripped string) or a condition component;
    ``None`` means "no condition" (always true, and the default link of an exclusive gateway).
    """

    __slots__ = ("_graph", "meta", "next_id", "next_node", "prev_id", "priority", "title", "when")

    def __init__(self, graph: Graph, prev_id: str, spec: LinkSpec) -> None:
        self._graph = graph
        self.prev_id: str = prev_id
        self.next_id: str = spec.next_id
        self.title: str | None = spec.title
        self.meta: Mapping[str, Any] = _freeze(spec.meta)
        self.priority: int = spec.priority
        self.when: Any = spec.when
        #: The target node, or ``None`` when the id does not exist (the branch just ends);
        #: resolved once the graph has all its nodes.
        self.next_node: Node | None = None

    @property
    def prev_node(self) -> Node:
        return self._graph.nodes[self.prev_id]

    def __repr__(self) -> str:
        return f"Link({self.prev_id!r} -> {self.next_id!r}, priority={self.priority})"


class Node:
    """A node of a graph. Neighbour lists are computed once when the graph is built."""

    __slots__ = (
        "_links",
        "graph",
        "id",
        "meta",
        "next_link_list",
        "next_node_list",
        "prev_link_list",
        "prev_node_list",
        "task",
        "title",
        "type",
        "when",
    )

    def __init__(self, graph: Graph, spec: NodeSpec) -> None:
        self.graph: Graph = graph
        self.id: str = spec.id
        self.title: str | None = spec.title
        self.type: NodeType = spec.type
        self.meta: Mapping[str, Any] = _freeze(spec.meta)
        self.when: Any = spec.when
        self.task: Any = spec.task
        self._links: tuple[Link, ...] = tuple(Link(graph, spec.id, ls) for ls in spec.links)
        # Stable sort: higher priority first, equal priorities keep definition order.
        self.next_link_list: tuple[Link, ...] = tuple(
            sorted(self._links, key=lambda link: -link.priority)
        )
        self.prev_link_list: tuple[Link, ...] = ()
        self.next_node_list: tuple[Node, ...] = ()
        self.prev_node_list: tuple[Node, ...] = ()

    # -- neighbours --------------------------------------------------------------------
    @property
    def next_links(self) -> Sequence[Link]:
        """Outgoing links, highest priority first (stable)."""
        return self.next_link_list

    @property
    def prev_links(self) -> Sequence[Link]:
        """Incoming links (empty for START); only their number matters to joins."""
        return self.prev_link_list

    @property
    def next_nodes(self) -> Sequence[Node]:
        """Targets of the outgoing links that exist, in priority order (empty for END)."""
        return self.next_node_list

    @property
    def prev_nodes(self) -> Sequence[Node]:
        """Sources of the incoming links, in graph-link order (empty for START)."""
        return self.prev_node_list

    @property
    def next_node(self) -> Node | None:
        return self.next_node_list[0] if self.next_node_list else None

    # -- meta helpers ------------------------------------------------------------------
    def meta_get(self, key: str, default: Any = None) -> Any:
        return self.meta.get(key, default)

    def meta_as_str(self, key: str) -> str | None:
        """The meta value as text (``str()`` of non-strings), ``None`` when absent."""
        value = self.meta.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        return value if isinstance(value, str) else str(value)

    def meta_as_bool(self, key: str) -> bool | None:
        """``"true"`` (any case) and positive numbers are true; ``None`` when absent."""
        value = self.meta.get(key)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return value > 0
        return str(value).strip().lower() == "true"

    def meta_as_number(self, key: str) -> float | int | None:
        """The meta value as a number; raises :class:`GraphDefinitionError` if it is not one."""
        value = self.meta.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int | float):
            return value
        try:
            return float(str(value))
        except ValueError:
            raise GraphDefinitionError(
                f"meta {key!r} of node {self.id!r} is not a number: {value!r}",
                graph_id=self.graph.id,
            ) from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return self.id == other.id and self.graph.id == other.graph.id

    def __hash__(self) -> int:
        return hash((self.graph.id, self.id))

    def __repr__(self) -> str:
        return f"Node({self.graph.id}:{self.id}, {self.type.name})"


class Graph:
    """An immutable flow graph. Build one with :meth:`from_text`, :meth:`from_file`,
    :meth:`from_dict` or :class:`~flow.spec.GraphSpec`."""

    __slots__ = (
        "_load_notes",
        "driver",
        "id",
        "links",
        "meta",
        "nodes",
        "start",
        "title",
    )

    def __init__(self, spec: GraphSpec) -> None:
        self.id: str = spec.id
        self.title: str = spec.title or spec.id
        self.driver: str = spec.driver or ""
        self.meta: Mapping[str, Any] = _freeze(spec.meta)
        node_map = {node_id: Node(self, ns) for node_id, ns in spec.nodes.items()}
        self.nodes: Mapping[str, Node] = MappingProxyType(node_map)
        self.links: Sequence[Link] = tuple(link for n in node_map.values() for link in n._links)
        self._link_neighbours(node_map)
        self.start: Node = self._find_start(node_map)
        self._load_notes = spec.load_notes

    def _link_neighbours(self, node_map: Mapping[str, Node]) -> None:
        incoming: dict[str, list[Link]] = {}
        for link in self.links:
            link.next_node = node_map.get(link.next_id)
            incoming.setdefault(link.next_id, []).append(link)
        for node in node_map.values():
            if node.type != NodeType.START:
                links_in = incoming.get(node.id, [])
                node.prev_link_list = tuple(reversed(links_in))
                node.prev_node_list = tuple(node_map[link.prev_id] for link in links_in)
            if node.type != NodeType.END:
                node.next_node_list = tuple(
                    target
                    for link in node.next_link_list
                    if (target := node_map.get(link.next_id)) is not None
                )

    def _find_start(self, node_map: Mapping[str, Node]) -> Node:
        starts = [n for n in node_map.values() if n.type == NodeType.START]
        if starts:
            return starts[-1]
        for node in node_map.values():
            if not node.prev_link_list:
                return node
        raise GraphDefinitionError(
            f"No start node found in graph {self.id!r}: no node of type start and every node "
            "has an incoming link",
            graph_id=self.id,
        )

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str, *, strict: bool = False) -> Graph:
        """Load a graph from YAML or JSON text (strict: raise on every validation error)."""
        from flow.spec import GraphSpec

        return GraphSpec.from_text(text).create(strict=strict)

    @classmethod
    def from_file(cls, path: str | Path, *, strict: bool = False) -> Graph:
        """Load a graph from a ``.yml``/``.yaml``/``.json`` file."""
        from flow.loader import read_graph_file

        return cls.from_text(read_graph_file(path), strict=strict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = False) -> Graph:
        """Load a graph from an already parsed document (same rules as the text form)."""
        from flow.spec import GraphSpec

        return GraphSpec.from_dict(data).create(strict=strict)

    # -- lookup ------------------------------------------------------------------------
    def get_node(self, node_id: str) -> Node | None:
        return self.nodes.get(node_id)

    def get_node_or_throw(self, node_id: str) -> Node:
        node = self.nodes.get(node_id)
        if node is None:
            raise NodeNotFoundError(node_id, self.id)
        return node

    # -- checks and export -------------------------------------------------------------
    def validate(self) -> list[Problem]:
        """Every problem of the graph at once: errors and warnings, each with its node/link."""
        from flow.validation import validate_graph

        return validate_graph(self)

    def to_dict(self) -> dict[str, Any]:
        from flow.export import graph_to_dict

        return graph_to_dict(self)

    def to_json(self) -> str:
        from flow.export import graph_to_json

        return graph_to_json(self)

    def to_yaml(self) -> str:
        from flow.export import graph_to_yaml

        return graph_to_yaml(self)

    def to_mermaid(self, states: Mapping[str, int] | None = None) -> str:
        """A Mermaid ``flowchart``; with ``states`` (node id -> TaskState code) nodes are styled."""
        from flow.render import graph_to_mermaid

        return graph_to_mermaid(self, states)

    def __repr__(self) -> str:
        return f"Graph({self.id!r}, {len(self.nodes)} nodes)"
