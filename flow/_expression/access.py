"""What an expression may reach — attributes, methods and items — read null-safely.

Which attribute or method of which type is reachable is :mod:`.policy`'s allow-list; the size of
what a method builds is :mod:`.sizes`'. A mapping's attributes are its keys (``order.total``), a
missing attribute, key or receiver gives ``None`` as in the reference, and ``x.getAmount()`` /
``x.isDone()`` of Java graphs read the ``amount`` / ``done`` property *through the same policy*,
so a getter never hands out what the attribute read would refuse. Violations found while
compiling raise :class:`ExpressionError`; those found while running raise simpleeval's
:class:`~simpleeval.FeatureNotAvailable`, with a message that names the attribute and never a
fact of the host.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from typing import Any

import simpleeval as se

from flow._expression.functions import refuse_functions
from flow._expression.limits import CONTAINERS, charge
from flow._expression.policy import (
    DATA_OBJECT,
    forbidden_name,
    is_data_attribute,
    is_own_method,
    rule_for,
)
from flow._expression.sizes import after_call, before_call
from flow.errors import ExpressionError

_SCALARS = frozenset({int, float, complex, str, bytes, bool, type(None)})
_CALLABLE_VALUES = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    classmethod,
    staticmethod,
)


def check_attr_name(name: str, text: str) -> None:
    """Raise :class:`ExpressionError` naming ``text`` when no value ever exposes ``name``."""
    if forbidden_name(name):
        raise ExpressionError(f"Access to attribute {name!r} is not allowed", expression=text)


def _refused(name: str) -> se.FeatureNotAvailable:
    return se.FeatureNotAvailable(f"Attribute or method {name!r} is not available here")


def _check_value(value: Any) -> Any:
    """Classes, modules and functions never become values of the expression."""
    if type(value) in _SCALARS or not isinstance(value, _CALLABLE_VALUES):
        return value
    raise se.FeatureNotAvailable("Classes, modules and functions are not available")


def read_attr(obj: Any, name: str) -> Any:
    """Null-safe attribute read: a Mapping gives its key, anything missing gives ``None``."""
    if obj is None:
        return None
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(name)
    if forbidden_name(name):
        raise _refused(name)
    rule = rule_for(obj)
    if name in rule.attributes:
        return _check_value(getattr(obj, name, None))
    if rule is DATA_OBJECT:
        if is_data_attribute(obj, name):
            return _check_value(getattr(obj, name, None))
        if not _has(obj, name):
            return None
    elif name not in rule.methods and not _has(obj, name):
        return None
    raise _refused(name)


def _has(obj: Any, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def call_method(obj: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``obj.name(*args, **kwargs)`` within the sandbox; ``None`` when ``obj`` is ``None``."""
    if obj is None:
        return None
    if forbidden_name(name):
        raise _refused(name)
    rule = rule_for(obj)
    if name not in rule.methods and not (rule is DATA_OBJECT and is_own_method(obj, name)):
        if args or kwargs or (_has(obj, name) and not isinstance(obj, Mapping)):
            raise _refused(name)
        return _bean_property(obj, name)
    refuse_functions(args)
    refuse_functions(tuple(kwargs.values()))
    before_call(obj, name, args, kwargs)
    result = getattr(obj, name)(*args, **kwargs)
    after_call(result)
    return _check_value(result)


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
    if not isinstance(container, (str, bytes, range, *CONTAINERS)) and (
        rule_for(container) is not DATA_OBJECT
    ):
        raise se.FeatureNotAvailable("This value cannot be indexed")
    if isinstance(key, slice):
        charge(len(container) if hasattr(container, "__len__") else 1)
    return _check_value(container[key])
