"""The sandbox's size, depth and work limits, and the meter that enforces the work limit.

Expressions have no loops, so an evaluation runs each syntax node at most once; what can still
cost memory or time is a single operation on a large value (``"x" * n``, ``s.replace``, ``str()``
of a list that shares its items, a product of huge integers) or many such operations in a row.
Every operation that can build something large *weighs its inputs first* and refuses before
allocating; every operation whose cost grows with its inputs *charges* that cost to a per-
evaluation work meter. Violations raise one of :mod:`simpleeval`'s
:class:`~simpleeval.InvalidExpression` errors, which the compiled callables turn into
:class:`~flow.errors.ExpressionError`.

The limits are process-wide (like the rest of the sandbox policy); change them with
:func:`flow.evaluation.set_expression_limits`.
"""

from __future__ import annotations

import threading
from array import array
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

import simpleeval as se

from flow._text import safe_repr


@dataclass(frozen=True, kw_only=True)
class ExpressionLimits:
    """Limits of the expression sandbox; every field has a default sized for approval flows.

    ``max_text`` bounds the characters of one condition or script, ``max_nesting`` the depth of
    its syntax tree, ``max_length`` the characters of a string and the items of a container an
    expression builds, ``max_depth`` how deeply such a container nests, ``max_bits`` the size of
    an integer result and ``max_work`` the work units (roughly: items touched) one evaluation may
    spend in operations whose cost grows with their inputs. ``max_operation_work`` bounds the
    units all evaluations of one workflow operation (claim, submit...: its walks together)
    spend: a walk round a cycle evaluates its conditions again at every lap, and the step
    budget counts nodes, not work.
    """

    max_text: int = 10_000
    max_nesting: int = 64
    max_length: int = 100_000
    max_depth: int = 64
    max_bits: int = 100_000
    max_work: int = 1_000_000
    max_operation_work: int = 10_000_000

    def __post_init__(self) -> None:
        for name in (
            "max_text",
            "max_nesting",
            "max_length",
            "max_depth",
            "max_bits",
            "max_work",
            "max_operation_work",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"ExpressionLimits.{name} must be a positive int, not {safe_repr(value)}"
                )


DEFAULT_LIMITS = ExpressionLimits()
LIMITS = DEFAULT_LIMITS
"""The limits in force; read the fields through this module so a change is seen everywhere."""


def set_limits(limits: ExpressionLimits) -> ExpressionLimits:
    """Install ``limits`` process-wide and return the previous ones."""
    global LIMITS
    if not isinstance(limits, ExpressionLimits):
        raise TypeError(f"expected ExpressionLimits, not {type(limits).__name__}")
    previous, LIMITS = LIMITS, limits
    return previous


class WorkLimitExceeded(se.InvalidExpression):  # type: ignore[misc]
    """One evaluation spent more than ``max_work`` units."""


class NestedTooDeeply(se.InvalidExpression):  # type: ignore[misc]
    """A value built by an expression nests deeper than ``max_depth`` (or contains itself)."""


def too_long() -> se.IterableTooLong:
    return se.IterableTooLong(
        f"Sorry, I will not build a value longer than {LIMITS.max_length} items or characters"
    )


def too_many_bits() -> se.NumberTooHigh:
    return se.NumberTooHigh(f"Sorry, I will not build an integer over {LIMITS.max_bits} bits")


# -- the work meter ------------------------------------------------------------------------


class _Meter(threading.local):
    """Work units left in the evaluation running on this thread, and in the workflow
    operation it is part of (``operation_left`` ``None``: no operation budget, as in a plain
    ``FlowEngine.eval``)."""

    left: int = 0
    operation_left: int | None = None
    #: Whether the running evaluation started with less than ``max_work`` (the operation's rest).
    short: bool = False


METER = _Meter()


def charge(units: int) -> None:
    """Spend ``units`` of the running evaluation's work budget; raise when it is exhausted."""
    left = METER.left - units
    if left < 0:
        if METER.short:
            raise WorkLimitExceeded(
                "Sorry, the expressions of this operation did more than "
                f"{LIMITS.max_operation_work} units of work together (max_operation_work)"
            )
        raise WorkLimitExceeded(
            f"Sorry, this expression does more than {LIMITS.max_work} units of work"
        )
    METER.left = left


