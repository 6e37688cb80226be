"""Graph text (YAML or JSON) to :class:`~flow.spec.GraphSpec`, as leniently as the reference.

Loading fails only on unparsable text (with line/column), a missing graph id, wrong shapes and
a graph with no determinable start node; everything else the reference accepts is accepted and
left for :meth:`Graph.validate` to report.

Graph text may come from a database many people edit, so loading is bounded: the text length,
the nesting depth and the number of values the document expands to are limited by the module
constants below, read at each load — set them at start-up to change them. YAML aliases and
merge keys count once per use, measured on the composed YAML nodes, so an alias or merge bomb
is refused before anything expands it. Every failure, YAML tags that do not construct
(``!!timestamp x``, ``!!bool maybe``, ``!!python/...``) included, is a
:class:`GraphDefinitionError`.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from flow import _yaml_nodes
from flow._text import safe_repr
from flow.codec import int_text_limit, too_long_for_text
from flow.errors import GraphDefinitionError
from flow.node_type import NodeType
from flow.spec import GraphSpec, LinkSpec, NodeSpec

try:  # the C loader is ~10x faster when PyYAML was built with libyaml
    _YamlLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _YamlLoader = yaml.SafeLoader

GRAPH_FILE_SUFFIXES = (".yml", ".yaml", ".json")

MAX_TEXT_CHARS = 8 * 1024 * 1024
"""The longest graph text accepted, in characters (a file: 4 bytes per character)."""
MAX_DEPTH = 64
"""The deepest nesting of mappings and lists in a graph document (the document is level 1, a
node level 3, its meta level 4) and in a meta value built in code."""
MAX_VALUES = 1_000_000
"""The most values (scalars, mappings and lists) a graph document may expand to, shared
references, YAML aliases and merge keys (``<<: *base``) counted once per use; also bounds the
meta of a graph built in code. Text counts too: every :data:`CHARS_PER_VALUE` characters of a
string are one more value, so aliases of one long string cannot expand to gigabytes."""
CHARS_PER_VALUE = 32
"""Characters of a string that count as one value toward :data:`MAX_VALUES`."""
MAX_YAML_NODES = 100_000
"""The most nodes (scalars, mappings, lists, aliases) a YAML graph text may hold: building each
costs microseconds of Python, so a text of a million small mappings would take most of a
minute. Counted by the C parser before anything is built; JSON text is not limited by it."""
#: YAML texts shorter than this hold too few nodes to count them first.
_COUNT_NODES_ABOVE = 256 * 1024


def _load_yaml(text: str) -> Any:
    """Parse with the fast C loader; when it refuses, ask the pure-Python loader, which accepts
    what the reference's SnakeYAML accepts and libyaml does not — e.g. ``link:[ ... ]`` (no
    space after the colon inside a flow mapping), used by solon-flow's own example graphs."""
    try:
        return _compose_and_build(text, _YamlLoader)  # both loaders are safe loaders
    except yaml.MarkedYAMLError as exc:
        if _YamlLoader is yaml.SafeLoader or exc.problem != "found unexpected ':'":
            raise
        return _compose_and_build(text, yaml.SafeLoader)


def _compose_and_build(text: str, loader_class: Any) -> Any:
    """``yaml.load``, with the composed nodes measured before any value is built: building
    copies a merged mapping's pairs (``<<: *base``) into every mapping that merges it, which
    a small hostile text makes minutes and gigabytes of work before :func:`check_document`
    could see the result."""
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_nodes(root, loader)
        _check_keys(root, loader)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _check_nodes(root: yaml.Node, loader: Any) -> None:
    """Apply :data:`MAX_VALUES` and :data:`MAX_DEPTH` to the composed document (see
    :mod:`flow._yaml_nodes`), naming the graph by its ``id`` as the loader reads it."""
    try:
        _yaml_nodes.measure(root, _yaml_nodes.Bounds(MAX_VALUES, MAX_DEPTH, CHARS_PER_VALUE))
    except _yaml_nodes.Refused as exc:
        graph_id, whose = _document_name(root, loader)
        raise GraphDefinitionError(f"The document of {whose} {exc}", graph_id=graph_id) from None


def _check_keys(root: yaml.Node, loader: Any) -> None:
    """Refuse two keys of one mapping that PyYAML would merge into one dict key although they
    are different values (``1`` and ``true``): the first pair would be lost without a word."""
    merged = _yaml_nodes.keys_merged_by_python(root, loader)
    if merged is None:
        return
    graph_id, whose = _document_name(root, loader)
    first, second = (
        f"{key.value!r} (line {key.start_mark.line + 1}, column {key.start_mark.column + 1})"
        for key in merged
    )
    raise GraphDefinitionError(
        f"The keys {first} and {second} of one mapping in {whose} are different values but "
        "one key once read (as 1 and true, or 1 and 1.0, are): quote them to keep both as text",
        graph_id=graph_id,
    )


