"""Deep read-only copies of graph meta, made once when a graph is built.

A graph is shared by every instance and thread of the process, so nothing reachable from it may
change: scripts read ``node.meta`` and ``node.graph.meta`` and user code gets the same objects.
:func:`freeze` copies a meta value all the way down — mappings become
:class:`types.MappingProxyType` over a private dict, lists :class:`FrozenList`, sets
``frozenset`` — so reads cost what they cost on plain dicts and lists and nothing is checked per
access. :func:`thaw` turns such a value back into plain, editable dicts and lists (for
``GraphSpec.from_graph`` and export).

The copy is bounded: a value nested deeper than ``flow.loader.MAX_DEPTH`` or expanding (shared
references count once per use, as YAML aliases do) to more than ``flow.loader.MAX_VALUES``
values raises :class:`~flow.errors.GraphDefinitionError` before it is allocated.

The copy is also what export writes, so it holds only what graph text can say again: keys are
text at every depth (a non-text key becomes ``str(key)``, as the loader reads the top level's
keys; two keys of one mapping that become the same text are an error, never one silently
dropped), and NaN/±infinity, text with lone surrogates and integers too long for Python to
write are refused — each with a :class:`~flow.errors.GraphDefinitionError` naming the graph,
the node or link and the path in its meta. A graph that is built therefore exports, and its
export loads back as the same graph.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NoReturn, SupportsIndex

from flow import loader
from flow._text import is_unicode
from flow.codec import int_text_limit, too_long_for_text
from flow.errors import GraphDefinitionError, ReadOnlyGraphError

EMPTY: Mapping[str, Any] = MappingProxyType({})


class FrozenList(list[Any]):
    """A list that refuses every change (:class:`ReadOnlyGraphError`, a ``TypeError``).

    A ``list`` subclass rather than a tuple so that meta values keep comparing equal to lists,
    printing like lists and passing ``isinstance(x, list)`` checks; reads are the list's own.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ReadOnlyGraphError("A list in graph meta")

    append = extend = insert = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = _refuse

    def pop(self, index: SupportsIndex = -1) -> NoReturn:
        self._refuse()

    def __iadd__(self, other: Iterable[Any]) -> NoReturn:  # type: ignore[misc]
        self._refuse()

    def __imul__(self, count: SupportsIndex) -> NoReturn:
        self._refuse()

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


class _Budget:
    """Values still allowed in the graph being built (shared by all its meta)."""

    __slots__ = ("graph_id", "left")

    def __init__(self, graph_id: str | None) -> None:
        self.graph_id = graph_id
        self.left = loader.MAX_VALUES

    def spend(self, where: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise GraphDefinitionError(
                f"The meta of graph {self.graph_id!r} ({where}) holds more than "
                f"{loader.MAX_VALUES} values (shared references count once per use); "
                "limit: flow.loader.MAX_VALUES",
                graph_id=self.graph_id,
            )


def budget(graph_id: str | None) -> _Budget:
    """A fresh value budget for one graph."""
    return _Budget(graph_id)


def freeze_meta(meta: Mapping[str, Any] | None, spent: _Budget, where: str) -> Mapping[str, Any]:
    """A deep read-only copy of one ``meta`` mapping (the shared empty proxy when empty)."""
    if meta is None:
        return EMPTY
    if not isinstance(meta, Mapping):
        raise GraphDefinitionError(
            f"The meta of {where} in graph {spent.graph_id!r} must be a mapping, not "
            f"{type(meta).__name__}",
            graph_id=spent.graph_id,
        )
    if not meta:
        return EMPTY
    try:
        frozen: Mapping[str, Any] = _freeze(meta, spent, where, 1)
    except _Unwritable as bad:
        raise GraphDefinitionError(
            f"The meta of {where} in graph {spent.graph_id!r} {bad.why} (at {_path(bad.path)})",
            graph_id=spent.graph_id,
        ) from None
    return frozen


class _Unwritable(Exception):
    """A meta value graph text cannot hold; ``path`` is filled in on the way out (so a meta
    that is fine pays nothing for paths)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
        self.path: list[str | int] = []


def _path(parts: list[str | int]) -> str:
    """``meta.a[2]['b c']``: where a value sits in a meta mapping."""
    out = "meta"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.removeprefix("$").isidentifier():
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


def _freeze(value: Any, spent: _Budget, where: str, depth: int) -> Any:
    spent.spend(where)
    if isinstance(value, str | int | float | bytes | None):
        return _scalar(value)
    if depth > loader.MAX_DEPTH:
        raise GraphDefinitionError(
            f"The meta of {where} in graph {spent.graph_id!r} is nested more than "
            f"{loader.MAX_DEPTH} levels deep (or refers to itself); limit: flow.loader.MAX_DEPTH",
            graph_id=spent.graph_id,
        )
    if isinstance(value, Mapping):
        return MappingProxyType(_freeze_mapping(value, spent, where, depth))
    if isinstance(value, list | tuple):
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_freeze(item, spent, where, depth + 1))
            except _Unwritable as bad:
                bad.path.insert(0, index)
                raise
        return FrozenList(items)
    if isinstance(value, set | frozenset):
        return frozenset(_scalar(item) for item in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value  # a date, a number type, a user object: stored as given


def _freeze_mapping(
    value: Mapping[Any, Any], spent: _Budget, where: str, depth: int
) -> dict[str, Any]:
    """Keys as text (``str(key)``, like the loader's top level), each once."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        text = _scalar(key) if isinstance(key, str) else _key_text(key)
        if text in out:
            first = next(k for k in value if (k if isinstance(k, str) else str(k)) == text)
            raise _Unwritable(
                f"has the keys {first!r} and {key!r}, which are both {text!r} as text (meta "
                "keys are text)"
            )
        try:
            out[text] = _freeze(item, spent, where, depth + 1)
        except _Unwritable as bad:
            bad.path.insert(0, text)
            raise
    return out


def _key_text(key: object) -> str:
    if isinstance(key, int) and too_long_for_text(key):
        raise _Unwritable("has an integer key too long to write as text")
    text = str(key)
    _scalar(text)
    return text


def _scalar(value: Any) -> Any:
    """``value`` itself, unless graph text cannot hold it (raises :class:`_Unwritable`)."""
    if isinstance(value, str):
        if not is_unicode(value):
            raise _Unwritable(
                f"holds text that is not valid Unicode (lone surrogate): {value[:60]!r}"
            )
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _Unwritable(f"holds {value!r}, which JSON cannot write (no NaN or infinity)")
    elif isinstance(value, int) and too_long_for_text(value):
        raise _Unwritable(
            f"holds an integer of more than {int_text_limit()} decimal digits "
            "(Python's limit for turning integers into text)"
        )
    return value


def thaw(value: Any) -> Any:
    """Plain, editable dicts and lists for a frozen value (``set`` for a ``frozenset``)."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    if isinstance(value, frozenset):
        return set(value)
    return value


def refuse_setattr(obj: object, name: str, value: object) -> NoReturn:
    """``__setattr__`` of the graph model once built."""
    raise ReadOnlyGraphError(f"{type(obj).__name__}.{name}", graph_id=_graph_id(obj))


def refuse_delattr(obj: object, name: str) -> NoReturn:
    """``__delattr__`` of the graph model once built."""
    raise ReadOnlyGraphError(f"{type(obj).__name__}.{name}", graph_id=_graph_id(obj))


def _graph_id(obj: object) -> str | None:
    graph = getattr(obj, "graph", None) or getattr(obj, "_graph", None) or obj
    graph_id = getattr(graph, "id", None)
    return graph_id if isinstance(graph_id, str) else None