class _Saved(NamedTuple):
    """What an evaluation found on the meter when it started (restored when it ends)."""

    start: int
    left: int
    short: bool


def start_meter() -> _Saved:
    """Give the evaluation starting on this thread a full budget — or, inside a workflow
    operation, what the operation has left if that is less — and return what it replaced
    (for :func:`settle_meter`).

    An evaluation that application code, called from an expression, starts inside another
    one has its own budget; when it ends, the outer one goes on with what it had left, and
    the operation is charged each unit once.
    """
    saved_left, saved_short = METER.left, METER.short
    start = LIMITS.max_work
    operation_left = METER.operation_left
    METER.short = operation_left is not None and operation_left < start
    if METER.short:
        start = max(operation_left or 0, 0)
    METER.left = start
    return _Saved(start, saved_left, saved_short)


def settle_meter(saved: _Saved) -> None:
    """Charge what the evaluation begun by :func:`start_meter` spent to its operation, and
    give the meter back to the evaluation it interrupted (if any)."""
    operation_left = METER.operation_left
    if operation_left is not None:
        METER.operation_left = operation_left - (saved.start - max(METER.left, 0))
    METER.left, METER.short = saved.left, saved.short


class OperationBudget:
    """The expressions evaluated inside share ``max_operation_work`` units (one workflow
    operation); nested (task code running another operation), the outer budget holds and is
    charged what the inner one spends."""

    __slots__ = ("_owner",)

    def __enter__(self) -> None:
        self._owner = METER.operation_left is None
        if self._owner:
            METER.operation_left = LIMITS.max_operation_work

    def __exit__(self, *exc: object) -> None:
        if self._owner:
            METER.operation_left = None


# -- weighing values -----------------------------------------------------------------------

_SEQUENCES = (list, tuple, set, frozenset)
_VIEWS: tuple[type[Collection[Any]], ...] = (
    type({}.keys()),
    type({}.values()),
    type({}.items()),
)
_MAPPINGS = (dict, MappingProxyType)
CONTAINERS: tuple[type[Collection[Any]], ...] = (*_SEQUENCES, *_MAPPINGS, *_VIEWS)


_FLAT = frozenset({int, float, bool, complex, type(None)})
_PLAIN = frozenset({list, tuple, set, frozenset})
_STR = frozenset({str})
_INT = frozenset({int})


def weigh(
    value: Any,
    *,
    text: bool = False,
    compare: bool = False,
    within: Any = None,
    budget: int = 0,
) -> int:
    """Size of ``value``: items of every container plus characters of every string in it.

    Shared references count each time they occur (``[s] * n`` weighs ``n * len(s)``), which
    bounds what printing or storing the value produces; each distinct container is walked once.
    With ``text`` an integer counts its digits too (an estimate of the length of ``str(value)``);
    with ``compare`` a huge integer counts one unit per 512 bits (the cost of comparing it).
    Stops early once over ``budget`` (default ``max_length``; with ``compare`` the work left on
    the meter: that weight is a cost, which goes on growing past ``max_length``); raises
    :class:`NestedTooDeeply` past ``max_depth`` levels, or when ``within`` — a container about
    to receive ``value`` — is reached: a value may not contain itself. Recursion is bounded by
    ``max_depth``.
    """
    if isinstance(value, str | bytes):
        return len(value)
    if not isinstance(value, CONTAINERS):
        if compare and type(value) is int:
            return (value.bit_length() >> 9) + 1
        if text and type(value) not in _FLAT and type(value) is not range:
            return _Walk(budget or LIMITS.max_length, text, within).text_of(value, 1)
        return _scalar_weight(value, text)
    if type(value) in _PLAIN and value is not within:  # flat items: no walk to set up
        kinds = set(map(type, value))
        if kinds <= _FLAT and not (
            ((text or compare) and int in kinds) or (text and complex in kinds)
        ):
            return len(value)
    if not budget:  # a cost is weighed up to the work left: past max_length it goes on costing
        budget = max(METER.left, 0) + 1 if compare else LIMITS.max_length
    return _Walk(budget, text, within, compare).weigh(value, 1)


