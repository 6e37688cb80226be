"""Runtime size and power limits, so that an expression cannot exhaust memory or CPU.

simpleeval's limits bound ``len`` of one result and the exponent of ``**``; these checks also
count items through shared references (``[[0] * n] * n``), bound integer products by bit length
and refuse the ``str`` methods whose arguments, not their receiver, set the result size. Each
raises one of :mod:`simpleeval`'s :class:`~simpleeval.InvalidExpression` errors, which the
compiled callables turn into :class:`~flow.errors.ExpressionError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import simpleeval as se

MAX_TEXT = se.MAX_STRING_LENGTH
"""The longest expression text, string literal or joined string accepted."""

_MAX_BITS = 100_000
_SIZED = (str, bytes, list, tuple, dict, set, frozenset)
_PADDING = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})


def _weight(value: Any, budget: int = se.MAX_STRING_LENGTH) -> int:
    """Items in ``value`` counted through nested containers, stopping once over ``budget``.

    simpleeval bounds ``len``; shared references (``[[0] * n] * n``) need the deep count.
    """
    if isinstance(value, str | bytes):
        return len(value)
    if not isinstance(value, list | tuple | set | frozenset | dict):
        return 1
    total = len(value)
    for item in value.values() if isinstance(value, dict) else value:
        if total > budget:
            break
        if isinstance(item, list | tuple | set | frozenset | dict):
            total += _weight(item, budget - total)
    return total


def _too_long() -> se.IterableTooLong:
    return se.IterableTooLong("Sorry, I will not evaluate something that long.")


def safe_mult(left: Any, right: Any) -> Any:
    """``left * right`` unless the product or the repeated sequence would be too large."""
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > _MAX_BITS:
            raise se.NumberTooHigh(f"Sorry! I don't want to evaluate a {_MAX_BITS}-bit product")
        return left * right
    for count, items in ((left, right), (right, left)):
        is_repeat = isinstance(count, int) and hasattr(items, "__len__")
        if is_repeat and count * _weight(items) > se.MAX_STRING_LENGTH:
            raise _too_long()
    return left * right


def safe_add(left: Any, right: Any) -> Any:
    """``left + right`` unless two sized values would concatenate into too many items."""
    sized = hasattr(left, "__len__") and hasattr(right, "__len__")
    if sized and _weight(left) + _weight(right) > se.MAX_STRING_LENGTH:
        raise _too_long()
    return left + right


def safe_power(base: Any, exponent: Any) -> Any:
    """``base ** exponent`` unless the integer result would have too many bits."""
    integers = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if integers and exponent * max(abs(base).bit_length() - 1, 0) > _MAX_BITS:
        raise se.NumberTooHigh(f"Sorry! I don't want to evaluate {base} ** {exponent}")
    return se.safe_power(base, exponent)


def safe_mod(left: Any, right: Any) -> Any:
    """``left % right``; ``%`` string formatting is refused (it can reach attributes)."""
    if isinstance(left, str | bytes):
        raise se.FeatureNotAvailable("String formatting with '%' is not allowed")
    return left % right


def check_size(value: Any) -> None:
    """Raise when a container or string is longer than simpleeval's limit."""
    if isinstance(value, _SIZED) and len(value) > se.MAX_STRING_LENGTH:
        raise _too_long()


def check_method_args(obj: Any, name: str, args: Sequence[Any]) -> None:
    """Refuse the str methods whose arguments, not their receiver, set the result size."""
    if not args:
        return
    first = args[0]
    if name == "to_bytes" and isinstance(first, int) and first > se.MAX_STRING_LENGTH:
        raise _too_long()
    if not isinstance(obj, str | bytes):
        return
    if name in _PADDING and isinstance(first, int) and first > se.MAX_STRING_LENGTH:
        raise _too_long()
    if name == "replace" and len(args) >= 2 and isinstance(args[1], str | bytes):
        estimate = len(obj) + (len(obj) + 1) * len(args[1])
        if estimate > se.MAX_STRING_LENGTH:
            raise _too_long()
    if name == "join" and isinstance(first, Sequence) and len(obj) * len(first) > MAX_TEXT:
        raise _too_long()
