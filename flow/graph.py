"""The immutable graph model: :class:`Graph`, :class:`Node` and :class:`Link`.

A graph is built once (from text or from a :class:`~flow.spec.GraphSpec`) and never changes
afterwards, so the engine can share it between threads and instances and precompute every
neighbour list. Immutable all the way down: attributes refuse assignment
(:class:`~flow.errors.ReadOnlyGraphError`), ``meta`` is a deep read-only copy made at build time
(see :mod:`flow._frozen`), neighbour lists are tuples and ``nodes`` a read-only mapping. Reads
cost what they cost on plain objects: nothing is checked or copied per access.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from flow._fields import check_description, check_id, check_priority, check_text, check_type
from flow._frozen import budget, freeze_meta, refuse_delattr, refuse_setattr
from flow._text import safe_repr
from flow.errors import GraphDefinitionError, InvalidArgumentTypeError, NodeNotFoundError
from flow.node_type import NodeType
from flow.spec import LinkSpec, NodeSpec

if TYPE_CHECKING:
    from flow._frozen import _Budget
    from flow.spec import GraphSpec, LoadNotes
    from flow.validation import Problem

_set = object.__setattr__  # how the model's own code sets attributes while building


def _link_specs(spec: NodeSpec, of: str, graph_id: str) -> list[LinkSpec]:
    """A node spec's links: a list of :class:`LinkSpec` (``link_add`` makes them; a list
    edited by hand may hold anything)."""
    links = spec.links
    if not isinstance(links, list | tuple):
        raise GraphDefinitionError(
            f"The links {of} must be a list of LinkSpec, not {type(links).__name__}",
            graph_id=graph_id,
        )
    for position, link in enumerate(links, start=1):
        if not isinstance(link, LinkSpec):
            raise GraphDefinitionError(
                f"Link #{position} {of} must be a LinkSpec (NodeSpec.link_add), not "
                f"{type(link).__name__}",
                graph_id=graph_id,
            )
    return list(links)


class Link:
    """A directed edge ``prev_id -> next_id`` with an optional condition and priority.

    ``when`` holds the condition as written (a stripped string) or a condition component;
    ``None`` means "no condition" (always true, and the default link of an exclusive gateway).
    """

    __slots__ = ("_graph", "meta", "next_id", "next_node", "prev_id", "priority", "title", "when")

    _graph: Graph
    prev_id: str
    next_id: str
    title: str | None
    meta: Mapping[str, Any]
    priority: int
    when: Any
    #: The target node, or ``None`` when the id does not exist (the branch just ends);
    #: resolved once the graph has all its nodes.
    next_node: Node | None

    def __init__(self, graph: Graph, prev_id: str, spec: LinkSpec, spent: _Budget) -> None:
        gid = graph.id
        what = f"The nextId of a link of node {prev_id!r} of graph {gid!r}"
        next_id = check_id(spec.next_id, what, gid, allow_empty=True)
        where = f"link {prev_id} -> {next_id}"
        of = f"of {where} of graph {gid!r}"
        _set(self, "_graph", graph)
        _set(self, "prev_id", prev_id)
        _set(self, "next_id", next_id)
        _set(self, "title", check_text(spec.title, f"The title {of}", gid))
        _set(self, "meta", freeze_meta(spec.meta, spent, where))
        _set(self, "priority", check_priority(spec.priority, f"The priority {of}", gid))
        _set(self, "when", check_description(spec.when, f"The condition {of}", gid))
        _set(self, "next_node", None)

    __setattr__ = refuse_setattr
    __delattr__ = refuse_delattr

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

    graph: Graph
    id: str
    title: str | None
    type: NodeType
    meta: Mapping[str, Any]
    when: Any
    task: Any
    _links: tuple[Link, ...]
    next_link_list: tuple[Link, ...]
    prev_link_list: tuple[Link, ...]
    next_node_list: tuple[Node, ...]
    prev_node_list: tuple[Node, ...]

    def __init__(self, graph: Graph, spec: NodeSpec, spent: _Budget) -> None:
        """``spec.id`` is checked by the graph (which knows the node's position)."""
        gid, of = graph.id, f"of node {spec.id!r} of graph {graph.id!r}"
        links = tuple(Link(graph, spec.id, ls, spent) for ls in _link_specs(spec, of, gid))
        _set(self, "graph", graph)
        _set(self, "id", spec.id)
        _set(self, "title", check_text(spec.title, f"The title {of}", gid))
        _set(self, "type", check_type(spec.type, f"The type {of}", gid))
        _set(self, "meta", freeze_meta(spec.meta, spent, f"node {spec.id!r}"))
        _set(self, "when", check_description(spec.when, f"The condition {of}", gid))
        _set(self, "task", check_description(spec.task, f"The task {of}", gid))
        _set(self, "_links", links)
        # Stable sort: higher priority first, equal priorities keep definition order.
        _set(self, "next_link_list", tuple(sorted(links, key=lambda link: -link.priority)))
        _set(self, "prev_link_list", ())
        _set(self, "next_node_list", ())
        _set(self, "prev_node_list", ())

    __setattr__ = refuse_setattr
    __delattr__ = refuse_delattr

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
    # A key that cannot be hashed (a list) raises InvalidArgumentTypeError naming the node, not
    # the dict's bare TypeError; the ``try`` costs nothing on the common path.
    def meta_get(self, key: str, default: Any = None) -> Any:
        try:
            return self.meta.get(key, default)
        except TypeError:
            raise self._bad_meta_key(key) from None

    def _bad_meta_key(self, key: object) -> InvalidArgumentTypeError:
        return InvalidArgumentTypeError(
            "key",
            key,
            f"a meta key (a string) of node {safe_repr(self.id)} of graph "
            f"{safe_repr(self.graph.id)}",
        )

    def meta_as_str(self, key: str) -> str | None:
        """The meta value as text (``str()`` of non-strings), ``None`` when absent."""
        try:
            value = self.meta.get(key)
        except TypeError:
            raise self._bad_meta_key(key) from None
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        return value if isinstance(value, str) else str(value)

    def meta_as_bool(self, key: str) -> bool | None:
        """``"true"`` (any case) and positive numbers are true; ``None`` when absent."""
        try:
            value = self.meta.get(key)
        except TypeError:
            raise self._bad_meta_key(key) from None
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return value > 0
        return str(value).strip().lower() == "true"

    def meta_as_number(self, key: str) -> float | int | None:
        """The meta value as a number; raises :class:`GraphDefinitionError` if it is not one."""
        try:
            value = self.meta.get(key)
        except TypeError:
            raise self._bad_meta_key(key) from None
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

    id: str
    title: str
    driver: str
    meta: Mapping[str, Any]
    nodes: Mapping[str, Node]
    links: Sequence[Link]
    start: Node
    _load_notes: LoadNotes

    def __init__(self, spec: GraphSpec) -> None:
        check_id(spec.id, "Graph id", None)
        if ":" in spec.id:
            # A workflow keys each node's state "<graph id>:<node id>": node "b:c" of graph
            # "a" and node "c" of graph "a:b" would share one state (one approval counting
            # for both). Node ids may hold ':' — the first ':' of a key ends the graph id.
            raise GraphDefinitionError(
                f"Graph id {spec.id!r} contains ':', which ends a graph id in the state keys"
                " '<graph id>:<node id>'",
                graph_id=spec.id,
            )
        spent = budget(spec.id)
        _set(self, "id", spec.id)
        of = f"of graph {spec.id!r}"
        _set(self, "title", check_text(spec.title, f"The title {of}", spec.id) or spec.id)
        _set(self, "driver", check_text(spec.driver, f"The driver {of}", spec.id) or "")
        _set(self, "meta", freeze_meta(spec.meta, spent, "the graph"))
        node_map = self._build_nodes(spec.nodes, spent)
        _set(self, "nodes", MappingProxyType(node_map))
        _set(self, "links", tuple(link for n in node_map.values() for link in n._links))
        self._link_neighbours(node_map)
        _set(self, "start", self._find_start(node_map))
        # A copy: the spec stays editable without changing what validate() reports here.
        notes = spec.load_notes
        _set(
            self,
            "_load_notes",
            replace(
                notes,
                duplicate_ids=list(notes.duplicate_ids),
                unknown_types=dict(notes.unknown_types),
                empty_link_ids=set(notes.empty_link_ids),
            ),
        )

    __setattr__ = refuse_setattr
    __delattr__ = refuse_delattr

    def _build_nodes(self, specs: Mapping[str, NodeSpec], spent: _Budget) -> dict[str, Node]:
        """The nodes, each id checked: text, not empty, and the key the spec is stored under
        (an id changed after ``add_node`` would make ``nodes[key].id`` another id)."""
        node_map: dict[str, Node] = {}
        for position, (key, ns) in enumerate(specs.items(), start=1):
            what = f"The id of node #{position} of graph {self.id!r}"
            if not isinstance(ns, NodeSpec):
                raise GraphDefinitionError(
                    f"Node #{position} of graph {self.id!r} ({safe_repr(key)}) must be a NodeSpec, "
                    f"not {type(ns).__name__}",
                    graph_id=self.id,
                )
            node_id = check_id(ns.id, what, self.id)
            if node_id != key:
                raise GraphDefinitionError(
                    f"{what} is {node_id!r} but the node was added as {safe_repr(key)}: add the "
                    "node again (GraphSpec.add_node) after changing its id",
                    graph_id=self.id,
                )
            node_map[node_id] = Node(self, ns, spent)
        return node_map

    def _link_neighbours(self, node_map: Mapping[str, Node]) -> None:
        incoming: dict[str, list[Link]] = {}
        for link in self.links:
            _set(link, "next_node", node_map.get(link.next_id))
            incoming.setdefault(link.next_id, []).append(link)
        for node in node_map.values():
            if node.type != NodeType.START:
                links_in = incoming.get(node.id, [])
                _set(node, "prev_link_list", tuple(reversed(links_in)))
                _set(node, "prev_node_list", tuple(node_map[link.prev_id] for link in links_in))
            if node.type != NodeType.END:
                next_nodes = tuple(
                    target
                    for link in node.next_link_list
                    if (target := node_map.get(link.next_id)) is not None
                )
                _set(node, "next_node_list", next_nodes)

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
        """Load a graph from a ``.yml``/``.yaml``/``.json`` file. A ``path`` that is not a
        ``str``/``os.PathLike``, holds NUL or names no readable graph file raises
        :class:`GraphDefinitionError`, as a text that is not a ``str`` does."""
        from flow.loader import read_graph_file

        return cls.from_text(read_graph_file(path), strict=strict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = False) -> Graph:
        """Load a graph from an already parsed document (same rules as the text form)."""
        from flow.spec import GraphSpec

        return GraphSpec.from_dict(data).create(strict=strict)

    # -- lookup ------------------------------------------------------------------------
    def get_node(self, node_id: str) -> Node | None:
        """The node ``node_id``; ``None`` for any other id — also one that is no string at
        all (a JSON list or object taken from a request), which no node has."""
        return self.nodes.get(node_id) if isinstance(node_id, str) else None

    def get_node_or_throw(self, node_id: str) -> Node:
        node = self.get_node(node_id)
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