def _document_name(root: yaml.Node, loader: Any) -> tuple[str | None, str]:
    """The graph id of a composed document not built yet, and how an error names it."""
    graph_id = _node_id(_yaml_nodes.document_id(root), loader)
    return graph_id, f"graph {graph_id!r}" if graph_id else "the graph text"


def _node_id(node: yaml.ScalarNode | None, loader: Any) -> str | None:
    """The graph id a scalar ``id`` node stands for (``123`` → ``"123"``), or ``None`` when it
    does not make one (a tag that does not construct, an integer too long for text)."""
    if node is None:
        return None
    try:
        return _scalar_text(loader.construct_object(node), "The graph id", None)
    except Exception:  # only a name for the error being raised: without one, say "the text"
        return None


def graph_file_path(path: object) -> str:
    """``path`` as text when it can name a graph file: a ``str`` or an ``os.PathLike`` giving
    one, without NUL. Anything else is a :class:`GraphDefinitionError`, as a graph text that
    is not a ``str`` is — not the ``TypeError``/``ValueError`` ``open()`` would raise."""
    text: object = None
    if isinstance(path, str | os.PathLike):
        try:
            text = os.fspath(path)
        except TypeError:  # its __fspath__ returned neither str nor bytes
            text = None
    if not isinstance(text, str):
        raise GraphDefinitionError(
            f"A graph file path must be a str or an os.PathLike, not {type(path).__name__}"
        )
    if "\x00" in text:
        raise GraphDefinitionError(
            f"Graph file path {safe_repr(text)} holds a NUL character, which no file name has"
        )
    return text


def read_graph_file(path: str | Path) -> str:
    """The text of a graph file; a missing or unreadable file is a GraphDefinitionError."""
    p = Path(graph_file_path(path))
    if p.suffix.lower() not in GRAPH_FILE_SUFFIXES:
        raise GraphDefinitionError(f"{p}: a graph file must end in .yml, .yaml or .json")
    limit = 4 * MAX_TEXT_CHARS  # bytes: UTF-8 takes at most 4 per character
    try:
        # Opened without blocking and checked on the open file (not by name, which could
        # change in between): a named pipe would block the open and every read until a
        # writer comes, a device such as /dev/zero never ends. Only a regular file is read.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(p, flags)
        # Checked on the descriptor before it becomes a file object: os.fdopen refuses a
        # directory itself, with "Is a directory: 3" (the descriptor, not the name).
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError:
            os.close(fd)
            raise
        if not regular:
            os.close(fd)
            raise GraphDefinitionError(f"{p}: a graph file must be a regular file")
        with os.fdopen(fd, "rb") as file:
            data = file.read(limit + 1)  # at most one byte past the limit
        if len(data) > limit:
            raise GraphDefinitionError(_too_long(f"{p}: the graph file"))
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphDefinitionError(f"{p}: cannot read graph file: {exc}") from exc


def _too_long(what: str) -> str:
    return f"{what} is longer than {MAX_TEXT_CHARS} characters; limit: flow.loader.MAX_TEXT_CHARS"


def parse_text(text: str) -> Mapping[str, Any]:
    """Parse YAML or JSON text into a mapping; syntax errors carry line and column (1-based).
    A leading byte order mark is ignored."""
    if not isinstance(text, str):
        raise GraphDefinitionError(f"Graph text must be a str, not {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise GraphDefinitionError(_too_long("The graph text"))
    # A byte order mark (Windows editors write one) would hide JSON text from the JSON parser.
    text = text.removeprefix("\ufeff")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:  # JSONDecodeError, or an integer too long for int()
            data = _parse_yaml(text)  # YAML flow mappings also start with '{'
        except RecursionError:
            raise GraphDefinitionError("Graph text is nested too deeply") from None
    else:
        data = _parse_yaml(text)
    if not isinstance(data, Mapping):
        raise GraphDefinitionError(
            f"Graph text must be a mapping with an 'id' and a 'layout', not {type(data).__name__}"
        )
    return data


def _count_yaml_nodes(text: str) -> None:
    """Refuse a YAML text of more than :data:`MAX_YAML_NODES` nodes before building any (the
    C parser's events cost a fraction of building the values). Text that does not parse is
    left to the loader, whose error says where."""
    if len(text) <= _COUNT_NODES_ABOVE:
        return
    try:
        _count_events(text, _YamlLoader)
    except yaml.MarkedYAMLError as exc:
        if _YamlLoader is not yaml.SafeLoader and exc.problem == "found unexpected ':'":
            # Only the pure-Python loader reads this spelling (see _load_yaml), at some 40 µs a
            # node even to count them: a text this long must be written the usual way.
            mark = exc.problem_mark
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise GraphDefinitionError(
                f"Graph text over {_COUNT_NODES_ABOVE // 1024} KiB writes a flow mapping's "
                f"'key:value' without a space{where}, which only the slow YAML loader reads: "
                "write 'key: value', or the graph as JSON"
            ) from None
    except yaml.YAMLError:
        return


def _count_events(text: str, loader: Any) -> None:
    nodes = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, _NODE_EVENTS):
            nodes += 1
            if nodes > MAX_YAML_NODES:
                raise GraphDefinitionError(
                    f"Graph text holds more than {MAX_YAML_NODES} YAML nodes (write large "
                    "graphs as JSON); limit: flow.loader.MAX_YAML_NODES"
                )


