"""How the driver runs condition expressions and task scripts written in graph text.

:class:`Evaluation` is the pluggable interface; :class:`SafeEvaluation` is the default: Python
expression syntax plus the solon-flow operators (``&&``, ``||``, ``!``, ``AND``/``OR``/``NOT``,
``null``/``true``/``false``, ``.equals(x)``), evaluated null-safely over the context data in a
sandbox built on :mod:`simpleeval`'s policy. Text is never handed to Python's ``eval``/``exec``.

The sandbox's limits (text length, nesting, sizes, integer bits, work per evaluation) are
:class:`ExpressionLimits`; :func:`set_expression_limits` changes them for the whole process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from flow._expression import (
    SHORT_TEXT,
    ExpressionLimits,
    compile_condition,
    compile_script,
    current_limits,
    long_condition,
    long_script,
    set_limits,
    short_condition,
    short_script,
)
from flow.errors import ExpressionError

if TYPE_CHECKING:
    from flow.context import FlowContext


class Evaluation(Protocol):
    """Runs the text of conditions and scripts; the driver wraps ordinary failures."""

    def run_condition(self, ctx: FlowContext, expression: str) -> bool:
        """Evaluate ``expression`` over ``ctx.data``.

        Raises :class:`~flow.errors.ExpressionError` when the text does not parse or breaks the
        sandbox; any other exception comes from the expression itself.
        """
        ...

    def run_task(self, ctx: FlowContext, script: str) -> None:
        """Run ``script`` (statements separated by ``;`` or new lines) against ``ctx``.

        Raises :class:`~flow.errors.ExpressionError` as :meth:`run_condition` does.
        """
        ...


class SafeEvaluation:
    """The default :class:`Evaluation`: sandboxed, null-safe, compiled once per text.

    Conditions read as the reference reads them: ``None`` → false, a bool → itself, anything
    else → true. Script statements are ``name = expr`` (stored with ``ctx.put``), ``name += expr``
    and bare expressions such as ``context.put("k", v)``.
    """

    __slots__ = ()

    def run_condition(self, ctx: FlowContext, expression: str) -> bool:
        # compile_condition() inlined: this runs for every condition of every walk
        try:
            if len(expression) <= SHORT_TEXT:
                return short_condition(expression)(ctx.data)
            return long_condition(expression)(ctx.data)
        except ExpressionError as exc:
            raise exc.located(instance_id=ctx.instance_id) from None

    def run_task(self, ctx: FlowContext, script: str) -> None:
        try:
            if len(script) <= SHORT_TEXT:
                short_script(script)(ctx)
            else:
                long_script(script)(ctx)
        except ExpressionError as exc:
            raise _located(exc, ctx) from None

    def __repr__(self) -> str:
        return "SafeEvaluation()"


def _located(error: ExpressionError, ctx: FlowContext) -> ExpressionError:
    """``error`` naming the instance and the node whose task script raised it."""
    from flow.graph import Node

    node = ctx.data.get("node")
    if isinstance(node, Node):
        return error.located(instance_id=ctx.instance_id, graph_id=node.graph.id, node_id=node.id)
    return error.located(instance_id=ctx.instance_id)


def check_condition(text: str) -> None:
    """Compile a condition without running it; raises :class:`~flow.errors.ExpressionError`."""
    compile_condition(text)


def check_script(text: str) -> None:
    """Compile a task script without running it; raises :class:`~flow.errors.ExpressionError`."""
    compile_script(text)


def expression_limits() -> ExpressionLimits:
    """The sandbox limits in force (see :class:`ExpressionLimits` for each field)."""
    return current_limits()


def set_expression_limits(limits: ExpressionLimits) -> ExpressionLimits:
    """Install ``limits`` for the whole process and return the previous ones.

    Texts compiled under the old limits are compiled again on their next use. Typical use::

        from dataclasses import replace
        set_expression_limits(replace(expression_limits(), max_text=50_000))
    """
    return set_limits(limits)


__all__ = [
    "Evaluation",
    "ExpressionLimits",
    "SafeEvaluation",
    "check_condition",
    "check_script",
    "expression_limits",
    "set_expression_limits",
]
