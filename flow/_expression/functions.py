"""The functions an expression may call, each weighing its arguments before it works.

``len min max abs round str int float bool`` as in Python, except that ``str()`` refuses a
value whose text would exceed ``max_length`` (a list that shares its items can print as
terabytes), ``int()``/``round()`` refuse results over ``max_bits`` bits (``int()`` of
``Decimal("1e9999999")`` would build a ten-million-digit integer), and conversions to and from
text charge the work meter by their quadratic cost. ``str()`` takes one argument: decoding
bytes would look up codecs by name.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import simpleeval as se

from flow._expression import limits
from flow._expression.limits import CONTAINERS, charge, check_bits, check_length, weigh
from flow._expression.sizes import after_call

_LOG2_10 = 3.3219280948873626


def _digits_allowed() -> int:
    return int(limits.LIMITS.max_bits / _LOG2_10)


def _charge_digits(digits: int) -> None:
    charge(((digits * digits) >> 12) + 1)


def _len(value: Any) -> int:
    return len(value)


def _cost_of_items(args: tuple[Any, ...]) -> None:
    """``min(items)`` walks ``items``: a container or string is weighed, anything else must
    say how long it is (a ``range`` from the data may be 10**12 long)."""
    items = args[0] if len(args) == 1 else args
    charge(weigh(items) if isinstance(items, (*CONTAINERS, str, bytes)) else _length(items))


def _length(items: Any) -> int:
    try:
        return len(items)
    except (TypeError, OverflowError):
        raise se.FeatureNotAvailable("min()/max() take a list, tuple, set or string") from None


def _min(*args: Any, **kwargs: Any) -> Any:
    _cost_of_items(args)
    return min(*args, **kwargs)


def _max(*args: Any, **kwargs: Any) -> Any:
    _cost_of_items(args)
    return max(*args, **kwargs)


def _str(value: Any = "", *decoding: Any) -> str:
    if decoding:
        raise se.FeatureNotAvailable("str() takes one argument (decoding is not available)")
    if isinstance(value, int):
        _charge_digits(value.bit_length() // 3)
    else:
        size = weigh(value, text=True)
        check_length(size)
    result = str(value)
    after_call(result)
    return result


def _check_decimal(value: Decimal) -> None:
    if value.is_finite() and value.adjusted() > _digits_allowed():
        raise limits.too_many_bits()


def _int(value: Any = 0, *base: Any) -> int:
    if isinstance(value, str | bytes):
        if len(value) > _digits_allowed() + 64:
            raise limits.too_many_bits()
        _charge_digits(len(value))
    elif isinstance(value, Decimal):
        _check_decimal(value)
        _charge_digits(max(value.adjusted(), 0))
    return int(value, *base)


def _float(value: Any = 0.0) -> float:
    if isinstance(value, str | bytes):
        check_length(len(value))
    return float(value)


def _round(value: Any, ndigits: Any = None) -> Any:
    if ndigits is None:
        if isinstance(value, Decimal):
            _check_decimal(value)
        return round(value)
    if isinstance(ndigits, int):
        bits = int(abs(ndigits) * _LOG2_10)
        check_bits(bits)
        charge((bits * bits) >> 14)
        if isinstance(value, Decimal):
            _check_decimal(value)
    return round(value, ndigits)


FUNCTIONS: Mapping[str, Callable[..., Any]] = types.MappingProxyType(
    {
        "len": _len,
        "min": _min,
        "max": _max,
        "abs": abs,
        "round": _round,
        "str": _str,
        "int": _int,
        "float": _float,
        "bool": bool,
    }
)


def refuse_functions(values: tuple[Any, ...] | list[Any]) -> None:
    """The language has no functions as values; one taken from the data is never called,
    and no module or class is handed to a function (its text would name host paths)."""
    for value in values:
        if callable(value) or isinstance(value, types.ModuleType):
            raise se.FeatureNotAvailable("Functions, classes and modules cannot be passed")
