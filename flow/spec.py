"""Mutable builders for graphs: :class:`GraphSpec`, :class:`NodeSpec`, :class:`LinkSpec`.

Specs are what the loader produces and what code uses to build or edit a graph; ``create()``
turns one into an immutable :class:`~flow.graph.Graph`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from flow._text import safe_repr
from flow.errors import GraphDefinitionError, NodeNotFoundError
from flow.node_type import NodeType

if TYPE_CHECKING:
    from flow.graph import Graph


def _description(value: Any) -> Any:
    """A condition/task as stored: stripped text, a component object, or ``None`` if empty."""
    if value is None:
        return None
    if isinstance(value, str):
        stripped = value.strip()
        return stripped or None
    return value


@dataclass
class LoadNotes:
    """What the lenient loader accepted but :meth:`Graph.validate` should still report."""

    duplicate_ids: list[str] = field(default_factory=list)
    unknown_types: dict[str, str] = field(default_factory=dict)
    #: Nodes loaded with no links while not last (``link: []``): export writes that back.
    empty_link_ids: set[str] = field(default_factory=set)


class NodeOptions(TypedDict, total=False):
    """Keyword options of ``GraphSpec.add_*``: ``title``, ``meta``, ``when``, ``task``."""

    title: str | None
    meta: Mapping[str, Any] | None
    when: Any
    task: Any


class LinkSpec:
    """A link being built: target id, optional condition (``when``), title, meta, priority."""

    __slots__ = ("meta", "next_id", "priority", "title", "when")

    def __init__(
        self,
        next_id: str,
        *,
        when: Any = None,
        title: str | None = None,
        priority: int = 0,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.next_id = next_id
        self.when = _description(when)
        self.title = title
        self.priority = priority
        self.meta: dict[str, Any] = _meta_dict(meta, f"link to {safe_repr(next_id)}")

    def __repr__(self) -> str:
        return f"LinkSpec({self.next_id!r})"


def _meta_dict(meta: object, where: str) -> dict[str, Any]:
    """A spec's own copy of the ``meta`` it is given: a mapping, or ``None`` for none."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise GraphDefinitionError(
            f"The meta of {where} must be a mapping, not {type(meta).__name__}"
        )
    return dict(meta)


