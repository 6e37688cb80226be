"""Graph pictures as text: Mermaid (:func:`graph_to_mermaid`) and Graphviz (:func:`graph_to_dot`).

Both show node shapes by type (start/end rounded, activities boxes, exclusive/inclusive/parallel
gateways diamonds labelled with their type, loops hexagons), link labels with the link title and
condition (``default`` for the unconditioned link of an exclusive gateway) and, when ``states``
maps node ids to ``TaskState`` codes, colour each node by its state: waiting amber, completed
green, terminated red (unknown codes and absent nodes stay plain). Links to unknown node ids end
in a dashed "missing" node so the mistake is visible. All text from the graph is escaped, so any
title, id or condition renders safely.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from flow.node_type import NodeType

if TYPE_CHECKING:
    from flow.graph import Graph, Link, Node

# TaskState codes (flow.workflow.TaskState) -> style name, fill, stroke
_STATE_STYLES: dict[int, tuple[str, str, str]] = {
    1001: ("waiting", "#ffe08a", "#b7791f"),
    1002: ("completed", "#b7e4c7", "#2f855a"),
    1003: ("terminated", "#f5b7b1", "#c53030"),
}
_GATEWAYS = (NodeType.EXCLUSIVE, NodeType.INCLUSIVE, NodeType.PARALLEL)
_MERMAID_SHAPES: dict[NodeType, tuple[str, str]] = {
    NodeType.START: ("([", "])"),
    NodeType.END: ("([", "])"),
    NodeType.EXCLUSIVE: ("{", "}"),
    NodeType.INCLUSIVE: ("{", "}"),
    NodeType.PARALLEL: ("{", "}"),
    NodeType.LOOP: ("{{", "}}"),
}
_DOT_SHAPES: dict[NodeType, str] = {
    NodeType.START: "ellipse",
    NodeType.END: "doublecircle",
    NodeType.EXCLUSIVE: "diamond",
    NodeType.INCLUSIVE: "diamond",
    NodeType.PARALLEL: "diamond",
    NodeType.LOOP: "hexagon",
}
_MERMAID_ENTITIES = (
    ('"', "#quot;"),
    ("<", "#lt;"),
    (">", "#gt;"),
    ("&", "#amp;"),
    ("|", "#124;"),
    ("`", "#96;"),
)


def graph_to_mermaid(graph: Graph, states: Mapping[str, int] | None = None) -> str:
    """A Mermaid ``flowchart TD``; ``states`` (node id -> TaskState code) adds colour classes."""
    ids = _MermaidIds()
    lines = ["flowchart TD"]
    lines += [f"    {ids.of(n.id)}{_mermaid_shape(n)}" for n in graph.nodes.values()]
    for missing in _missing_targets(graph):
        lines.append(f'    {ids.of(missing)}["{_mermaid_text(missing)} (missing)"]')
    for link in graph.links:
        label = _link_label(link)
        arrow = f'-->|"{_mermaid_text(label)}"|' if label else "-->"
        lines.append(f"    {ids.of(link.prev_id)} {arrow} {ids.of(link.next_id)}")
    missing_ids = list(_missing_targets(graph))
    if missing_ids:
        lines.append("    classDef missing stroke-dasharray:5 5")
        lines.append(f"    class {','.join(ids.of(m) for m in missing_ids)} missing")
    if states is not None:
        lines += _mermaid_states(graph, states, ids)
    return "\n".join(lines) + "\n"


def graph_to_dot(graph: Graph, states: Mapping[str, int] | None = None) -> str:
    """A Graphviz ``digraph`` (render with ``dot -Tsvg``); ``states`` fills nodes by state."""
    lines = [
        f"digraph {_dot_text(graph.id)} {{",
        f"    label={_dot_text(graph.title)};",
        "    labelloc=t;",
        '    fontname="Helvetica";',
        '    node [fontname="Helvetica"];',
        '    edge [fontname="Helvetica"];',
    ]
    lines += [_dot_node(n, (states or {}).get(n.id)) for n in graph.nodes.values()]
    for missing in _missing_targets(graph):
        label = _dot_text(f"{missing} (missing)")
        lines.append(f"    {_dot_text(missing)} [label={label}, shape=box, style=dashed];")
    for link in graph.links:
        label = _link_label(link)
        attrs = f" [label={_dot_text(label)}]" if label else ""
        lines.append(f"    {_dot_text(link.prev_id)} -> {_dot_text(link.next_id)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- shared -----------------------------------------------------------------------------


def _node_label(node: Node) -> str:
    if node.type in _GATEWAYS or node.type == NodeType.LOOP:
        kind = node.type.name.lower()
        return f"{node.title} ({kind})" if node.title else kind
    return node.title or node.id


def _link_label(link: Link) -> str:
    condition = _describe(link.when)
    if condition is None and link.prev_node.type == NodeType.EXCLUSIVE:
        condition = "default"
    parts = [part for part in (link.title, condition) if part]
    return ": ".join(parts)


def _describe(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else f"<{type(value).__name__}>"


def _missing_targets(graph: Graph) -> Iterator[str]:
    seen: set[str] = set()
    for link in graph.links:
        if link.next_id not in graph.nodes and link.next_id not in seen:
            seen.add(link.next_id)
            yield link.next_id


# -- mermaid ----------------------------------------------------------------------------


class _MermaidIds:
    """Safe, readable, unique Mermaid ids (``n_<id>``; Mermaid reserves words such as ``end``)."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}
        self._used: set[str] = set()

    def of(self, node_id: str) -> str:
        found = self._ids.get(node_id)
        if found is None:
            base = "n_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)
            found, n = base, 1
            while found in self._used:
                n += 1
                found = f"{base}_{n}"
            self._ids[node_id] = found
            self._used.add(found)
        return found


def _mermaid_text(text: str) -> str:
    out = text.replace("#", "#35;")
    for char, entity in _MERMAID_ENTITIES:
        out = out.replace(char, entity)
    return " ".join(out.split())


def _mermaid_shape(node: Node) -> str:
    left, right = _MERMAID_SHAPES.get(node.type, ("[", "]"))
    return f'{left}"{_mermaid_text(_node_label(node))}"{right}'


def _mermaid_states(graph: Graph, states: Mapping[str, int], ids: _MermaidIds) -> list[str]:
    lines = [
        f"    classDef {name} fill:{fill},stroke:{stroke},color:#000"
        for name, fill, stroke in _STATE_STYLES.values()
    ]
    for code, (name, _, _) in _STATE_STYLES.items():
        members = [ids.of(n) for n in graph.nodes if states.get(n) == code]
        if members:
            lines.append(f"    class {','.join(members)} {name}")
    return lines


# -- dot --------------------------------------------------------------------------------


def _dot_text(text: str) -> str:
    """A DOT quoted string; backslashes doubled so label escapes like ``\\l`` stay literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    return f'"{escaped}"'


def _dot_node(node: Node, state: int | None) -> str:
    shape = _DOT_SHAPES.get(node.type, "box")
    styles = ["rounded"] if shape == "box" else []
    attrs = [f"label={_dot_text(_node_label(node))}", f"shape={shape}"]
    style = _STATE_STYLES.get(state) if state is not None else None
    if style is not None:
        styles.append("filled")
        attrs += [f'fillcolor="{style[1]}"', f'color="{style[2]}"']
    if styles:
        attrs.append(f'style="{",".join(styles)}"')
    return f"    {_dot_text(node.id)} [{', '.join(attrs)}];"
