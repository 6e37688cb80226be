"""Condition and task-script text compiled once, per text, into sandboxed callables.

Text is translated on tokens (solon-flow/SnEL operators → Python, :mod:`.translate`), parsed
with :mod:`ast` (:mod:`.parse`), checked against a whitelist and compiled into a tree of closures
(:mod:`.compiler`) over the operators of :mod:`.operators` and the access rules of
:mod:`.access`, with the runtime limits of :mod:`.limits`. The sandbox policy — operators with
size limits, forbidden attribute prefixes/methods/functions, literal size — is
:mod:`simpleeval`'s; only the tree walk is ours, because ``SimpleEval.eval`` keeps per-call state
on the evaluator (names, expression, counters) and costs several times more per evaluation.
Neither :func:`compile` nor :func:`eval` is ever applied to the text.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

import simpleeval as se

from flow._expression.compiler import Compiler, ScriptContext
from flow._expression.parse import parse_text
from flow.errors import ExpressionError

_T = TypeVar("_T")


def truth(value: Any) -> bool:
    """Condition truthiness of the reference: ``None`` → false, a bool → itself, else true."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    return True


def _guard(text: str, exc: BaseException) -> ExpressionError:
    return ExpressionError(f"Sandbox limit: {exc}", expression=text)


@lru_cache(maxsize=4096)
def compile_condition(text: str) -> Callable[[Mapping[str, Any]], bool]:
    """Compile a condition into ``(data) -> bool``; cached per text. Raises ExpressionError."""
    tree = parse_text(text, "eval")
    assert isinstance(tree, ast.Expression)
    root = _compile(text, lambda compiler: compiler.expr(tree.body))

    def condition(data: Mapping[str, Any]) -> bool:
        try:
            return truth(root(data))
        except (se.InvalidExpression, RecursionError) as exc:
            raise _guard(text, exc) from None

    return condition


@lru_cache(maxsize=4096)
def compile_script(text: str) -> Callable[[ScriptContext], None]:
    """Compile a task script into ``(ctx) -> None``; cached per text. Raises ExpressionError."""
    tree = parse_text(text, "exec")
    assert isinstance(tree, ast.Module)
    statements = _compile(text, lambda c: tuple(c.statement(s) for s in tree.body))

    def script(ctx: ScriptContext) -> None:
        try:
            for statement in statements:
                statement(ctx)
        except (se.InvalidExpression, RecursionError) as exc:
            raise _guard(text, exc) from None

    return script


def _compile(text: str, build: Callable[[Compiler], _T]) -> _T:
    try:
        return build(Compiler(text))
    except RecursionError:
        raise ExpressionError("Expression is nested too deeply", expression=text) from None


__all__ = ["ScriptContext", "compile_condition", "compile_script", "truth"]
