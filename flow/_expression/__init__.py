"""Condition and task-script text compiled once, per text, into sandboxed callables.

Text is translated on tokens (solon-flow/SnEL operators → Python, :mod:`.translate`), parsed
with :mod:`ast` (:mod:`.parse`), checked against a whitelist and compiled into a tree of closures
(:mod:`.compiler`) over the operators of :mod:`.operators`, the functions of :mod:`.functions`
and the per-type allow-list of :mod:`.policy` (applied by :mod:`.access`), with the size, depth
and work limits of :mod:`.limits` (applied to methods by :mod:`.sizes`). simpleeval supplies the
forbidden names and its error types; the tree walk is ours, because ``SimpleEval.eval`` keeps
per-call state on the evaluator and costs several times more per evaluation. Neither
:func:`compile` nor :func:`eval` is ever applied to the text.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

import simpleeval as se

from flow._expression import limits
from flow._expression.compiler import Compiler, ScriptContext
from flow._expression.limits import METER, ExpressionLimits, settle_meter, start_meter
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
    if isinstance(exc, RecursionError):
        return ExpressionError("Sandbox limit: the evaluation nests too deeply", expression=text)
    return ExpressionError(f"Sandbox limit: {exc}", expression=text)


_GUARDED = (se.InvalidExpression, RecursionError)


SHORT_TEXT = 512
"""Texts up to this long share a 4,096-entry cache; longer ones a 64-entry cache, so that the
compiled forms kept in memory stay bounded (a compiled 10,000-character text holds about 1 MB)."""


def compile_condition(text: str) -> Callable[[Mapping[str, Any]], bool]:
    """Compile a condition into ``(data) -> bool``; cached per text. Raises ExpressionError."""
    if len(text) <= SHORT_TEXT:
        return short_condition(text)
    return long_condition(text)


def compile_script(text: str) -> Callable[[ScriptContext], None]:
    """Compile a task script into ``(ctx) -> None``; cached per text. Raises ExpressionError.

    One work budget covers the whole script, not each statement.
    """
    if len(text) <= SHORT_TEXT:
        return short_script(text)
    return long_script(text)


def _build_condition(text: str) -> Callable[[Mapping[str, Any]], bool]:
    tree = parse_text(text, "eval")
    assert isinstance(tree, ast.Expression)
    root, metered = _compile(text, lambda compiler: compiler.expr(tree.body))

    def condition(data: Mapping[str, Any]) -> bool:
        try:
            return truth(root(data))
        except _GUARDED as exc:
            raise _guard(text, exc) from None

    def metered_condition(data: Mapping[str, Any]) -> bool:
        saved = start_meter()
        try:
            return truth(root(data))
        except _GUARDED as exc:
            raise _guard(text, exc) from None
        finally:
            settle_meter(saved)

    return metered_condition if metered else condition


def _build_script(text: str) -> Callable[[ScriptContext], None]:
    tree = parse_text(text, "exec")
    assert isinstance(tree, ast.Module)
    statements, metered = _compile(text, lambda c: tuple(c.statement(s) for s in tree.body))

    def script(ctx: ScriptContext) -> None:
        try:
            for statement in statements:
                statement(ctx)
        except _GUARDED as exc:
            raise _guard(text, exc) from None

    def metered_script(ctx: ScriptContext) -> None:
        saved = start_meter()
        try:
            for statement in statements:
                statement(ctx)
        except _GUARDED as exc:
            raise _guard(text, exc) from None
        finally:
            settle_meter(saved)

    return metered_script if metered else script


short_condition = lru_cache(maxsize=4096)(_build_condition)
long_condition = lru_cache(maxsize=64)(_build_condition)
short_script = lru_cache(maxsize=4096)(_build_script)
long_script = lru_cache(maxsize=64)(_build_script)
_CACHES = (short_condition, long_condition, short_script, long_script)


def _compile(text: str, build: Callable[[Compiler], _T]) -> tuple[_T, bool]:
    """Build with a work budget of its own (never an operation's, and the meter of an
    evaluation that compiles a text — application code called from an expression — is given
    back): folding constants runs operations now."""
    saved = METER.left, METER.short
    METER.left, METER.short = limits.LIMITS.max_work, False
    try:
        compiler = Compiler(text)
        built = build(compiler)
        compiler.runs_metered[0] = compiler.metered
        return built, compiler.metered
    except RecursionError:
        raise ExpressionError("Expression is nested too deeply", expression=text) from None
    finally:
        METER.left, METER.short = saved


def set_limits(new: ExpressionLimits) -> ExpressionLimits:
    """Install ``new`` process-wide, forget compiled texts (they were checked against the old
    limits) and return the previous limits."""
    previous = limits.set_limits(new)
    for cache in _CACHES:
        cache.cache_clear()
    return previous


def current_limits() -> ExpressionLimits:
    return limits.LIMITS


__all__ = [
    "SHORT_TEXT",
    "ExpressionLimits",
    "ScriptContext",
    "compile_condition",
    "compile_script",
    "current_limits",
    "long_condition",
    "long_script",
    "set_limits",
    "short_condition",
    "short_script",
    "truth",
]