class _Walk:
    __slots__ = ("compare", "keep", "limit", "max_depth", "memo", "open", "text", "within")

    def __init__(self, limit: int, text: bool, within: Any, compare: bool = False) -> None:
        self.limit = limit
        self.max_depth = LIMITS.max_depth
        self.text = text
        self.compare = compare
        self.within = within
        self.memo: dict[int, int] = {}
        # The weighed containers, kept alive while their ids are in ``memo``: a dict's items
        # view makes a new tuple per item, and a freed tuple's id is reused by the next one.
        self.keep: list[Any] = []
        self.open: set[int] = set()

    def weigh(self, container: Any, depth: int) -> int:
        key = id(container)
        known = self.memo.get(key)
        if known is not None:
            return known
        if container is self.within or key in self.open or depth > self.max_depth:
            raise NestedTooDeeply(
                f"Sorry, a value may nest at most {self.max_depth} levels and may not contain "
                "itself"
            )
        self.open.add(key)
        total = len(container)
        for part in _parts(container):
            if total > self.limit:
                break
            total += self._items(part, depth)
        self.open.discard(key)
        self.memo[key] = total
        self.keep.append(container)
        return total

    def _items(self, items: Any, depth: int) -> int:
        kinds = set(map(type, items))
        if kinds <= _FLAT and not (
            ((self.text or self.compare) and int in kinds) or (self.text and complex in kinds)
        ):
            return 0
        if kinds == _STR:
            return sum(map(len, items))
        if self.compare and kinds == _INT:  # one unit per 512 bits of the whole list
            return sum(map(int.bit_length, items)) >> 9
        total = 0
        for item in items:
            if isinstance(item, str | bytes):
                total += len(item)
            elif isinstance(item, CONTAINERS):
                total += self.weigh(item, depth + 1)
                if total > self.limit:
                    break
            elif self.compare and type(item) is int:
                total += item.bit_length() >> 9
            elif self.text:
                total += self.text_of(item, depth)
                if total > self.limit:
                    break
            elif type(item) is range:
                total += range_length(item)
        return total

    def text_of(self, value: Any, depth: int) -> int:
        """Length of the text of a value that is neither a string nor a container (once per
        object: ``[o] * n`` prints ``o`` n times): an int's digits; a complex number's two
        floats; a data object's attributes, as ``repr`` prints them; a context's keys;
        anything else (``Decimal``, dates, the library's nodes and graphs) its ``repr()``."""
        kind = type(value)
        if kind in _FLAT:
            return 52 if kind is complex else _scalar_weight(value, True)
        if kind is range:
            return range_length(value)
        key = id(value)
        known = self.memo.get(key)
        if known is not None:
            return known
        if key in self.open or depth > self.max_depth:
            raise NestedTooDeeply(
                f"Sorry, a value may nest at most {self.max_depth} levels and may not contain "
                "itself"
            )
        if kind.__name__ == "FlowContext" and kind.__module__ == "flow.context":
            keys = value.data.keys()
            self.keep.append(keys)  # weighed by id: kept alive with the rest
            size = 64 + len(str(value.instance_id)) + self.weigh(keys, depth + 1) + 4 * len(keys)
        elif hasattr(value, "__dict__") and type(vars(value)) is dict:
            size = 64 + len(kind.__qualname__) + self.weigh(vars(value), depth + 1)
        elif isinstance(value, deque):  # from the data, or repeated by '*': prints every item
            size = 16 + len(value)
            if size <= self.limit:
                self.keep.append(value)
                self.open.add(key)
                size += self._items(value, depth + 1)
                self.open.discard(key)
        elif isinstance(value, bytearray | array):  # \xNN per byte, or an item's digits
            size = 32 + len(value) * (4 if isinstance(value, bytearray) else 24)
        else:
            size = len(repr(value))
        self.memo[key] = size
        self.keep.append(value)
        return size


def _parts(container: Any) -> tuple[Any, ...]:
    if isinstance(container, _MAPPINGS):
        return (container.keys(), container.values())
    return (container,)


def _scalar_weight(value: Any, text: bool) -> int:
    if text and isinstance(value, int):
        return value.bit_length() // 3 + 1
    if isinstance(value, range):  # iterating a range from the data walks every number
        return range_length(value)
    return 1


