"""The size of a composed YAML document, measured before PyYAML builds any value from it.

PyYAML loads in two steps: it composes the text into a graph of nodes — an alias is the anchored
node itself, so an alias bomb stays small — and then constructs Python values from the nodes.
Construction expands merge keys (``<<: *base``) by copying the merged mapping's pairs into every
mapping that merges it, so a text of 130 KB that merges one 6,000-key mapping 6,000 times cost
a minute and gigabytes before the built document could be measured. :func:`measure` counts the
values the nodes expand to, aliases and merged mappings once per use, in time linear in the
distinct nodes (each is measured once), and refuses with :class:`Refused` what the loader's
limits refuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAP_TAG = "tag:yaml.org,2002:map"

RECURSIVE = "refers to itself (a recursive YAML alias)"


def too_deep(max_depth: int) -> str:
    """Why a document nested deeper than ``max_depth`` is refused."""
    return f"is nested more than {max_depth} levels deep; limit: flow.loader.MAX_DEPTH"


def too_many(max_values: int, chars_per_value: int) -> str:
    """Why a document expanding to more than ``max_values`` values is refused."""
    return (
        f"expands to more than {max_values} values (YAML aliases and merge keys count once per "
        f"use, text one value per {chars_per_value} characters); limit: flow.loader.MAX_VALUES"
    )


class Refused(Exception):
    """The document is too large, too deep or contains itself; the message says which."""


@dataclass(frozen=True)
class Bounds:
    """The loader's limits, read at each load (they are module attributes one may change)."""

    max_values: int
    max_depth: int
    chars_per_value: int


def measure(root: yaml.Node, bounds: Bounds) -> None:
    """Refuse ``root`` if it expands to more than ``bounds.max_values`` values, nests deeper
    than ``bounds.max_depth`` (a merged mapping counts as nested under its ``<<`` key) or
    contains itself; raises :class:`Refused`."""
    _Measure(bounds).size(root, 1)


def document_id(root: yaml.Node) -> yaml.ScalarNode | None:
    """The scalar node of the document's ``id`` (text, a number, a boolean — the loader makes
    any of them the graph id), to name the graph in an error raised before the document is
    built; ``None`` when there is none or it is a collection."""
    found = None
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if _is_text(key) and key.value == "id" and isinstance(value, yaml.ScalarNode):
                found = value
    return found


def keys_merged_by_python(root: yaml.Node, loader: Any) -> tuple[yaml.Node, yaml.Node] | None:
    """The first two keys of one mapping (at any depth, merged-in keys of ``<<`` included)
    that are different YAML values but one Python key — ``1`` and ``true``, ``1`` and ``1.0``,
    ``0`` and ``false``: building the mapping as a dict would silently keep only one pair,
    where the loader reads keys as text (``"1"``, ``"True"``, ``"1.0"``) and calls two keys
    that read alike an error. Keys of the same type and value (``1`` twice: the reference's
    last one wins; a merged key overridden) are left to the loader's own rules, and so are
    keys that do not construct (a bad tag), collections used as keys (unhashable) and sets
    (``!!set``). ``None`` when there is no such pair."""
    seen: set[int] = set()
    pending: list[yaml.Node] = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, yaml.ScalarNode) or id(node) in seen:
            continue
        seen.add(id(node))
        if not isinstance(node, yaml.MappingNode):
            pending.extend(node.value)  # a sequence's items
            continue
        if node.tag == _MAP_TAG:
            found = _merged_pair(_keys_of(node), loader)
            if found is not None:
                return found
        pending.extend(value for _key, value in node.value)  # never into a key: unhashable
    return None


def _keys_of(mapping: yaml.MappingNode) -> list[yaml.Node]:
    """The mapping's own keys and, through its ``<<`` pairs, every key merged into it."""
    keys: list[yaml.Node] = []
    visited: set[int] = set()
    todo: list[yaml.Node] = [mapping]
    while todo:
        node = todo.pop()
        if not isinstance(node, yaml.MappingNode) or id(node) in visited:
            continue  # a merge of a non-mapping is the building's error to report
        visited.add(id(node))
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag == _MERGE_TAG:
                todo.extend(value.value if isinstance(value, yaml.SequenceNode) else [value])
            else:
                keys.append(key)
    return keys


def _merged_pair(keys: list[yaml.Node], loader: Any) -> tuple[yaml.Node, yaml.Node] | None:
    by_value: dict[Any, tuple[yaml.Node, Any]] = {}
    for key in keys:
        if not isinstance(key, yaml.ScalarNode) or key.tag == _STR_TAG:
            continue  # text collides only with the same text; a collection key is unhashable
        try:
            value = loader.construct_object(key)
            earlier = by_value.get(value)
        except Exception:  # a key that does not construct (or hash): the building reports it
            # PyYAML leaves a node whose construction failed marked as being constructed.
            loader.recursive_objects.pop(key, None)
            continue
        if earlier is None:
            by_value[value] = (key, value)
        elif earlier[0] is not key and _read_apart(earlier[1], value):
            return earlier[0], key
    return None


def _read_apart(first: Any, second: Any) -> bool:
    """Whether two equal keys read as different text: ``1``/``True``/``1.0`` are of different
    types; ``0.0`` and ``-0.0`` are both floats."""
    if type(first) is not type(second):
        return True
    return isinstance(first, float) and repr(first) != repr(second)


def _is_text(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _STR_TAG


class _Measure:
    """Expanded size and height of each collection node, remembered by identity (aliases)."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.known: dict[int, tuple[int, int]] = {}  # id -> (expanded values, height)
        self.open: set[int] = set()

    def size(self, node: yaml.Node, depth: int) -> tuple[int, int]:
        if isinstance(node, yaml.ScalarNode):
            return 1 + len(node.value) // self.bounds.chars_per_value, 0
        key = id(node)
        found = self.known.get(key)
        if found is None:
            found = self.known[key] = self._measure(node, key, depth)
        if depth + found[1] > self.bounds.max_depth:
            raise Refused(too_deep(self.bounds.max_depth))
        return found

    def _measure(self, node: yaml.Node, key: int, depth: int) -> tuple[int, int]:
        if depth > self.bounds.max_depth:
            raise Refused(too_deep(self.bounds.max_depth))
        if key in self.open:
            raise Refused(RECURSIVE)
        self.open.add(key)
        total, height = 1, 0
        for child in _children(node):
            count, below = self.size(child, depth + 1)
            total += count
            height = max(height, below + 1)
            if total > self.bounds.max_values:
                raise Refused(too_many(self.bounds.max_values, self.bounds.chars_per_value))
        self.open.discard(key)
        return total, height


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    """A sequence's items; a mapping's keys and values. A merge pair (``<<: *base`` or
    ``<<: [*a, *b]``) is counted as written: construction copies the merged pairs in, at most
    the merged value's size, so the count bounds the built mapping, and a list of merged
    mappings used by alias is measured once."""
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
        return
    for key, value in node.value:
        yield key
        yield value