_NODE_EVENTS = (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent, yaml.AliasEvent)


def _parse_yaml(text: str) -> Any:
    _count_yaml_nodes(text)
    try:
        return _load_yaml(text)
    except GraphDefinitionError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        where = f" at line {line}, column {column}" if mark is not None else ""
        raise GraphDefinitionError(
            f"Graph text does not parse{where}: {exc.problem or exc}", line=line, column=column
        ) from None
    except Exception as exc:
        # PyYAML's constructors raise anything on bad tags (AttributeError for `!!timestamp x`,
        # KeyError for `!!bool maybe`, ValueError, RecursionError for deep nesting): every one
        # means the text is not a graph document.
        raise GraphDefinitionError(
            f"Graph text does not parse: {type(exc).__name__}: {exc}"
        ) from None


def check_document(data: Any, graph_id: str) -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH`, expanding to more than
    :data:`MAX_VALUES` values, or referring to itself — in time linear in its *distinct*
    objects, so an alias bomb is measured, not expanded."""
    _Measure(graph_id).size(data, 1)


class _Measure:
    """Expanded size and height of each container, remembered by identity (aliases)."""

    def __init__(self, graph_id: str) -> None:
        self.graph_id = graph_id
        self.known: dict[int, tuple[int, int]] = {}  # id -> (expanded values, height)
        self.open: set[int] = set()

    def size(self, value: Any, depth: int) -> tuple[int, int]:
        if not isinstance(value, Mapping | list | tuple | set | frozenset):
            if isinstance(value, int) and too_long_for_text(value):
                # YAML's hex, octal and sexagesimal forms reach any size (Python limits only
                # decimal text); such an int could never be written back as YAML or JSON.
                self._fail(
                    f"holds an integer of more than {int_text_limit()} decimal digits (Python's "
                    "limit for turning integers into text)"
                )
            if isinstance(value, str) and len(value) >= CHARS_PER_VALUE:
                return 1 + len(value) // CHARS_PER_VALUE, 0
            return 1, 0
        key = id(value)
        found = self.known.get(key)
        if found is None:
            found = self.known[key] = self._measure(value, key, depth)
        if depth + found[1] > MAX_DEPTH:
            self._fail(_yaml_nodes.too_deep(MAX_DEPTH))
        return found

    def _measure(self, value: Any, key: int, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            self._fail(_yaml_nodes.too_deep(MAX_DEPTH))
        if key in self.open:
            self._fail(_yaml_nodes.RECURSIVE)
        self.open.add(key)
        total, height = 1, 0
        items = (*value.keys(), *value.values()) if isinstance(value, Mapping) else value
        for item in items:
            count, below = self.size(item, depth + 1)
            total += count
            height = max(height, below + 1)
            if total > MAX_VALUES:
                self._fail(_yaml_nodes.too_many(MAX_VALUES, CHARS_PER_VALUE))
        self.open.discard(key)
        return total, height

    def _fail(self, why: str) -> None:
        raise GraphDefinitionError(
            f"The document of graph {self.graph_id!r} {why}", graph_id=self.graph_id
        )


def _scalar_text(value: Any, what: str, graph_id: str | None) -> str | None:
    """Ids, titles and types: scalars become text, None stays None, collections are an error."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and too_long_for_text(value):
        # The graph id is read before the document is measured (check_document names it).
        raise GraphDefinitionError(
            f"{what} is an integer of more than {int_text_limit()} decimal digits",
            graph_id=graph_id,
        )
    if isinstance(value, str | int | float):
        return str(value)
    raise GraphDefinitionError(
        f"{what} must be a string, not {type(value).__name__}", graph_id=graph_id
    )


def _mapping(value: Any, what: str, graph_id: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise GraphDefinitionError(
            f"{what} must be a mapping, not {type(value).__name__}", graph_id=graph_id
        )
    return {str(k): v for k, v in value.items()}


def _expression(value: Any, what: str, graph_id: str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise GraphDefinitionError(
        f"{what} must be a string, not {type(value).__name__}", graph_id=graph_id
    )


def spec_from_dict(data: Mapping[str, Any]) -> GraphSpec:
    """Build a spec from a parsed document, applying every rule of the reference loader."""
    if not isinstance(data, Mapping):
        raise GraphDefinitionError(f"A graph must be a mapping, not {type(data).__name__}")
    graph_id = _scalar_text(data.get("id"), "graph 'id'", None)
    if not graph_id:
        raise GraphDefinitionError("The graph has no 'id'")
    check_document(data, graph_id)
    spec = GraphSpec(
        graph_id,
        title=_scalar_text(data.get("title"), "graph 'title'", graph_id) or None,
        driver=_scalar_text(data.get("driver"), "graph 'driver'", graph_id) or None,
    )
    spec.meta.update(_mapping(data.get("meta"), "graph 'meta'", graph_id))
    layout = data.get("layout")
    if layout is None:
        layout = data.get("nodes")
    if layout is None:
        layout = []
    if not isinstance(layout, list):
        raise GraphDefinitionError(
            f"'layout' of graph {graph_id!r} must be a list of nodes, not {type(layout).__name__}",
            graph_id=graph_id,
        )
    node_specs = [_node_spec(raw, i, graph_id, spec) for i, raw in enumerate(layout, start=1)]
    for i, (ns, raw) in enumerate(zip(node_specs, layout, strict=True)):
        if raw.get("link") is None and i + 1 < len(node_specs):
            ns.link_add(node_specs[i + 1].id)  # auto link to the next node in layout order
        if ns.id in spec.nodes:
            spec.load_notes.duplicate_ids.append(ns.id)
        spec.add_node(ns)
    # Linkless nodes that are not last: their text said "link: []" (or a duplicate id moved
    # them up); export must write that back for the text to load as this graph again.
    for node_id in list(spec.nodes)[:-1]:
        if not spec.nodes[node_id].links:
            spec.load_notes.empty_link_ids.add(node_id)
    return spec


def _node_spec(raw: Any, position: int, graph_id: str, spec: GraphSpec) -> NodeSpec:
    if not isinstance(raw, Mapping):
        raise GraphDefinitionError(
            f"node #{position} of graph {graph_id!r} must be a mapping, not {type(raw).__name__}",
            graph_id=graph_id,
        )
    node_id = _scalar_text(raw.get("id"), f"node #{position} 'id'", graph_id) or f"n-{position}"
    where = f"node {node_id!r}"
    type_name = _scalar_text(raw.get("type"), f"{where} 'type'", graph_id)
    node_type = NodeType.of(type_name)
    if type_name and not NodeType.is_known_name(type_name):
        spec.load_notes.unknown_types[node_id] = type_name
    ns = NodeSpec(
        node_id,
        node_type,
        title=_scalar_text(raw.get("title"), f"{where} 'title'", graph_id) or None,
        meta=_mapping(raw.get("meta"), f"{where} 'meta'", graph_id),
        when=_expression(raw.get("when"), f"{where} 'when'", graph_id),
        task=_expression(raw.get("task"), f"{where} 'task'", graph_id),
    )
    link = raw.get("link")
    if link is not None:
        items = link if isinstance(link, list) else [link]
        for item in items:
            ns.links.append(_link_spec(item, where, graph_id))
    return ns


def _link_spec(raw: Any, where: str, graph_id: str) -> LinkSpec:
    if isinstance(raw, str | int) and not isinstance(raw, bool):
        return LinkSpec(str(raw))
    if not isinstance(raw, Mapping):
        raise GraphDefinitionError(
            f"a link of {where} must be a node id or a mapping, not {type(raw).__name__}",
            graph_id=graph_id,
        )
    next_id = _scalar_text(raw.get("nextId"), f"'nextId' of a link of {where}", graph_id) or ""
    lwhere = f"link {where} -> {next_id!r}"
    when = raw.get("when")
    if when is None:
        when = raw.get("condition")  # deprecated alias kept for old designer exports
    priority = raw.get("priority", 0)
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int | str):
        raise GraphDefinitionError(f"'priority' of {lwhere} must be an integer", graph_id=graph_id)
    try:
        priority = int(priority)
    except ValueError:
        raise GraphDefinitionError(
            f"'priority' of {lwhere} must be an integer, not {priority!r}", graph_id=graph_id
        ) from None
    return LinkSpec(
        next_id,
        when=_expression(when, f"'when' of {lwhere}", graph_id),
        title=_scalar_text(raw.get("title"), f"'title' of {lwhere}", graph_id) or None,
        priority=priority,
        meta=_mapping(raw.get("meta"), f"'meta' of {lwhere}", graph_id),
    )
