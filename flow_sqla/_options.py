"""Checks of the options the repository, the recorder and ``sql_workflow`` are built with.

A wrongly typed option is refused when the object is built, with
:class:`~flow.errors.InvalidArgumentTypeError` (a ``TypeError``) naming the option — not taken
for true (``index="no"`` switched the index on), split into letters (``vars_filter="actor"``
left ``actor`` stored: a stored identity authorizes the next caller), or left to fail later
with an ``AttributeError`` deep in an operation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from flow.errors import InvalidArgumentTypeError

_T = TypeVar("_T")


def flag(name: str, value: object) -> bool:
    """A yes/no option: ``True`` or ``False`` only."""
    if not isinstance(value, bool):
        raise InvalidArgumentTypeError(name, value, "True or False")
    return value


def optional(name: str, value: object, kind: type[_T]) -> _T | None:
    """An option that is ``None`` or an instance of ``kind``."""
    if value is not None and not isinstance(value, kind):
        raise InvalidArgumentTypeError(name, value, f"a {kind.__name__} or None")
    return value


def context_keys(name: str, value: Iterable[str] | None) -> frozenset[str] | None:
    """A set of context keys (``vars_filter``): an iterable of strings, never one string."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidArgumentTypeError(name, value, "a set of context keys (strings)")
    keys = frozenset(value)
    wrong = [key for key in keys if not isinstance(key, str)]
    if wrong:
        raise InvalidArgumentTypeError(name, wrong[0], "a set of strings only, holding no item")
    return keys


def whole_number(name: str, value: object) -> int:
    """A count option (``attempts``, ``batch_size``): an ``int``, never a ``bool``, a float
    or text (its range is the caller's to check, with
    :class:`~flow_sqla.errors.InvalidArgumentError`, a ``ValueError``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentTypeError(name, value, "an integer")
    return value


def callable_or_none(name: str, value: object) -> Callable[..., Any] | None:
    """A hook option (``auditor``)."""
    if value is not None and not callable(value):
        raise InvalidArgumentTypeError(name, value, "callable or None")
    return value


__all__ = ["callable_or_none", "context_keys", "flag", "optional", "whole_number"]
