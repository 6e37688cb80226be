"""Size checks of the allowed methods: weigh the arguments before the call, check the result.

A method whose *arguments* set the size of its result (``ljust(n)``, ``replace(old, new)``,
``join(items)``, ``expandtabs(n)``, ``translate(table)``, ``to_bytes(n)``, ``strftime(fmt)``) is
refused before it allocates anything; a method that adds to a container weighs what it adds
(and refuses a container that would contain itself); every call charges the work meter by the
size of what it walks. Results longer than ``max_length`` are refused afterwards — they can be
at most a few times the size of values that already exist.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping, Sequence
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import simpleeval as se

from flow._expression import limits
from flow._expression.limits import (
    CONTAINERS,
    charge,
    charge_collisions,
    charge_key,
    check_length,
    hash_cost,
    range_length,
    sized_length,
    too_long,
    weigh,
)

_TEXT = (str, bytes)
_SIZED: tuple[type[Collection[Any]], ...] = (*_TEXT, *CONTAINERS)
_PADDING = frozenset({"center", "ljust", "rjust", "zfill"})
_ADDING = frozenset(
    {
        "append",
        "extend",
        "insert",
        "update",
        "setdefault",
        "add",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)
_BUILTIN = (*_SIZED, int, float, Decimal, dt.date, dt.time, dt.timedelta)
_PYTHON_LEVEL = 16  # a library method (context.put_all) walks its arguments in Python
_NAIVE_SEARCH = 100  # CPython searches forward for longer needles in linear time
#: Methods that compare each character of the text with the whole argument: a reverse search
#: (CPython has no linear-time reverse search for long needles), or stripping a set of
#: characters (each character outside Latin-1 is looked for in the whole set).
_WHOLE_ARGUMENT_SEARCH = frozenset(
    {"strip", "lstrip", "rstrip", "rfind", "rindex", "rsplit", "rpartition"}
)
_RANGE_LOOKUP = frozenset({int, bool})  # range.count/index of these is arithmetic


def walk_length(value: Any) -> int:
    """Items a method walks when it takes ``value`` as an iterable: a string's or container's
    length, a range's numbers (a range from the data may be 10**12 long), else nothing."""
    if isinstance(value, _SIZED):
        return len(value)
    if type(value) is range:
        return range_length(value)
    return 0


def search_cost(text: str | bytes | bytearray, needle: int, *, linear_long: bool = True) -> int:
    """Work of a pass over ``text`` looking for a ``needle``-long string: worst case
    ``len(text) * needle`` character comparisons — for short needles only where the search
    of a long one is linear (``linear_long``) — charged at 4 per unit."""
    width = min(needle, _NAIVE_SEARCH) if linear_long else needle
    return ((len(text) * max(width, 1)) >> 2) + 1


def iterated_cost(value: Any) -> int:
    """Work of a set operation or method iterating ``value`` and hashing its items: a set's or
    dict's items (their hashes are kept), else the hashes of what it holds (a tuple hashes all
    its items again, a huge integer costs its size), a range's numbers, a string's characters,
    another sized value's length. An iterator (which may never end) is refused."""
    if isinstance(value, CONTAINERS):
        return hash_cost(value)
    if isinstance(value, _TEXT):
        return len(value)
    if type(value) is range:
        return range_length(value)
    if hasattr(type(value), "__len__"):
        return sized_length(value)
    if hasattr(type(value), "__iter__"):
        raise se.FeatureNotAvailable(
            "Sets and dicts are combined with sets, dicts, lists, tuples or strings, not iterators"
        )
    return 0


