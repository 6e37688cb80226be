"""Graph pictures as text: Mermaid (:func:`graph_to_mermaid`) and Graphviz (:func:`graph_to_dot`).

Both show node shapes by type (start/end rounded, activities boxes, exclusive/inclusive/parallel
gateways diamonds labelled with their type, loops hexagons), link labels with the link title and
condition (``default`` for the unconditioned link of an exclusive gateway) and, when ``states``
maps node ids to ``TaskState`` codes, colour each node by its state: waiting amber, completed
green, terminated red (unknown codes and absent nodes stay plain). Links to unknown node ids end
in a dashed "missing" node so the mistake is visible. All text from the graph is escaped, so any
title, id or condition renders safely: Mermaid and DOT syntax is escaped, and so is every control
character (C0, DEL, C1: ``ESC``, ``BS``, ``NUL``...), line separator and bidi override, shown as
its escape (``\x1b``, ``\u202e``) like ``flow validate`` shows it, so a picture printed to a
terminal sends it no escape sequence. (DOT ids stay distinct: ``"a\x1b"`` written as text is not
the id of a node whose id holds ``ESC``.)

A picture with ``states`` is a picture of one instance, meant to be read without this page: it
also names the actor of each human node (its ``actor`` meta, ``for manager``), draws the path
taken as thick green links — every link from a completed node (or from the start node, once
anything has a state) to a node that was reached — and carries a legend, titled with
``instance_id`` when given.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from flow._text import escape_controls
from flow.node_type import NodeType

if TYPE_CHECKING:
    from flow.graph import Graph, Link, Node

# TaskState codes (flow.workflow.TaskState) -> style name, fill, stroke
_STATE_STYLES: dict[int, tuple[str, str, str]] = {
    1001: ("waiting", "#ffe08a", "#b7791f"),
    1002: ("completed", "#b7e4c7", "#2f855a"),
    1003: ("terminated", "#f5b7b1", "#c53030"),
}
_COMPLETED = 1002
_PATH_COLOUR = "#2f855a"
_ACTOR_KEY = "actor"
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
    # Mermaid reads a ``%%{...}%%`` directive anywhere in the text, inside quoted labels too
    # (a title could restyle the whole picture, or swallow the rest of it).
    ("%", "#37;"),
)


def graph_to_mermaid(
    graph: Graph, states: Mapping[str, int] | None = None, *, instance_id: str | None = None
) -> str:
    """A Mermaid ``flowchart TD``; ``states`` (node id -> TaskState code) makes it a picture of
    one instance: colour classes, actors, the path taken and a legend naming ``instance_id``."""
    ids = _MermaidIds()
    actors = states is not None
    lines = ["flowchart TD"]
    lines += [f"    {ids.of(n.id)}{_mermaid_shape(n, actors)}" for n in graph.nodes.values()]
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
        lines += _mermaid_path(graph, states)
        lines += _mermaid_legend(graph, instance_id)
    return "\n".join(lines) + "\n"


def graph_to_dot(
    graph: Graph, states: Mapping[str, int] | None = None, *, instance_id: str | None = None
) -> str:
    """A Graphviz ``digraph`` (render with ``dot -Tsvg``); ``states`` makes it a picture of one
    instance: nodes filled by state, actors, the path taken and a legend naming ``instance_id``."""
    title = graph.title if instance_id is None else f"{graph.title}\ninstance {instance_id}"
    lines = [
        f"digraph {_dot_id(graph.id)} {{",
        f"    label={_dot_text(title)};",
        "    labelloc=t;",
        '    fontname="Helvetica";',
        '    node [fontname="Helvetica"];',
        '    edge [fontname="Helvetica"];',
    ]
    actors = states is not None
    lines += [_dot_node(n, (states or {}).get(n.id), actors) for n in graph.nodes.values()]
    for missing in _missing_targets(graph):
        label = _dot_text(f"{missing} (missing)")
        lines.append(f"    {_dot_id(missing)} [label={label}, shape=box, style=dashed];")
    taken = _path_taken(graph, states) if states is not None else set()
    for link in graph.links:
        label = _link_label(link)
        attrs = [f"label={_dot_text(label)}"] if label else []
        if (link.prev_id, link.next_id) in taken:
            attrs += ["penwidth=3", f'color="{_PATH_COLOUR}"']
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"    {_dot_id(link.prev_id)} -> {_dot_id(link.next_id)}{suffix};")
    if states is not None:
        lines += _dot_legend(graph, instance_id)
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- shared -----------------------------------------------------------------------------


def _node_label(node: Node, actors: bool = False) -> str:
    if node.type in _GATEWAYS or node.type == NodeType.LOOP:
        kind = node.type.name.lower()
        label = f"{node.title} ({kind})" if node.title else kind
    else:
        label = node.title or node.id
    actor = node.meta_as_str(_ACTOR_KEY) if actors else None
    return f"{label} (for {actor})" if actor else label


def _path_taken(graph: Graph, states: Mapping[str, int]) -> set[tuple[str, str]]:
    """``(prev, next)`` of the links the instance went along (see the module docstring)."""
    reached = {n for n in graph.nodes if states.get(n) in _STATE_STYLES}
    if not reached:
        return set()
    passed = {node_id for node_id in reached if states[node_id] == _COMPLETED}
    passed.add(graph.start.id)
    return {
        (link.prev_id, link.next_id)
        for link in graph.links
        if link.prev_id in passed and (link.next_id in reached or link.next_id in passed)
    }


def _legend_entries() -> list[tuple[str, str]]:
    """``(name, text)`` of the legend: the three states, then plain nodes."""
    entries = [(name, name) for name, _, _ in _STATE_STYLES.values()]
    return [*entries, ("open", "not reached")]


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
        #: Per base, the last suffix tried: ids that all fold to one base (one-character CJK
        #: ids are all ``n__``) take the next one, not a search from 2 each time (quadratic).
        self._last_suffix: dict[str, int] = {}

    def of(self, node_id: str) -> str:
        found = self._ids.get(node_id)
        if found is None:
            base = "n_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)
            found, n = base, self._last_suffix.get(base, 1)
            while found in self._used:
                n += 1
                found = f"{base}_{n}"
            self._last_suffix[base] = n
            self._ids[node_id] = found
            self._used.add(found)
        return found


def _mermaid_text(text: str) -> str:
    """A label: Mermaid's special characters as entities, whitespace folded to one line,
    control characters escaped (ids never need it: :class:`_MermaidIds` makes them)."""
    out = text.replace("#", "#35;")
    for char, entity in _MERMAID_ENTITIES:
        out = out.replace(char, entity)
    return escape_controls(" ".join(out.split()))


def _mermaid_shape(node: Node, actors: bool = False) -> str:
    left, right = _MERMAID_SHAPES.get(node.type, ("[", "]"))
    return f'{left}"{_mermaid_text(_node_label(node, actors))}"{right}'


def _mermaid_path(graph: Graph, states: Mapping[str, int]) -> list[str]:
    taken = _path_taken(graph, states)
    indexes = [
        str(i) for i, link in enumerate(graph.links) if (link.prev_id, link.next_id) in taken
    ]
    if not indexes:
        return []
    return [f"    linkStyle {','.join(indexes)} stroke:{_PATH_COLOUR},stroke-width:4px"]


def _mermaid_legend(graph: Graph, instance_id: str | None) -> list[str]:
    """A legend box (Mermaid ids ``legend*`` never clash with node ids, which are ``n_*``)."""
    title = f"instance {instance_id}" if instance_id is not None else "legend"
    lines = [f'    subgraph legend["{_mermaid_text(title)}"]', "        direction LR"]
    lines += [f'        legend_{name}["{text}"]' for name, text in _legend_entries()]
    lines.append('        legend_path["thick green links: the path taken"]')
    lines.append("    end")
    lines += [f"    class legend_{name} {name}" for name, _, _ in _STATE_STYLES.values()]
    return lines


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
    """A DOT quoted label: line breaks as DOT's ``\\n``, control characters shown as their
    escapes, backslashes doubled so that those and label escapes like ``\\l`` stay literal."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    joined = "\\n".join(_dot_quoted(escape_controls(line)) for line in lines)
    return f'"{joined}"'


