"""Checks of the options the repository, the recorder and ``sql_workflow`` are built with.

A wrongly typed option is refused when the object is built, with a ``TypeError`` naming the
option — not taken for true (``index="no"`` switched the index on), split into letters
(``vars_filter="actor"`` left ``actor`` stored: a stored identity authorizes the next caller),
or left to fail later with an ``AttributeError`` deep in an operation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from flow._text import safe_repr

_T = TypeVar("_T")


def flag(name: str, value: object) -> bool:
    """A yes/no option: ``True`` or ``False`` only."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {safe_repr(value)}")
    return value


def optional(name: str, value: object, kind: type[_T]) -> _T | None:
    """An option that is ``None`` or an instance of ``kind``."""
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__} or None, not {type(value).__name__}")
    return value


def context_keys(name: str, value: Iterable[str] | None) -> frozenset[str] | None:
    """A set of context keys (``vars_filter``): an iterable of strings, never one string."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(
            f"{name} must be a set of context keys (strings), not {type(value).__name__}"
        )
    keys = frozenset(value)
    wrong = [key for key in keys if not isinstance(key, str)]
    if wrong:
        raise TypeError(f"{name} must hold strings only, not {safe_repr(wrong[0])}")
    return keys


def whole_number(name: str, value: object) -> int:
    """A count option (``attempts``, ``batch_size``): an ``int``, never a ``bool``, a float
    or text (its range is the caller's to check, with a ``ValueError``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {safe_repr(value)}")
    return value


def callable_or_none(name: str, value: object) -> Callable[..., Any] | None:
    """A hook option (``auditor``)."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable or None, not {type(value).__name__}")
    return value


__all__ = ["callable_or_none", "context_keys", "flag", "optional", "whole_number"]
