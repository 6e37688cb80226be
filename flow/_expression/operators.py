"""What each operator of the expression language does, keyed by its :mod:`ast` node type.

Ordering comparisons and ``in`` are null-safe as in the reference (``None < 1`` is false, not a
``TypeError``); ``!`` arrives as ``~`` (see :mod:`~flow._expression.translate`) and so ``Invert``
is logical not. Arithmetic weighs its operands before it computes (:mod:`.limits`): a repeated
or concatenated sequence longer than ``max_length``, an integer over ``max_bits`` bits (``*``,
``**``, ``<<``) and ``%`` string formatting are refused, and the operations whose cost grows
with their operands charge the work meter.
"""

from __future__ import annotations

import ast
import math
import numbers
import operator as op
from collections.abc import Callable
from typing import Any

import simpleeval as se

from flow._expression.limits import (
    CONTAINERS,
    charge,
    charge_collisions,
    charge_ints,
    check_bits,
    check_length,
    range_length,
    sized_length,
    weigh,
)
from flow._expression.sizes import SET_LIKE, after_call, iterated_cost, search_cost

_SCALARS = frozenset({int, float, bool, complex, type(None)})
_REPEATABLE = (str, bytes, list, tuple)
_BYTES_LIKE = (str, bytes, bytearray)
_RANGE_LOOKUP = frozenset({int, bool})


def _null_safe(compare: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def run(left: Any, right: Any) -> Any:
        if left is None or right is None:
            return False
        return compare(left, right)

    return run


def _contains(item: Any, container: Any) -> bool:
    return False if container is None else item in container


def _not_contains(item: Any, container: Any) -> bool:
    return True if container is None else item not in container


def equals(left: Any, right: Any) -> Any:
    """Java's ``left.equals(right)`` read null-safely: ``None`` when ``left`` is ``None``."""
    if left is None:
        return None
    _charge_compare(left, right)
    return left == right


def _contains_charged(item: Any, container: Any) -> bool:
    if isinstance(container, _BYTES_LIKE) and isinstance(item, _BYTES_LIKE):
        charge(search_cost(container, len(item)))
    elif type(container) is range:
        # An int (or bool) is looked up arithmetically; anything else walks every number.
        charge(_compare_cost(item) if type(item) in _RANGE_LOOKUP else range_length(container))
    else:
        _charge_compare(item, container)
    return False if container is None else item in container


def _not_contains_charged(item: Any, container: Any) -> bool:
    return True if container is None else not _contains_charged(item, container)


def _compare_cost(value: Any) -> int:
    if isinstance(value, _BYTES_LIKE):
        return (len(value) >> 4) + 1
    if isinstance(value, CONTAINERS):
        return weigh(value, compare=True)  # a huge integer in it costs its size
    if isinstance(value, int):
        return (value.bit_length() >> 9) + 1
    if type(value) is range:
        return 1  # compared by start, stop and step
    return sized_length(value) + 1  # a deque, array, UserList... from the data: its items


def _charge_compare(left: Any, right: Any) -> None:
    if type(left) not in _SCALARS or type(right) not in _SCALARS:
        charge(_compare_cost(left) + _compare_cost(right))


def charged(kind: type[ast.cmpop]) -> Callable[[Any, Any], Any]:
    """The comparison ``kind`` charging the meter by the size of its operands (for operands
    that are not constants: comparing two large containers walks both, and ``in`` on strings
    searches)."""
    if kind is ast.In:
        return _contains_charged
    if kind is ast.NotIn:
        return _not_contains_charged
    compare = COMPARE[kind]

    def run(left: Any, right: Any) -> Any:
        _charge_compare(left, right)
        return compare(left, right)

    return run


COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: op.eq,
    ast.NotEq: op.ne,
    ast.Lt: _null_safe(op.lt),
    ast.LtE: _null_safe(op.le),
    ast.Gt: _null_safe(op.gt),
    ast.GtE: _null_safe(op.ge),
    ast.In: _contains,
    ast.NotIn: _not_contains,
    ast.Is: op.is_,
    ast.IsNot: op.is_not,
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int)