def _dot_id(text: str) -> str:
    """A DOT quoted id, one per text: backslashes doubled first, so the single-backslash escape
    of a control character (``\\x1b``, ``\\n``) can be no other id's text."""
    return f'"{escape_controls(_dot_quoted(text))}"'


def _dot_quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dot_node(node: Node, state: int | None, actors: bool = False) -> str:
    shape = _DOT_SHAPES.get(node.type, "box")
    styles = ["rounded"] if shape == "box" else []
    attrs = [f"label={_dot_text(_node_label(node, actors))}", f"shape={shape}"]
    style = _STATE_STYLES.get(state) if state is not None else None
    if style is not None:
        styles.append("filled")
        attrs += [f'fillcolor="{style[1]}"', f'color="{style[2]}"']
    if styles:
        attrs.append(f'style="{",".join(styles)}"')
    return f"    {_dot_id(node.id)} [{', '.join(attrs)}];"


def _dot_legend(graph: Graph, instance_id: str | None) -> list[str]:
    """A legend cluster; its node ids are chosen so that no graph node has them."""
    prefix = "legend:"
    while any(node_id.startswith(prefix) for node_id in graph.nodes) or any(
        target.startswith(prefix) for target in _missing_targets(graph)
    ):
        prefix = "_" + prefix
    title = f"instance {instance_id}" if instance_id is not None else "legend"
    lines = [
        "    subgraph cluster_legend {",
        f"        label={_dot_text(title)};",
        '        style="dashed";',
    ]
    for name, text in _legend_entries():
        style = next((s for s in _STATE_STYLES.values() if s[0] == name), None)
        attrs = [f"label={_dot_text(text)}", "shape=box"]
        if style is not None:
            attrs += ['style="rounded,filled"', f'fillcolor="{style[1]}"', f'color="{style[2]}"']
        else:
            attrs.append('style="rounded"')
        lines.append(f"        {_dot_id(prefix + name)} [{', '.join(attrs)}];")
    start, end = _dot_id(prefix + "path_from"), _dot_id(prefix + "path_to")
    lines += [
        f'        {start} [label="", shape=point];',
        f'        {end} [label="path taken", shape=plaintext];',
        f'        {start} -> {end} [penwidth=3, color="{_PATH_COLOUR}"];',
        "    }",
    ]
    return lines
