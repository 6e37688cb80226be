"""The engine: a registry of graphs, drivers and interceptors, and ``eval``."""

from __future__ import annotations

import glob
import operator
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from flow._hooks import check_hooks
from flow._text import safe_repr
from flow._walk import Walk
from flow.context import FlowContext
from flow.driver import FlowDriver, SimpleFlowDriver
from flow.errors import (
    FlowError,
    GraphDefinitionError,
    GraphNotFoundError,
    InvalidArgumentTypeError,
)
from flow.exchanger import FlowExchanger
from flow.graph import Graph
from flow.interceptor import FlowInterceptor, FlowInvocation
from flow.loader import GRAPH_FILE_SUFFIXES, graph_file_path

_GLOB_CHARS = frozenset("*?[")


class FlowEngine:
    """Evaluates graphs over contexts.

    One engine is shared by many threads: ``eval`` keeps all per-evaluation state in its own
    :class:`FlowExchanger`; registries are replaced, not mutated, so a running eval keeps a
    consistent view.
    """

    #: Default of ``max_depth``: how many sub-graph calls (``task: "#id"``) may nest.
    MAX_DEPTH = 32

    def __init__(self, driver: FlowDriver | None = None, *, max_depth: int = MAX_DEPTH) -> None:
        #: Sub-graphs calling sub-graphs nest at most this deep; deeper raises
        #: :class:`GraphDefinitionError` (each level costs about a dozen Python frames).
        if isinstance(max_depth, bool) or not isinstance(max_depth, int):
            raise InvalidArgumentTypeError("max_depth", max_depth, "an integer")
        self.max_depth = max_depth
        if driver is not None:
            check_hooks("driver", driver, _DRIVER_HOOKS, "a FlowDriver or None")
        self._default_driver: FlowDriver = driver if driver is not None else SimpleFlowDriver()
        self._drivers: dict[str, FlowDriver] = {}
        self._graphs: dict[str, Graph] = {}
        self._interceptor_entries: list[tuple[int, int, FlowInterceptor]] = []
        self._interceptors: tuple[FlowInterceptor, ...] = ()
        self._seq = 0

    # -- graphs ------------------------------------------------------------------------
    def load(self, source: Graph | str | os.PathLike[str]) -> list[Graph]:
        """Register a graph, a graph file, or every ``.yml``/``.yaml``/``.json`` file matching a
        glob pattern (``**`` recurses); returns the graphs loaded (a glob may match none).

        Raises :class:`GraphDefinitionError` for an unreadable or invalid file, and for a
        ``source`` that is no path (not a ``str``/``os.PathLike``, or holding NUL).
        """
        if isinstance(source, Graph):
            self._graphs = {**self._graphs, source.id: source}
            return [source]
        text = graph_file_path(source)
        if _GLOB_CHARS.isdisjoint(text):
            paths = [Path(text)]
        else:
            paths = [
                Path(p)
                for p in sorted(glob.glob(text, recursive=True))
                if Path(p).suffix.lower() in GRAPH_FILE_SUFFIXES and Path(p).is_file()
            ]
        loaded = [Graph.from_file(path) for path in paths]
        self._graphs = {**self._graphs, **{graph.id: graph for graph in loaded}}
        return loaded

    def unload(self, graph_id: str) -> None:
        self._graphs = {k: v for k, v in self._graphs.items() if k != graph_id}

    @property
    def graphs(self) -> Mapping[str, Graph]:
        """A read-only snapshot of the loaded graphs by id."""
        return MappingProxyType(self._graphs)

    def get_graph(self, graph_id: str) -> Graph | None:
        """The graph loaded as ``graph_id``; ``None`` for any other id — also one that is no
        string at all (a JSON list or object taken from a request), which is never loaded."""
        return self._graphs.get(graph_id) if isinstance(graph_id, str) else None

    def get_graph_or_throw(self, graph_id: str) -> Graph:
        graph = self.get_graph(graph_id)
        if graph is None:
            raise GraphNotFoundError(graph_id)
        return graph

    # -- drivers -----------------------------------------------------------------------
    def register_driver(self, name: str | None, driver: FlowDriver) -> None:
        """Register ``driver`` under ``name`` (graphs pick it with ``driver: name``);
        ``None`` or ``""`` replaces the default driver. Raises
        :class:`InvalidArgumentTypeError` for a name that is not text and for a driver
        without the callbacks a walk makes (``None``, a class instead of an instance): such a
        driver failed every later walk with a bare ``AttributeError``."""
        if name is not None and not isinstance(name, str):
            raise InvalidArgumentTypeError("name", name, "a driver name (str) or None")
        check_hooks("driver", driver, _DRIVER_HOOKS, "a FlowDriver")
        if name:
            self._drivers = {**self._drivers, name: driver}
        else:
            self._default_driver = driver

    def unregister_driver(self, name: str) -> None:
        self._drivers = {k: v for k, v in self._drivers.items() if k != name}

    def get_driver(self, graph: Graph) -> FlowDriver:
        """The driver named by ``graph.driver`` (the default when empty).

        Raises :class:`GraphDefinitionError` when the graph names a driver nobody registered,
        :class:`InvalidArgumentTypeError` when ``graph`` is not a :class:`Graph`.
        """
        if not isinstance(graph, Graph):
            raise InvalidArgumentTypeError("graph", graph, "a Graph")
        if not graph.driver:
            return self._default_driver
        driver = self._drivers.get(graph.driver)
        if driver is None:
            raise GraphDefinitionError(
                f"No driver found for: {graph.driver!r} (graph {graph.id!r})", graph_id=graph.id
            )
        return driver

    # -- interceptors ------------------------------------------------------------------
    def add_interceptor(self, interceptor: FlowInterceptor, index: int = 0) -> None:
        """Add an interceptor; smaller ``index`` runs first, equal indexes keep insertion order.
        Raises :class:`InvalidArgumentTypeError` for an interceptor without the hooks a walk
        calls (``None``, a class instead of an instance) or an ``index`` that is not an
        integer — refused here, not by every later walk or the next ``add_interceptor``."""
        check_hooks("interceptor", interceptor, _INTERCEPTOR_HOOKS, "a FlowInterceptor")
        if isinstance(index, bool) or not isinstance(index, int):
            raise InvalidArgumentTypeError("index", index, "an integer")
        self._seq += 1
        entries = [*self._interceptor_entries, (index, self._seq, interceptor)]
        entries.sort(key=lambda entry: (entry[0], entry[1]))
        self._interceptor_entries = entries
        self._interceptors = tuple(entry[2] for entry in entries)

    def remove_interceptor(self, interceptor: FlowInterceptor) -> None:
        entries = [e for e in self._interceptor_entries if e[2] is not interceptor]
        self._interceptor_entries = entries
        self._interceptors = tuple(entry[2] for entry in entries)

    @property
    def interceptors(self) -> tuple[FlowInterceptor, ...]:
        return self._interceptors

    # -- evaluation --------------------------------------------------------------------
    def eval(
        self, graph: Graph | str, ctx: FlowContext | None = None, *, steps: int = -1
    ) -> FlowContext:
        """Evaluate ``graph`` (resuming where ``ctx``'s trace stopped) and return the context.

        ``steps >= 0`` limits the number of nodes run; the node over budget is recorded, not run,
        and the context ends stopped. Raises :class:`GraphNotFoundError` for an unknown id,
        ``TaskError``/``ConditionError`` wrapping failures, other ``FlowError``s unchanged.
        """
        steps = _checked_eval_arguments(graph, ctx, steps)
        target = self.get_graph_or_throw(graph) if isinstance(graph, str) else graph
        context = ctx if ctx is not None else FlowContext.of()
        exchanger = FlowExchanger(target, self, self.get_driver(target), context, steps=steps)
        self.eval_exchanger(target, exchanger)
        return context

    def eval_exchanger(self, graph: Graph, exchanger: FlowExchanger) -> None:
        """Evaluate ``graph`` with a prepared exchanger (custom driver, ``reverting=False`` to
        walk from the start node without resuming). Used for sub-graphs and by the workflow
        layer."""
        context = exchanger.context
        start_node = context.trace.last_node(graph)
        interceptors = () if exchanger.silent else self._interceptors
        saved = context.exchanger
        context.exchanger = exchanger
        context._set_stopped(False)
        try:
            if not interceptors:  # nothing to chain: walk at once
                Walk(exchanger, interceptors, start_node).run(start_node.graph.start)
            else:
                FlowInvocation(
                    exchanger,
                    start_node,
                    interceptors,
                    lambda inv: Walk(inv.exchanger, interceptors, inv.start_node).run(
                        inv.start_node.graph.start
                    ),
                ).invoke()
        except RecursionError as exc:
            # Evaluations nested until Python's stack ran out (sub-graph calls alone stop at
            # max_depth): an interceptor, task or driver evaluating a graph inside one that
            # leads back to it. Converted where the stack has room again (an outer frame).
            raise _nested_too_deep(graph, exchanger) from exc
        finally:
            context.exchanger = saved