class NodeSpec:
    """A node being built. ``link_add`` is chainable."""

    __slots__ = ("id", "links", "meta", "task", "title", "type", "when")

    def __init__(
        self,
        id: str,
        type: NodeType = NodeType.ACTIVITY,
        *,
        title: str | None = None,
        meta: Mapping[str, Any] | None = None,
        when: Any = None,
        task: Any = None,
    ) -> None:
        self.id = id
        self.type = type
        self.title = title
        self.meta: dict[str, Any] = _meta_dict(meta, f"node {safe_repr(id)}")
        self.when = _description(when)
        self.task = _description(task)
        self.links: list[LinkSpec] = []

    def link_add(
        self,
        next_id: str,
        *,
        when: Any = None,
        title: str | None = None,
        priority: int = 0,
        meta: Mapping[str, Any] | None = None,
    ) -> NodeSpec:
        self.links.append(LinkSpec(next_id, when=when, title=title, priority=priority, meta=meta))
        return self

    def link_remove(self, next_id: str) -> NodeSpec:
        self.links = [link for link in self.links if link.next_id != next_id]
        return self

    def meta_put(self, key: str, value: Any) -> NodeSpec:
        self.meta[key] = value
        return self

    def __repr__(self) -> str:
        kind = self.type.name if isinstance(self.type, NodeType) else repr(self.type)
        return f"NodeSpec({self.id!r}, {kind})"


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class GraphSpec:
    """A graph being built or edited; ``create()`` freezes it into a :class:`Graph`."""

    def __init__(self, id: str, *, title: str | None = None, driver: str | None = None) -> None:
        if not isinstance(id, str) or not id:
            raise GraphDefinitionError("A graph needs a non-empty id")
        self.id = id
        self.title = title
        self.driver = driver
        self.meta: dict[str, Any] = {}
        self.nodes: dict[str, NodeSpec] = {}
        self.load_notes = LoadNotes()

    # -- nodes -------------------------------------------------------------------------
    def add_node(self, spec: NodeSpec) -> NodeSpec:
        """Add a node; a node with the same id is replaced in place (keeps its position).

        Raises :class:`GraphDefinitionError` naming the graph for anything but a
        :class:`NodeSpec` and for an id that cannot key the nodes (a list: it was a bare
        ``TypeError``/``AttributeError`` here); other ids are checked by :meth:`create`."""
        if not isinstance(spec, NodeSpec):
            raise GraphDefinitionError(
                f"Graph {self.id!r} takes a NodeSpec as a node, not {type(spec).__name__}",
                graph_id=self.id,
            )
        self._check_key(spec.id)
        self.nodes[spec.id] = spec
        self.load_notes.empty_link_ids.discard(spec.id)  # the new node says nothing about text
        return spec

    def add_start(self, id: str, **options: Unpack[NodeOptions]) -> NodeSpec:
        return self.add_node(NodeSpec(id, NodeType.START, **options))

    def add_end(self, id: str, **options: Unpack[NodeOptions]) -> NodeSpec:
        return self.add_node(NodeSpec(id, NodeType.END, **options))

    def add_activity(self, id: str, **options: Unpack[NodeOptions]) -> NodeSpec:
        return self.add_node(NodeSpec(id, NodeType.ACTIVITY, **options))

    def add_exclusive(self, id: str, **options: Unpack[NodeOptions]) -> NodeSpec:
        return self.add_node(NodeSpec(id, NodeType.EXCLUSIVE, **options))

    def add_inclusive(self, id: str, **options: Unpack[NodeOptions]) -> NodeSpec:
        return self.add_node(NodeSpec(id, NodeType.INCLUSIVE, **options))

    def add_parallel(self, id: str, **options: Unpack[NodeOptions]) -> NodeSpec:
        return self.add_node(NodeSpec(id, NodeType.PARALLEL, **options))

    def add_loop(self, id: str, **options: Unpack[NodeOptions]) -> NodeSpec:
        return self.add_node(NodeSpec(id, NodeType.LOOP, **options))

    def remove_node(self, id: str) -> None:
        """Remove the node ``id``; :class:`NodeNotFoundError` when there is none (as for an id
        that no node can have, such as a list — as ``Graph.get_node_or_throw`` says)."""
        if self.get_node(id) is None:
            raise NodeNotFoundError(id, self.id)
        del self.nodes[id]

    def get_node(self, id: str) -> NodeSpec | None:
        """The node ``id``, or ``None`` (also for an id no node can have: a list, a dict)."""
        return self.nodes.get(id) if _hashable(id) else None

    def _check_key(self, node_id: object) -> None:
        """A node id must be hashable to key :attr:`nodes` (it must be text to :meth:`create`)."""
        if not _hashable(node_id):
            raise GraphDefinitionError(
                f"A node id of graph {self.id!r} must be a string, not {type(node_id).__name__}",
                graph_id=self.id,
            )

    def meta_put(self, key: str, value: Any) -> GraphSpec:
        self.meta[key] = value
        return self

    # -- conversion --------------------------------------------------------------------
    def create(self, *, strict: bool = False) -> Graph:
        """Freeze into a :class:`Graph`; ``strict`` raises one error listing every problem."""
        from flow.graph import Graph

        graph = Graph(self)
        if strict:
            errors = [p for p in graph.validate() if p.severity == "error"]
            if errors:
                raise GraphDefinitionError(
                    f"Graph {self.id!r} has {len(errors)} error(s)",
                    graph_id=self.id,
                    problems=[str(p) for p in errors],
                )
        return graph

    @classmethod
    def from_text(cls, text: str) -> GraphSpec:
        from flow.loader import parse_text, spec_from_dict

        return spec_from_dict(parse_text(text))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphSpec:
        from flow.loader import spec_from_dict

        return spec_from_dict(data)

    @classmethod
    def from_graph(cls, graph: Graph) -> GraphSpec:
        """An editable copy of ``graph`` (components, priorities and meta are kept; meta comes
        back as plain dicts and lists, so editing it never touches ``graph``)."""
        from flow._frozen import thaw

        spec = cls(graph.id, title=graph.title, driver=graph.driver or None)
        spec.meta.update(thaw(graph.meta))
        for node in graph.nodes.values():
            ns = NodeSpec(
                node.id,
                node.type,
                title=node.title,
                meta=thaw(node.meta),
                when=node.when,
                task=node.task,
            )
            for link in node._links:
                ns.link_add(
                    link.next_id,
                    when=link.when,
                    title=link.title,
                    priority=link.priority,
                    meta=thaw(link.meta),
                )
            spec.add_node(ns)
        spec.load_notes.empty_link_ids.update(graph._load_notes.empty_link_ids)
        return spec
