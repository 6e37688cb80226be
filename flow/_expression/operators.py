"""What each operator of the expression language does, keyed by its :mod:`ast` node type.

Ordering comparisons and ``in`` are null-safe as in the reference (``None < 1`` is false, not a
``TypeError``); arithmetic is simpleeval's with the size and power limits of
:mod:`flow._expression.limits`; ``!`` arrives as ``~`` (see :mod:`~flow._expression.translate`)
and so ``Invert`` is logical not.
"""

from __future__ import annotations

import ast
import operator as op
from collections.abc import Callable
from typing import Any

import simpleeval as se

from flow._expression.limits import safe_add, safe_mod, safe_mult, safe_power


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
    return None if left is None else left == right


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
BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    kind: se.DEFAULT_OPERATORS[kind]
    for kind in (
        ast.Add,
        ast.Sub,
        ast.Mult,
        ast.Div,
        ast.FloorDiv,
        ast.Pow,
        ast.LShift,
        ast.RShift,
        ast.BitOr,
        ast.BitXor,
        ast.BitAnd,
    )
}
BINARY.update({ast.Mod: safe_mod, ast.Mult: safe_mult, ast.Add: safe_add, ast.Pow: safe_power})
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: op.not_,
    ast.Invert: op.not_,
    ast.USub: se.DEFAULT_OPERATORS[ast.USub],
    ast.UAdd: se.DEFAULT_OPERATORS[ast.UAdd],
}
