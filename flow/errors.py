"""Every error the engine raises.

One root, :class:`FlowError`, so callers can catch everything the library raises with one
``except``; a few subclasses for the cases callers handle differently. Each message names the
graph, node or instance involved, because an approval flow fails in production long after the
graph was written.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

from flow._text import safe_repr


class FlowError(Exception):
    """Root of every error raised by ``flow`` and ``flow_sqla``."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the same message and attributes, without calling ``__init__`` again:
        most errors take other arguments than their message, and an error a process pool's
        worker raised must reach the caller as itself (unpickling it called
        ``cls(message)``, which failed and broke the whole pool)."""
        state = {name: _picklable(value) for name, value in self.__dict__.items()}
        return _rebuilt, (type(self), self.args, state)

    def __str__(self) -> str:
        """The message, with any lone surrogate of the bad input it quotes escaped
        (``\\udc00``): printing or logging the error to a UTF-8 stream must not raise."""
        text = super().__str__()
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
        return text


def _picklable(value: object) -> object:
    """``value``, or its quoted form when it does not pickle (the engine of a repository, a
    generator passed as data): the error must still reach the other process."""
    try:
        pickle.dumps(value)
    except Exception:
        return safe_repr(value)
    return value


def _rebuilt(cls: type[FlowError], args: tuple[Any, ...], state: dict[str, Any]) -> FlowError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class GraphDefinitionError(FlowError):
    """A graph text or shape is unusable.

    ``problems`` holds one line per problem found (strict loading reports all of them at
    once); ``line``/``column`` are set (1-based) when the text itself did not parse.
    """

    def __init__(
        self,
        message: str,
        *,
        graph_id: str | None = None,
        problems: Sequence[str] = (),
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.graph_id = graph_id
        self.problems = list(problems)
        self.line = line
        self.column = column
        text = message
        if self.problems:
            text += "".join(f"\n  - {p}" for p in self.problems)
        super().__init__(text)


class ReadOnlyGraphError(FlowError, TypeError, AttributeError):
    """Code tried to change a built graph: an attribute of a :class:`~flow.graph.Graph`,
    ``Node`` or ``Link``, or a list inside their ``meta``.

    A graph is shared by every instance and thread of the process, so it never changes once
    built; edit a :class:`~flow.spec.GraphSpec` (``GraphSpec.from_graph``) and build a new one.
    Also a ``TypeError`` and an ``AttributeError``: what Python raises for read-only containers
    and frozen attributes. (Item assignment on a ``meta`` mapping raises Python's own
    ``TypeError``: meta mappings are ``types.MappingProxyType``.)
    """

    def __init__(self, what: str, *, graph_id: str | None = None) -> None:
        self.graph_id = graph_id
        where = f" of graph {graph_id!r}" if graph_id is not None else ""
        super().__init__(
            f"{what}{where} is read-only: a built graph never changes (edit a GraphSpec and "
            "create a new graph)"
        )


class StepBudgetError(FlowError):
    """One walk of a graph visited more nodes than its step budget allows.

    Raised by the workflow executor (``WorkflowExecutor(max_steps=...)``) when a walk goes round
    a cycle that nothing stops — e.g. an edge back to an earlier task through a gateway, or a
    cycle of automatic nodes. Nothing of the operation is kept by a transactional repository
    (``flow_sqla`` rolls back and releases the instance row lock).
    """

    def __init__(self, *, graph_id: str, node_id: str, instance_id: str, budget: int) -> None:
        self.graph_id = graph_id
        self.node_id = node_id
        self.instance_id = instance_id
        self.budget = budget
        super().__init__(
            f"Step budget of {budget} nodes exceeded at node {node_id!r} of graph {graph_id!r} "
            f"(instance {safe_repr(instance_id)}): the walk goes round a cycle that no waiting "
            "task breaks, or its splits fan out into more paths than that (splits without a join "
            "repeat everything after them per branch); send work back with "
            "TaskAction.BACK/BACK_JUMP instead of an edge, join branches with a gateway, or "
            "raise WorkflowExecutor(max_steps=...)"
        )


class ResumeError(FlowError):
    """An evaluation could not resume where the context's trace stopped: the walk from the
    start node (which runs nothing until it reaches the node last recorded for the graph)
    passed more nodes than any path to it needs — the node is unreachable with these
    variables (a snapshot naming a node its graph no longer leads to), or a cycle whose
    counter only a task would change keeps the walk from it (a sub-graph with such a loop,
    called twice in one evaluation, resumes at its END: the reference walks forever)."""

    def __init__(self, *, graph_id: str, node_id: str, instance_id: object, passed: int) -> None:
        self.graph_id = graph_id
        self.node_id = node_id
        self.instance_id = instance_id
        self.passed = passed
        where = (
            f" (instance {safe_repr(instance_id)})"
            if isinstance(instance_id, str) and instance_id
            else ""
        )
        super().__init__(
            f"Cannot resume graph {graph_id!r} at its last recorded node {node_id!r}{where}: "
            f"the walk from the start passed {passed} nodes without reaching it (the node is "
            "unreachable with these variables, or a cycle only a task would leave keeps the "
            "walk from it)"
        )


class GraphNotFoundError(FlowError, LookupError):
    """A graph id is not loaded in the engine. For a sub-graph call, ``called_from`` is the
    calling node as ``"<graph id>:<node id>"`` (which graph holds the bad ``#id``)."""

    def __init__(
        self, graph_id: str, *, instance_id: str | None = None, called_from: str | None = None
    ) -> None:
        self.graph_id = graph_id
        self.instance_id = instance_id
        self.called_from = called_from
        caller = "" if called_from is None else f", called by node {called_from!r}"
        where = "" if instance_id is None else f" (instance {safe_repr(instance_id)})"
        super().__init__(f"Flow graph not found: {safe_repr(graph_id)}{caller}{where}")


class NodeNotFoundError(FlowError, LookupError):
    """A node id does not exist in a graph."""

    def __init__(self, node_id: str, graph_id: str | None = None) -> None:
        self.node_id = node_id
        self.graph_id = graph_id
        where = f" in graph {graph_id!r}" if graph_id is not None else ""
        super().__init__(f"Node not found: {safe_repr(node_id)}{where}")


class ExpressionError(FlowError):
    """An expression does not parse, or it tried something the sandbox forbids.

    ``expression`` holds the whole text; the message quotes at most its first 200 characters.
    When it was raised while running, ``instance_id`` (and for a task script ``graph_id`` and
    ``node_id``) say where.
    """

    def __init__(
        self,
        message: str,
        *,
        expression: str | None = None,
        instance_id: str | None = None,
        graph_id: str | None = None,
        node_id: str | None = None,
    ) -> None:
        self.reason = message
        self.expression = expression
        self.instance_id = instance_id
        self.graph_id = graph_id
        self.node_id = node_id
        if expression is not None:
            shown = expression if len(expression) <= 200 else f"{expression[:200]}..."
            message = f"{message} (in expression {shown!r})"
        where = []
        if node_id is not None:
            where.append(f"task of node {node_id!r} in graph {graph_id!r}")
        if instance_id:
            where.append(f"instance {safe_repr(instance_id)}")
        if where:
            message = f"{message} ({', '.join(where)})"
        super().__init__(message)

    def located(
        self, *, instance_id: str | None, graph_id: str | None = None, node_id: str | None = None
    ) -> ExpressionError:
        """The same error, saying which instance (and task node) it was raised in."""
        return ExpressionError(
            self.reason,
            expression=self.expression,
            instance_id=instance_id,
            graph_id=graph_id,
            node_id=node_id,
        )


class ConditionError(FlowError):
    """A condition failed while it was evaluated; the cause is chained.

    The message starts like the reference's (``The condition handle failed: <graph> /
    <condition>``) and goes on with where the condition is and why it failed, so that a one-line
    report (a log line, ``flow submit``) is enough to fix the graph or the data.
    """

    def __init__(
        self,
        graph_id: str,
        description: str,
        *,
        node_id: str | None = None,
        link_to: str | None = None,
        cause: BaseException | None = None,
        instance_id: str | None = None,
    ) -> None:
        self.graph_id = graph_id
        self.description = description
        self.node_id = node_id
        self.link_to = link_to
        self.instance_id = instance_id
        message = f"The condition handle failed: {graph_id} / {description}"
        details = []
        if node_id is not None:
            where = f"link {node_id} -> {link_to}" if link_to is not None else f"node {node_id!r}"
            details.append(f"at {where}")
        if instance_id is not None:
            details.append(f"instance {safe_repr(instance_id)}")
        if cause is not None:
            details.append(f"{type(cause).__name__}: {_first_line(cause)}")
        if details:
            message += f" ({', '.join(details)})"
        super().__init__(message)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "(no message)"


class TaskError(FlowError):
    """A node's task raised; the cause is chained. The message starts like the reference's
    and names the instance when the walk had one."""

    def __init__(self, graph_id: str, node_id: str, *, instance_id: str | None = None) -> None:
        self.graph_id = graph_id
        self.node_id = node_id
        self.instance_id = instance_id
        message = f"The task handle failed: {graph_id} / {node_id}"
        if instance_id is not None:
            message += f" (instance {safe_repr(instance_id)})"
        super().__init__(message)


class InvalidArgumentTypeError(FlowError, TypeError):
    """A call got an argument of the wrong type: a ``message`` that is not text, a ``task``
    that is neither a ``Task`` nor an ``OpenTask``, an actor that is neither text nor a
    number, a graph, context or step count of ``FlowEngine.eval`` or a context's ``data`` of
    another type. Raised before anything is read or written, on every repository alike (a
    driver would otherwise store ``b"x"`` as a blob on one database and as hex text on
    another, or fail with a bare ``AttributeError``). Also a ``TypeError``, what Python raises
    for an argument of the wrong type. Importable from ``flow.workflow`` too."""

    def __init__(
        self, name: str, value: object, expected: str, *, instance_id: object = None
    ) -> None:
        self.name = name
        self.value = value
        self.instance_id = instance_id
        where = f" (instance {safe_repr(instance_id)})" if isinstance(instance_id, str) else ""
        super().__init__(f"{name} must be {expected}, not {type(value).__name__}{where}")


class ComponentNotFoundError(FlowError, LookupError):
    """An ``@name`` component is missing from the container or has the wrong kind."""

    def __init__(self, name: str, message: str | None = None) -> None:
        self.name = name
        super().__init__(message or f"The component {safe_repr(name)} does not exist")


class SnapshotError(FlowError):
    """A stored snapshot (context JSON or a repository row) cannot be decoded."""

    def __init__(self, message: str, *, instance_id: str | None = None) -> None:
        self.instance_id = instance_id
        if instance_id is not None:
            message = f"{message} (instance {safe_repr(instance_id)})"
        super().__init__(message)


class ContextValueError(SnapshotError, TypeError):
    """A context value cannot be stored: a type JSON has no form for, a non-string key, text
    with lone surrogates, or a value past a codec limit (nesting depth — cycles included —,
    integer digits, JSON size; see ``docs/limits.md``). Nothing was written. Also a
    ``TypeError``, which :func:`flow.codec.encode` raised before these limits existed."""


__all__ = [
    "ComponentNotFoundError",
    "ConditionError",
    "ContextValueError",
    "ExpressionError",
    "FlowError",
    "GraphDefinitionError",
    "GraphNotFoundError",
    "InvalidArgumentTypeError",
    "NodeNotFoundError",
    "ReadOnlyGraphError",
    "ResumeError",
    "SnapshotError",
    "StepBudgetError",
    "TaskError",
]