def _nested_too_deep(graph: Graph, exchanger: FlowExchanger) -> FlowError:
    instance_id = exchanger.instance_to_name
    where = f" (instance {safe_repr(instance_id)})" if instance_id else ""
    return FlowError(
        f"Evaluations of graph {graph.id!r} nest deeper than Python's stack allows{where}: an "
        "interceptor, task or driver evaluates a graph inside an evaluation that leads back "
        "to it (sys.setrecursionlimit raises the limit)"
    )


#: What a walk calls on a driver and on an interceptor.
_DRIVER_HOOKS = ("on_node_start", "on_node_end", "handle_condition", "handle_task")
_INTERCEPTOR_HOOKS = ("intercept_flow", "on_node_start", "on_node_end")


def _checked_eval_arguments(graph: object, ctx: object, steps: object) -> int:
    """``steps`` as an ``int``; an :class:`InvalidArgumentTypeError` (a ``TypeError``) naming
    the argument and the instance, instead of an ``AttributeError`` from deep inside the
    walk."""
    if ctx is not None and not isinstance(ctx, FlowContext):
        raise InvalidArgumentTypeError("ctx", ctx, "a FlowContext or None")
    instance_id = None if ctx is None else ctx.instance_id
    if not isinstance(graph, Graph | str):
        raise InvalidArgumentTypeError(
            "graph", graph, "a Graph or a graph id", instance_id=instance_id
        )
    try:
        if isinstance(steps, bool):
            raise TypeError
        return operator.index(steps)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentTypeError(
            "steps", steps, "an integer", instance_id=instance_id
        ) from None


__all__ = ["FlowEngine"]