def sized_length(value: Any) -> int:
    """Items of a value of a type the sandbox does not list (``bytearray``, ``array``,
    ``deque``, ``UserList``, ``UserString``...): its ``len()``, 0 when it has none."""
    if not hasattr(type(value), "__len__"):
        return 0
    try:
        return len(value)
    except OverflowError:
        return OVER_ANY_BUDGET


OVER_ANY_BUDGET = 1 << 62
"""The weight of something too long to count (a range longer than ``sys.maxsize``)."""


def range_length(value: range) -> int:
    """Numbers a walk over ``value`` visits (``len()`` raises past ``sys.maxsize``)."""
    try:
        return len(value)
    except OverflowError:
        return OVER_ANY_BUDGET


def hash_cost(value: Any) -> int:
    """Work of hashing every item of ``value`` (a set's, frozenset's or dict's items keep
    their hashes: one unit each). A tuple does not keep its hash and hashes every item again,
    and an integer hashes in time of its size: both count as they do to compare them."""
    if isinstance(value, _HASH_TABLES):
        return len(value)
    return weigh(value, compare=True)


def charge_key(key: Any) -> None:
    """Charge looking ``key`` up in a set or dict: a tuple hashes every item again (an int, a
    string or a frozenset hashes once, or keeps its hash)."""
    if type(key) is tuple:
        charge(weigh(key, compare=True))


def charge_keys(keys: list[Any]) -> None:
    """Charge hashing ``keys`` (the keys of a set or dict display) when one of them is a
    tuple, which may repeat huge integers: the display's other items are each written in the
    text (an integer the expression builds has at most ``max_bits``)."""
    if tuple in map(type, keys):
        charge(weigh(keys, compare=True))


_HASH_TABLES = (set, frozenset, dict)


def charge_collisions(*values: Any) -> None:
    """Charge the comparisons a set or dict makes between distinct items of ``values`` (each a
    container the operation hashes: a mapping's keys, any other container's items) that share
    one hash: each such item is compared with every one before it. Integers, floats and
    tuples hash the same in every process (``k * (2**61 - 1)`` all hash to 0), so a list of
    such numbers in the data — a web form's JSON — made ``{0}.union(xs)`` quadratic: 20,000 of
    them took seconds for a charge of 20,000 units. Call after charging the values' size
    (:func:`hash_cost`), which bounds the walk here."""
    for value in values:
        if isinstance(value, CONTAINERS):
            charge(_collisions(value.keys() if isinstance(value, _MAPPINGS) else value))


def _collisions(items: Collection[Any]) -> int:
    """Comparisons a hash table makes inserting ``items`` beyond one per item: 0 unless two
    distinct items share a hash (an item equal to one before it is found at its first
    comparison). Stops counting past the work left on the meter."""
    try:
        hashes = list(map(hash, items))
        if len(set(hashes)) == len(hashes):
            return 0  # no hash repeats: no comparisons beyond the lookup's own
        budget = max(METER.left, 0)
        distinct: dict[int, list[Any]] = {}
        compared = 0
        for key, item in zip(hashes, items, strict=True):
            seen = distinct.setdefault(key, [])
            for other in seen:
                if other is item or other == item:
                    break
                compared += 1
            else:
                seen.append(item)
            if compared > budget:
                break
        return compared
    except Exception:  # unhashable or failing to compare: the operation itself says so
        return 0


def check_length(size: int) -> None:
    """Refuse a result of ``size`` items or characters before it is built; charge its cost."""
    if size > LIMITS.max_length:
        raise too_long()
    charge(size)


def check_built(value: Any) -> Any:
    """Weigh a container an expression has just built from its items, and charge it."""
    if isinstance(value, CONTAINERS):
        size = weigh(value)
        if size > LIMITS.max_length:
            raise too_long()
        charge(size)
    return value


def check_bits(bits: int) -> None:
    if bits > LIMITS.max_bits:
        raise too_many_bits()


def charge_ints(left: int, right: int) -> None:
    """Charge an operation on two integers by the product of their sizes (quadratic at worst)."""
    bits = left.bit_length() * right.bit_length()
    if bits > 1 << 14:
        charge(bits >> 14)