#: Sets, dicts and dict views: what hashes its keys (and combines with ``| & - ^``).
SET_LIKE: tuple[type, ...] = (
    set,
    frozenset,
    dict,
    MappingProxyType,
    type({}.keys()),
    type({}.items()),
)
_ITERATING = frozenset(
    {
        "extend",
        "update",
        "union",
        "intersection",
        "difference",
        "symmetric_difference",
        "isdisjoint",
        "issubset",
        "issuperset",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)


def _hashed_items(container: Any, name: str) -> Callable[[Any], Any]:
    """What a set or dict method hashes of an argument: its items — for ``dict.update`` from
    a list of pairs, the first of each pair."""

    def items(argument: Any) -> Any:
        if name == "update" and isinstance(container, dict) and isinstance(argument, _PAIRS):
            return [pair[0] for pair in argument if isinstance(pair, _PAIRS) and pair]
        return argument

    return items


_PAIRS = (list, tuple)


def before_call(obj: Any, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse a call whose result would be too large; charge the work it will do."""
    sized = sum(walk_length(a) for a in (*args, *kwargs.values()))
    if isinstance(obj, _TEXT):
        _text_method(obj, name, args, kwargs)
    elif isinstance(obj, CONTAINERS):
        _container_method(obj, name, args, kwargs)
    elif isinstance(obj, int) and name == "to_bytes":
        length = _argument(args, kwargs, 0, "length", 1)
        if isinstance(length, int):
            check_length(length)
    elif type(obj) is range and name in ("count", "index"):
        if args and type(args[0]) not in _RANGE_LOOKUP:
            charge(range_length(obj))  # anything but an int is compared with every number
    elif isinstance(obj, dt.date | dt.time) and name == "strftime":
        fmt = _argument(args, kwargs, 0, "format", "")
        if isinstance(fmt, str):
            check_length(len(fmt) * 16)
    charge(1 + sized * (1 if isinstance(obj, _BUILTIN) else _PYTHON_LEVEL))


def after_call(result: Any) -> None:
    """Refuse a string or container result longer than ``max_length``."""
    if isinstance(result, _SIZED) and len(result) > limits.LIMITS.max_length:
        raise too_long()


def _argument(
    args: Sequence[Any], kwargs: Mapping[str, Any], index: int, name: str, default: Any
) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _text_method(
    text: str | bytes, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    needle = max((len(a) for a in args if isinstance(a, _TEXT)), default=1)
    charge(search_cost(text, needle, linear_long=name not in _WHOLE_ARGUMENT_SEARCH))
    special = _TEXT_SIZES.get(name)
    if special is not None:
        special(text, args, kwargs)
    elif name in _PADDING:
        width = _argument(args, kwargs, 0, "width", 0)
        if isinstance(width, int):
            check_length(max(width, len(text)))


def _expandtabs(text: str | bytes, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    size = _argument(args, kwargs, 0, "tabsize", 8)
    if isinstance(size, int):
        tab = "\t" if isinstance(text, str) else b"\t"
        check_length(len(text) + text.count(tab) * max(size, 0))  # type: ignore[arg-type]


def _replace(text: str | bytes, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    if len(args) < 2 or not isinstance(args[0], _TEXT) or not isinstance(args[1], _TEXT):
        return
    old, new = args[0], args[1]
    found = len(text) + 1 if not old else text.count(old)  # type: ignore[arg-type]
    limit = args[2] if len(args) > 2 else kwargs.get("count", -1)
    if isinstance(limit, int) and limit >= 0:
        found = min(found, limit)
    check_length(len(text) + found * max(len(new) - len(old), 0))


def _join(text: str | bytes, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    items = _argument(args, kwargs, 0, "iterable", ())
    if isinstance(items, _TEXT):
        check_length(len(items) * (len(text) + 1))
        return
    if not isinstance(items, CONTAINERS):
        raise se.FeatureNotAvailable("join() takes a list, tuple, set or dict of strings")
    if len(items) > limits.LIMITS.max_length:
        raise too_long()
    charge(len(items))
    pieces = sum(len(item) if isinstance(item, _TEXT) else 0 for item in items)
    check_length(pieces + len(text) * max(len(items) - 1, 0))


def _translate(text: str | bytes, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    table = _argument(args, kwargs, 0, "table", None)
    if isinstance(text, bytes):
        return  # a bytes table maps byte to byte: the result is as long as the text
    if not isinstance(table, dict):
        raise se.FeatureNotAvailable("str.translate() takes a dict table")
    charge(len(table))
    widest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
    check_length(len(text) * max(widest, 1))


_TEXT_SIZES: dict[str, Callable[[Any, Sequence[Any], Mapping[str, Any]], None]] = {
    "expandtabs": _expandtabs,
    "replace": _replace,
    "join": _join,
    "translate": _translate,
}


def _container_method(
    container: Any, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    if name in _ITERATING:  # the items of the arguments are walked, and hashed by a set/dict
        charge(len(container) + sum(iterated_cost(a) for a in args))
        if isinstance(container, SET_LIKE):
            charge_collisions(container, *map(_hashed_items(container, name), args))
    elif isinstance(container, SET_LIKE):  # get, pop, add, remove...: the key is hashed
        for arg in (*args, *kwargs.values()):
            charge_key(arg)
    if name in _ADDING:
        added = sum(weigh((value,), within=container) for value in (*args, *kwargs.values()))
        check_length(weigh(container) + added)
    elif name == "sort":
        charge(weigh(container) * max(len(container).bit_length(), 1))
    elif name in ("count", "index", "remove"):
        # Each item is compared: a huge integer costs its size, as a long string does.
        charge(weigh(container, compare=True))
    elif name not in _ITERATING:
        charge(len(container) + sum(walk_length(a) for a in args))
