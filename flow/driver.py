"""Drivers: how a node's task and a condition are carried out.

The engine decides *which* nodes run; the driver decides *what running means*. Task description
forms: ``@name`` (component from the container), ``#graphId`` (sub-graph), ``$a.b.c`` (script text
from the graph's meta), anything else (a script run by the evaluation). Condition forms: ``@name``
(condition component), anything else (an expression). A ``when``/``task`` may also be a component
object given in code.

Hooks for wrapping drivers (the workflow layer overrides ``handle_task``, ``on_node_start`` and
``on_node_end`` and delegates the rest): every method receives the evaluation's
:class:`~flow.exchanger.FlowExchanger`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flow._text import safe_repr
from flow.container import Container, MapContainer
from flow.errors import (
    ComponentNotFoundError,
    FlowError,
    GraphDefinitionError,
    GraphNotFoundError,
)
from flow.evaluation import Evaluation, SafeEvaluation

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.exchanger import FlowExchanger
    from flow.graph import Graph, Node


class FlowDriver:
    """Base driver: node callbacks are no-ops, ``handle_task`` delegates to ``post_handle_task``.

    Subclasses implement :meth:`handle_condition` and :meth:`post_handle_task`. Exceptions other
    than :class:`~flow.errors.FlowError` raised here are wrapped by the engine in ``TaskError`` /
    ``ConditionError``.
    """

    def on_node_start(self, exchanger: FlowExchanger, node: Node) -> None:
        """Called after the interceptors' ``on_node_start`` (not during a resume walk)."""

    def on_node_end(self, exchanger: FlowExchanger, node: Node) -> None:
        """Called after the interceptors' ``on_node_end`` (not during a resume walk)."""

    def handle_condition(self, exchanger: FlowExchanger, condition: Any) -> bool:
        """Evaluate a non-empty ``when`` (a string or a condition component)."""
        raise NotImplementedError

    def handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
        """Run ``node``'s task; wrappers override this and call :meth:`post_handle_task`."""
        self.post_handle_task(exchanger, node)

    def post_handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
        """Actually run ``node.task``."""
        raise NotImplementedError


def _called_graph(exchanger: FlowExchanger, node: Node, graph_id: str) -> Graph:
    """The graph a ``#id`` task calls; :class:`GraphNotFoundError` naming the calling node
    and the instance when the engine does not have it."""
    try:
        return exchanger.engine.get_graph_or_throw(graph_id)
    except GraphNotFoundError as exc:
        if exc.graph_id != graph_id or exc.called_from is not None:
            raise
        raise GraphNotFoundError(
            graph_id,
            instance_id=exchanger.instance_to_name,
            called_from=f"{node.graph.id}:{node.id}",
        ) from None


class SimpleFlowDriver(FlowDriver):
    """The default driver: an :class:`Evaluation` for text, a :class:`Container` for ``@name``.

    ``evaluation`` defaults to ``flow.evaluation.SafeEvaluation()``; ``container`` to an empty
    :class:`MapContainer`.
    """

    def __init__(
        self, *, evaluation: Evaluation | None = None, container: Container | None = None
    ) -> None:
        self.evaluation: Evaluation = evaluation if evaluation is not None else SafeEvaluation()
        self.container: Container = container if container is not None else MapContainer()

    # -- conditions --------------------------------------------------------------------
    def handle_condition(self, exchanger: FlowExchanger, condition: Any) -> bool:
        """Raises :class:`ComponentNotFoundError` for a missing or non-condition ``@name``."""
        ctx = exchanger.context
        if isinstance(condition, str):
            if condition.startswith("@"):
                return _test(self._condition_component(condition[1:]), ctx)
            return bool(self.evaluation.run_condition(ctx, condition))
        return _test(condition, ctx)

    def _condition_component(self, name: str) -> Any:
        component = self.container.get_component(name)
        if component is None:
            raise ComponentNotFoundError(name, f"The condition component {name!r} does not exist")
        if not (callable(getattr(component, "test", None)) or callable(component)):
            raise ComponentNotFoundError(
                name, f"The component {name!r} is not a condition component"
            )
        return component

    # -- tasks -------------------------------------------------------------------------
    def post_handle_task(self, exchanger: FlowExchanger, node: Node) -> None:
        """Run ``node.task`` by its form.

        Raises :class:`GraphNotFoundError` (``#id``), :class:`ComponentNotFoundError` (``@name``)
        and :class:`GraphDefinitionError` (``$path`` missing in the graph meta).
        """
        task = node.task
        if task is None:
            return
        if names_nothing(task):
            raise GraphDefinitionError(
                f"Node {node.id!r} of graph {node.graph.id!r}: task {task!r} names no "
                "sub-graph or component",
                graph_id=node.graph.id,
            )
        try:
            if not isinstance(task, str):
                _run(task, exchanger.context, node)
            elif task.startswith("#"):
                exchanger.run_graph(_called_graph(exchanger, node, task[1:]))
            elif task.startswith("@"):
                _run(self._task_component(task[1:]), exchanger.context, node)
            else:
                self._run_script(exchanger, node, task)
        finally:
            exchanger.context.exchanger = exchanger

    def _task_component(self, name: str) -> Any:
        component = self.container.get_component(name)
        if component is None:
            raise ComponentNotFoundError(name, f"The task component {name!r} does not exist")
        if not (callable(getattr(component, "run", None)) or callable(component)):
            raise ComponentNotFoundError(name, f"The component {name!r} is not a task component")
        return component

    def _run_script(self, exchanger: FlowExchanger, node: Node, script: str) -> None:
        if script.startswith("$"):
            script = meta_script(node, script[1:])
        with exchanger.context.scoped("node", node):
            self.evaluation.run_task(exchanger.context, script)


def names_nothing(task: Any) -> bool:
    """Whether a task is a bare ``#`` or ``@``: a sub-graph or component reference without a
    name (``validate()`` reports it; running it fails)."""
    return isinstance(task, str) and task.strip() in ("#", "@")


def meta_script(node: Node, path: str) -> str:
    """The script text at dotted ``path`` in ``node``'s graph meta.

    Raises :class:`GraphDefinitionError` naming the path when it is missing or not text.
    """
    value: Any = node.graph.meta
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            break
    if not isinstance(value, str) or not value.strip():
        raise GraphDefinitionError(
            f"Graph meta not found: {path!r} (task of node {node.id!r} in graph {node.graph.id!r})",
            graph_id=node.graph.id,
        )
    return value


def _test(component: Any, ctx: FlowContext) -> bool:
    test = getattr(component, "test", None)
    if callable(test):
        return bool(test(ctx))
    if callable(component):
        return bool(component(ctx))
    raise FlowError(
        f"Condition {safe_repr(component)} is neither callable nor has a test(ctx) method"
    )


def _run(component: Any, ctx: FlowContext, node: Node) -> None:
    run = getattr(component, "run", None)
    if callable(run):
        run(ctx, node)
    elif callable(component):
        component(ctx, node)
    else:
        raise FlowError(
            f"Task of node {node.id!r} in graph {node.graph.id!r} is neither callable nor has "
            "a run(ctx, node) method"
        )


__all__ = ["FlowDriver", "SimpleFlowDriver", "meta_script"]
