"""Graph to text: :func:`graph_to_dict`, :func:`graph_to_json`, :func:`graph_to_yaml`.

The shape is the loader's (``semantics.md`` §1): ``id``, ``title``, ``driver``/``meta`` when
non-empty and a ``layout`` of nodes ``{id, type, title?, meta?, when?, task?, link?}`` whose links
are ``{nextId, title?, meta?, when?, priority?}``. Empty titles, empty meta and priority 0 are left
out; links are written in definition order (priorities carry the evaluation order).

Round trip and the auto-link trap: the loader links a node *without* a ``link`` key to the next
node in layout order. A node with no links that is not last in the layout is therefore written

* as ``"link": []`` when it was loaded from text so — linkless while not last (its text said
  ``link: []``) — or copied with :meth:`GraphSpec.from_graph` from such a graph: re-parsing the
  export gives back exactly the same graph (``Graph.from_text(g.to_json())`` equals ``g`` for
  every graph loaded from text);
* without a ``link`` key otherwise — a node built in code, or a node loaded without a ``link``
  key that an edit moved from the end of the layout — which is the reference's output, byte for
  byte. Re-parsing such an export auto-links that node, exactly as the reference does; give the
  node an explicit link (or put it last) when the text must round-trip.

The choice depends only on the node (its links, what its text said, its position), never on
whether the rest of the graph came from text or code. Replacing a node with
:meth:`GraphSpec.add_node` forgets what the old node's text said.

Conditions and tasks given as Python objects (components) have no text form: exporting them
raises :class:`~flow.errors.GraphDefinitionError` naming the node (register the component in a
container and use its ``@name`` instead). Meta values that JSON/YAML cannot represent raise the
same error, naming the graph, node or link whose meta holds them: a ``date`` or ``bytes`` in
JSON, an object of the caller's own in either. What no graph text can hold — NaN and infinity,
lone surrogates, integers too long to write, two keys that are the same text — never gets here:
the graph refuses it when it is built, and turns non-text meta keys into text (``_frozen``), so
``to_json()`` and ``to_yaml()`` agree and their text loads back as the same graph.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from flow._frozen import thaw
from flow.errors import GraphDefinitionError

if TYPE_CHECKING:
    from flow.graph import Graph, Link, Node


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The graph as plain dicts and lists in loader shape (GraphDefinitionError: components)."""
    data: dict[str, Any] = {"id": graph.id, "title": graph.title}
    if graph.driver:
        data["driver"] = graph.driver
    if graph.meta:
        data["meta"] = _plain(graph.meta)
    nodes = list(graph.nodes.values())
    said_empty = graph._load_notes.empty_link_ids
    data["layout"] = [
        _node_dict(node, keep_empty_link=node.id in said_empty and i < len(nodes) - 1)
        for i, node in enumerate(nodes)
    ]
    return data


def graph_to_json(graph: Graph) -> str:
    """Compact JSON (``,``/``:`` separators, non-ASCII kept as is)."""
    data = graph_to_dict(graph)
    try:
        return _json(data)
    except (TypeError, ValueError) as exc:
        raise _unwritable(graph, "JSON", _json, exc) from exc


def graph_to_yaml(graph: Graph) -> str:
    """Block-style YAML in export key order, non-ASCII kept as is."""
    data = graph_to_dict(graph)
    try:
        return _yaml(data)
    except yaml.YAMLError as exc:
        raise _unwritable(graph, "YAML", _yaml, exc) from exc


def _json(data: Any) -> str:
    # allow_nan=False: the graph refuses NaN when it is built; should one get here, JSON
    # text with NaN is what flow_sqla and other readers refuse.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_SafeDumper, allow_unicode=True, sort_keys=False)


def _unwritable(
    graph: Graph, form: str, dump: Callable[[Any], str], exc: Exception
) -> GraphDefinitionError:
    """The error for meta ``dump`` refuses (a date in JSON, an object of the caller's own),
    naming whose meta it is: found again only on this error path, one meta at a time."""
    owners: list[tuple[str, Mapping[str, Any]]] = [("the graph", graph.meta)]
    for node in graph.nodes.values():
        owners.append((f"node {node.id!r}", node.meta))
        owners += [(f"link {k.prev_id} -> {k.next_id}", k.meta) for k in node._links]
    whose = next((name for name, meta in owners if meta and _refuses(dump, meta)), "a meta")
    return GraphDefinitionError(
        f"Graph {graph.id!r} has meta that {form} cannot represent, in {whose}: {exc}",
        graph_id=graph.id,
    )


def _refuses(dump: Callable[[Any], str], meta: Mapping[str, Any]) -> bool:
    try:
        dump(_plain(meta))
    except (TypeError, ValueError, yaml.YAMLError):
        return True
    return False


class _SafeDumper(yaml.SafeDumper):
    """``yaml.safe_dump``'s dumper, except that text holding U+0085 is double-quoted.

    With ``allow_unicode`` PyYAML writes NEL raw in plain/single-quoted scalars and reads it back
    as a line break (a space), so such text would not round-trip; double quotes escape it.
    """


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if "\x85" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_SafeDumper.add_representer(str, _represent_str)


def _node_dict(node: Node, *, keep_empty_link: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"id": node.id, "type": node.type.name.lower()}
    if node.title:
        out["title"] = node.title
    if node.meta:
        out["meta"] = _plain(node.meta)
    where = f"node {node.id!r} of graph {node.graph.id!r}"
    if node.when is not None:
        out["when"] = _text(node.when, f"'when' of {where}", node.graph.id)
    if node.task is not None:
        out["task"] = _text(node.task, f"'task' of {where}", node.graph.id)
    if node._links or keep_empty_link:
        out["link"] = [_link_dict(link, where) for link in node._links]
    return out


def _link_dict(link: Link, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {"nextId": link.next_id}
    if link.title:
        out["title"] = link.title
    if link.meta:
        out["meta"] = _plain(link.meta)
    if link.when is not None:
        what = f"'when' of link {link.prev_id} -> {link.next_id} of {where}"
        out["when"] = _text(link.when, what, link.prev_node.graph.id)
    if link.priority:
        out["priority"] = link.priority
    return out


def _text(value: Any, what: str, graph_id: str) -> str:
    if isinstance(value, str):
        return value
    raise GraphDefinitionError(
        f"{what} is a component object ({type(value).__name__}) and cannot be exported; "
        "register it in a container and refer to it as '@name'",
        graph_id=graph_id,
    )


def _plain(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A plain dict copy (meta is deeply read-only: proxies and lists the serializers reject)."""
    plain: dict[str, Any] = thaw(meta)
    return plain