def safe_mult(left: Any, right: Any) -> Any:
    """``left * right`` unless the product or the repeated sequence would be too large."""
    if _is_int(left) and _is_int(right):
        check_bits(left.bit_length() + right.bit_length())
        charge_ints(left, right)
        return left * right
    for count, items in ((left, right), (right, left)):
        if _is_int(count) and type(items) not in _SCALARS:
            if count <= 0:
                break  # repeated no times, a sequence is empty: nothing to weigh
            if isinstance(items, _REPEATABLE):
                check_length(count * weigh(items))
            else:  # a sequence of a type not listed (bytearray, deque...): by its length
                check_length(count * sized_length(items))
            break
    return left * right


def safe_add(left: Any, right: Any) -> Any:
    """``left + right`` unless two sequences would concatenate into too many items."""
    if type(left) in _SCALARS:
        return left + right
    if isinstance(left, _REPEATABLE) and isinstance(right, _REPEATABLE):
        check_length(weigh(left) + weigh(right))
    else:  # sequences of types not listed (bytearray, array, deque...): by their lengths
        check_length(sized_length(left) + sized_length(right))
    return left + right


def safe_power(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` unless the integer result would have too many bits."""
    if _is_int(base) and _is_int(exponent) and exponent > 0 and abs(base) > 1:
        bits = int(exponent * math.log2(abs(base))) + 1
        check_bits(bits)
        charge((bits * bits) >> 14)
        return base**exponent
    return se.safe_power(base, exponent)


def safe_lshift(left: Any, right: Any) -> Any:
    """``left << right`` unless the integer result would have too many bits."""
    if _is_int(left) and _is_int(right) and right > 0 and left:
        check_bits(left.bit_length() + right)
        charge(right >> 6)
    return left << right


def safe_mod(left: Any, right: Any) -> Any:
    """``left % right`` of numbers; ``%`` string formatting is refused (it can reach
    attributes and pads to any width), on every type: ``bytearray`` and ``UserString`` format
    too, so a left operand that is not a number is refused."""
    if _is_int(left):
        if _is_int(right):
            charge_ints(left, right)
        return left % right
    if not isinstance(left, numbers.Number):
        raise se.FeatureNotAvailable("String formatting with '%' is not allowed")
    return left % right


def safe_floordiv(left: Any, right: Any) -> Any:
    """``left // right``, charging the meter for huge integers (long division is quadratic)."""
    if _is_int(left) and _is_int(right):
        charge_ints(left, right)
    return left // right


def _set_operator(function: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``function`` (``- | & ^``) charging the meter by the sizes of set, dict and dict-view
    operands (it walks both, copies one) and refusing a result longer than ``max_length``;
    numbers go straight through."""

    def run(left: Any, right: Any) -> Any:
        if type(left) in _SCALARS or not (
            isinstance(left, SET_LIKE) or isinstance(right, SET_LIKE)
        ):
            return function(left, right)
        charge(iterated_cost(left) + iterated_cost(right))
        charge_collisions(left, right)
        result = function(left, right)
        after_call(result)
        return result

    return run


PLAIN_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Sub: op.sub,
    ast.BitOr: op.or_,
    ast.BitXor: op.xor,
    ast.BitAnd: op.and_,
}
"""The operators that walk sets and dicts, for use when one operand is a number constant
(``a - 1``, ``flags & 4``): no set operation can follow."""

BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: safe_add,
    ast.Sub: _set_operator(op.sub),
    ast.Mult: safe_mult,
    ast.Div: op.truediv,
    ast.FloorDiv: safe_floordiv,
    ast.Mod: safe_mod,
    ast.Pow: safe_power,
    ast.LShift: safe_lshift,
    ast.RShift: op.rshift,
    ast.BitOr: _set_operator(op.or_),
    ast.BitXor: _set_operator(op.xor),
    ast.BitAnd: _set_operator(op.and_),
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: op.not_,
    ast.Invert: op.not_,
    ast.USub: op.neg,
    ast.UAdd: op.pos,
}
