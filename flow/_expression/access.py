"""What an expression may reach: attributes, methods, items and functions, read null-safely.

The sandbox policy is :mod:`simpleeval`'s (forbidden attribute prefixes, methods and functions)
plus a few frame/coroutine attributes, the public surface of :class:`FlowContext` and a small
set of functions. Modules, classes and functions taken from the data never reach the script.
A missing attribute, key or receiver gives ``None`` as in the reference, and ``x.getAmount()``
of Java graphs reads the ``amount`` property. Violations found while compiling raise
:class:`ExpressionError`; those found while running raise simpleeval's
:class:`~simpleeval.FeatureNotAvailable`.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import simpleeval as se

from flow._expression.limits import check_method_args, check_size
from flow.context import FlowContext
from flow.errors import ExpressionError

_EXTRA_DISALLOWED = frozenset(
    {"f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_code", "cr_code", "ag_code"}
)
_CONTEXT_ATTRS = frozenset(
    {
        "put",
        "put_if_absent",
        "put_all",
        "get",
        "remove",
        "stop",
        "interrupt",
        "is_stopped",
        "instance_id",
        "data",
        "last_node_id",
        "last_record",
    }
)
_PRIMITIVES = frozenset({int, float, complex, str, bytes, bool, type(None)})

FUNCTIONS: Mapping[str, Callable[..., Any]] = types.MappingProxyType(
    {
        "len": len,
        "min": min,
        "max": max,
        "abs": abs,
        "round": round,
        "str": str,
        "int": int,
        "float": float,
        "bool": bool,
    }
)


def check_attr_name(name: str, text: str) -> None:
    """Raise :class:`ExpressionError` naming ``text`` when ``name`` is a forbidden attribute."""
    if (
        name.startswith(tuple(se.DISALLOW_PREFIXES))
        or name in se.DISALLOW_METHODS
        or name in _EXTRA_DISALLOWED
    ):
        raise ExpressionError(f"Access to attribute {name!r} is not allowed", expression=text)


def _check_value(value: Any) -> Any:
    """Stop modules, classes and simpleeval's forbidden functions from reaching the script."""
    if type(value) in _PRIMITIVES:
        return value
    if isinstance(value, types.ModuleType | type):
        raise se.FeatureNotAvailable("Modules and classes are not available in expressions")
    if callable(value) and _is_forbidden(value):
        raise se.FeatureNotAvailable("This function is forbidden")
    return value


def _is_forbidden(function: Any) -> bool:
    try:
        return function in se.DISALLOW_FUNCTIONS
    except TypeError:
        return False


def read_attr(obj: Any, name: str) -> Any:
    """Null-safe attribute read: a Mapping gives its key, anything missing gives ``None``."""
    if obj is None:
        return None
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(name)
    _check_receiver(obj, name)
    return _check_value(getattr(obj, name, None))


def _check_receiver(obj: Any, name: str) -> None:
    """Only the context's public surface, and nothing of modules or classes, is reachable."""
    if isinstance(obj, FlowContext):
        if name not in _CONTEXT_ATTRS:
            raise se.FeatureNotAvailable(f"context.{name} is not available in expressions")
        return
    _check_value(obj)


def call_method(obj: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``obj.name(*args, **kwargs)`` within the sandbox; ``None`` when ``obj`` is ``None``."""
    if obj is None:
        return None
    _check_receiver(obj, name)
    method = getattr(obj, name, None)
    if method is None:
        return _bean_property(obj, name) if not args and not kwargs else None
    _check_value(method)
    check_arguments(args, kwargs)
    check_method_args(obj, name, args)
    result = _check_value(method(*args, **kwargs))
    check_size(result)
    check_size(obj)
    return result


def check_arguments(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """The language has no functions as values; one taken from the data is never called."""
    for value in (*args, *kwargs.values()):
        if callable(value):
            raise se.FeatureNotAvailable("Functions cannot be passed as arguments")


def _bean_property(obj: Any, name: str) -> Any:
    """``x.getAmount()`` / ``x.isDone()`` of Java graphs read ``amount`` / ``done`` (or snake)."""
    for prefix in ("get", "is"):
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest[:1].isupper():
            camel = rest[0].lower() + rest[1:]
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
            value = read_attr(obj, camel)
            return value if value is not None or snake == camel else read_attr(obj, snake)
    return None


def read_item(container: Any, key: Any) -> Any:
    """Null-safe ``container[key]``: a Mapping gives ``None`` for a missing key."""
    if container is None:
        return None
    if type(container) is dict or isinstance(container, Mapping):
        return container.get(key)
    return _check_value(container[key])
