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
from collections.abc import Collection
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import simpleeval as se


@dataclass(frozen=True, kw_only=True)
class ExpressionLimits:
    """Limits of the expression sandbox; every field has a default sized for approval flows.

    ``max_text`` bounds the characters of one condition or script, ``max_nesting`` the depth of
    its syntax tree, ``max_length`` the characters of a string and the items of a container an
    expression builds, ``max_depth`` how deeply such a container nests, ``max_bits`` the size of
    an integer result and ``max_work`` the work units (roughly: items touched) one evaluation may
    spend in operations whose cost grows with their inputs. ``max_walk_work`` bounds the units
    all evaluations of one walk of a workflow operation spend together: a walk round a cycle
    evaluates its conditions again at every lap, and its step budget counts nodes, not work.
    """

    max_text: int = 10_000
    max_nesting: int = 64
    max_length: int = 100_000
    max_depth: int = 64
    max_bits: int = 100_000
    max_work: int = 1_000_000
    max_walk_work: int = 10_000_000

    def __post_init__(self) -> None:
        for name in (
            "max_text",
            "max_nesting",
            "max_length",
            "max_depth",
            "max_bits",
            "max_work",
            "max_walk_work",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ExpressionLimits.{name} must be a positive int, not {value!r}")


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
    """Work units left in the evaluation running on this thread, and in the walk it is part
    of (``walk_left`` ``None``: no walk budget, as outside a workflow operation)."""

    left: int = 0
    walk_left: int | None = None
    #: Whether the running evaluation started with less than ``max_work`` (the walk's rest).
    short: bool = False


METER = _Meter()


def charge(units: int) -> None:
    """Spend ``units`` of the running evaluation's work budget; raise when it is exhausted."""
    left = METER.left - units
    if left < 0:
        if METER.short:
            raise WorkLimitExceeded(
                f"Sorry, the expressions of this walk did more than {LIMITS.max_walk_work} "
                "units of work together (max_walk_work)"
            )
        raise WorkLimitExceeded(
            f"Sorry, this expression does more than {LIMITS.max_work} units of work"
        )
    METER.left = left


def start_meter() -> int:
    """Give the evaluation starting on this thread a full budget — or, inside a walk, what
    the walk has left if that is less — and return it (for :func:`settle_meter`).

    Not saved and restored: evaluations nest only when the application's own code, called from
    an expression, runs another one, and then the outer one goes on with what the inner left.
    """
    start = LIMITS.max_work
    walk_left = METER.walk_left
    METER.short = walk_left is not None and walk_left < start
    if METER.short:
        start = max(walk_left or 0, 0)
    METER.left = start
    return start


def settle_meter(start: int) -> None:
    """Charge what the evaluation that began with ``start`` units spent to its walk."""
    walk_left = METER.walk_left
    if walk_left is not None:
        METER.walk_left = walk_left - (start - max(METER.left, 0))


class WalkBudget:
    """The expressions evaluated inside share ``max_walk_work`` units (one workflow walk);
    nested, the outer budget holds."""

    __slots__ = ("_outer",)

    def __enter__(self) -> None:
        self._outer = METER.walk_left
        if self._outer is None:
            METER.walk_left = LIMITS.max_walk_work

    def __exit__(self, *exc: object) -> None:
        METER.walk_left = self._outer


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
_STR = frozenset({str})


def weigh(value: Any, *, text: bool = False, within: Any = None, budget: int = 0) -> int:
    """Size of ``value``: items of every container plus characters of every string in it.

    Shared references count each time they occur (``[s] * n`` weighs ``n * len(s)``), which
    bounds what printing or storing the value produces; each distinct container is walked once.
    With ``text`` an integer counts its digits too (an estimate of the length of ``str(value)``).
    Stops early once over ``budget`` (default ``max_length``); raises :class:`NestedTooDeeply`
    past ``max_depth`` levels, or when ``within`` — a container about to receive ``value`` — is
    reached: a value may not contain itself. Recursion is bounded by ``max_depth``.
    """
    if isinstance(value, str | bytes):
        return len(value)
    if not isinstance(value, CONTAINERS):
        return _scalar_weight(value, text)
    return _Walk(budget or LIMITS.max_length, text, within).weigh(value, 1)


class _Walk:
    __slots__ = ("limit", "max_depth", "memo", "open", "text", "within")

    def __init__(self, limit: int, text: bool, within: Any) -> None:
        self.limit = limit
        self.max_depth = LIMITS.max_depth
        self.text = text
        self.within = within
        self.memo: dict[int, int] = {}
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
        return total

    def _items(self, items: Any, depth: int) -> int:
        kinds = set(map(type, items))
        if kinds <= _FLAT and not (self.text and int in kinds):
            return 0
        if kinds == _STR:
            return sum(map(len, items))
        total = 0
        for item in items:
            if isinstance(item, str | bytes):
                total += len(item)
            elif isinstance(item, CONTAINERS):
                total += self.weigh(item, depth + 1)
                if total > self.limit:
                    break
            elif self.text or type(item) is range:
                total += _scalar_weight(item, self.text)
        return total


def _parts(container: Any) -> tuple[Any, ...]:
    if isinstance(container, _MAPPINGS):
        return (container.keys(), container.values())
    return (container,)


def _scalar_weight(value: Any, text: bool) -> int:
    if text and isinstance(value, int):
        return value.bit_length() // 3 + 1
    if isinstance(value, range):  # iterating a range from the data walks every number
        try:
            return len(value)
        except OverflowError:
            return LIMITS.max_length + 1
    return 1


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
