"""Per-evaluation state shared by the engine and the driver (the reference's ``FlowExchanger``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from flow.errors import GraphDefinitionError, StepBudgetError

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.driver import FlowDriver
    from flow.engine import FlowEngine
    from flow.graph import Graph, Node

UNLIMITED = sys.maxsize
"""The step budget of an evaluation that has none (``_StepCounter.limit``)."""


class _StepCounter:
    """Steps spent so far; one instance is shared by an evaluation and its sub-graph copies.

    ``count`` is the ``steps=`` budget's (recorded nodes; the eval stops past it); ``left``
    counts down from ``limit`` (the step budget that raises :class:`StepBudgetError`;
    unlimited unless the caller sets one) once per node run and per loop iteration.
    """

    __slots__ = ("count", "left", "limit")

    def __init__(self, limit: int = UNLIMITED) -> None:
        self.count = 0
        self.limit = limit
        self.left = limit


class FlowExchanger:
    """State of one evaluation: flags, step budget, join counters and loop stacks.

    Join counters and loop stacks (``counter_*``/``stack``) live as long as the exchanger, one
    evaluation; they are never persisted. ``reverting`` starts true: the engine walks from the
    start node without running anything until it reaches the graph's last recorded node. Set it
    to false before :meth:`FlowEngine.eval_exchanger` to walk the graph from its start instead.
    """

    __slots__ = (
        "_counters",
        "_stacks",
        "_step_counter",
        "_stopped",
        "context",
        "depth",
        "driver",
        "engine",
        "graph",
        "interrupted",
        "reverting",
        "silent",
        "steps",
    )

    def __init__(
        self,
        graph: Graph,
        engine: FlowEngine,
        driver: FlowDriver,
        context: FlowContext,
        *,
        steps: int = -1,
        max_steps: int | None = None,
        step_counter: _StepCounter | None = None,
    ) -> None:
        self.graph = graph
        self.engine = engine
        self.driver = driver
        self.context = context
        self.steps = steps
        if step_counter is None:
            step_counter = _StepCounter(UNLIMITED if max_steps is None else max_steps)
        self._step_counter = step_counter
        #: How many sub-graph calls deep this exchanger's graph runs (0 for the root graph).
        self.depth = 0
        # Made on first use: only parallel, inclusive and loop nodes need them.
        self._counters: dict[tuple[str, str], int] | None = None
        self._stacks: dict[tuple[str, str], list[Any]] | None = None
        self.interrupted = False
        self._stopped = False
        self.reverting = True
        # A silent evaluation calls no interceptor: the workflow layer's dry walks (finding a
        # task record's target) must not look like real evaluations to user interceptors.
        self.silent = False

    def copy(self, graph: Graph) -> FlowExchanger:
        """An exchanger for ``graph`` sharing context, driver and step counter, with fresh
        flags, counters and stacks (how sub-graphs are evaluated)."""
        copied = FlowExchanger(
            graph,
            self.engine,
            self.driver,
            self.context,
            steps=self.steps,
            step_counter=self._step_counter,
        )
        copied.silent = self.silent
        copied.depth = self.depth
        return copied

    # -- control -----------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the whole evaluation; ``context.is_stopped`` reports it after the eval."""
        self._stopped = True
        self.context._set_stopped(True)

    @property
    def is_stopped(self) -> bool:
        return self._stopped or self.context._stopped

    def interrupt(self) -> None:
        """End the current branch; the flag is consumed by the engine's next check."""
        self.interrupted = True

    @property
    def is_interrupted(self) -> bool:
        return self.interrupted

    @property
    def instance_to_name(self) -> str | None:
        """The instance this evaluation runs for, to name in its errors (an engine
        evaluation may have none: ``None``)."""
        instance_id = self.context.instance_id
        return instance_id if isinstance(instance_id, str) and instance_id else None

    def branch_ends(self) -> bool:
        """The engine's check after each step and callback: true when the evaluation is
        stopped, or when the current branch was interrupted (the interrupt is consumed: it ends
        this branch only). One call, as it runs several times per node; the stop test is
        :attr:`is_stopped`'s, written out to spare a property call on that path."""
        if self._stopped or self.context._stopped:
            return True
        if self.interrupted:
            self.interrupted = False
            return True
        return False

    # -- trace -------------------------------------------------------------------------
    def record_clear(self) -> None:
        """Forget every recorded node so the next evaluation walks from the start."""
        self.context.trace.clear()

    # -- steps -------------------------------------------------------------------------
    @property
    def step_count(self) -> int:
        return self._step_counter.count

    def next_step(self) -> bool:
        """Spend one step; false when the budget (``steps >= 0``) is exceeded."""
        if self.steps < 0:
            return True
        self._step_counter.count += 1
        return self._step_counter.count <= self.steps

    def prev_step(self) -> None:
        """Give one step back (a sub-graph's start node re-spends its caller's step)."""
        if self.steps >= 0:
            self._step_counter.count -= 1

    @property
    def max_steps(self) -> int | None:
        """The step budget that raises :class:`StepBudgetError` (``None``: unlimited)."""
        limit = self._step_counter.limit
        return None if limit == UNLIMITED else limit

    def reset_steps(self) -> None:
        """Start a new walk's step budget (the workflow executor walks several times per
        operation with copies of one exchanger; each walk gets the whole budget)."""
        self._step_counter.count = 0
        self._step_counter.left = self._step_counter.limit

    def over_budget(self, node: Node) -> None:
        """Raise :class:`StepBudgetError` for ``node`` (the walk calls this once the budget's
        countdown went below zero; the countdown itself is inlined in the walk's loop)."""
        raise StepBudgetError(
            graph_id=node.graph.id,
            node_id=node.id,
            instance_id=self.context.instance_id,
            budget=self._step_counter.limit,
        )

    # -- per-eval join state -----------------------------------------------------------
    def counter_incr(self, graph: Graph, key: str) -> int:
        counters = self._join_counters()
        slot = (graph.id, key)
        value = counters.get(slot, 0) + 1
        counters[slot] = value
        return value

    def counter_set(self, graph: Graph, key: str, value: int) -> None:
        self._join_counters()[(graph.id, key)] = value

    def _join_counters(self) -> dict[tuple[str, str], int]:
        if self._counters is None:
            self._counters = {}
        return self._counters

    def stack(self, graph: Graph, key: str) -> list[Any]:
        """The per-graph stack ``key`` (created empty on first use)."""
        if self._stacks is None:
            self._stacks = {}
        return self._stacks.setdefault((graph.id, key), [])

    # -- sub-graphs --------------------------------------------------------------------
    def run_graph(self, graph: Graph) -> None:
        """Evaluate ``graph`` as a sub-graph of this evaluation (same context, shared steps).

        If the sub-graph neither reached its END nor stopped, the calling branch is interrupted.
        Sub-graphs calling sub-graphs nest at most ``engine.max_depth`` deep (a graph that
        calls itself, directly or not, would otherwise recurse until Python's stack ends):
        deeper raises :class:`GraphDefinitionError` naming the calling graph.
        """
        limit = self.engine.max_depth
        if self.depth >= limit:
            raise GraphDefinitionError(
                f"Sub-graph {graph.id!r} called from graph {self.graph.id!r} would nest more than "
                f"{limit} sub-graphs deep (does a graph call itself?); limit: "
                "FlowEngine(max_depth=...)",
                graph_id=self.graph.id,
            )
        self.prev_step()
        child = self.copy(graph)
        child.depth = self.depth + 1
        self.engine.eval_exchanger(graph, child)
        if not self.is_stopped and not self.context.trace.is_end(graph.id):
            self.interrupt()

    def __repr__(self) -> str:
        return f"FlowExchanger(graph={self.graph.id!r}, reverting={self.reverting})"


__all__ = ["FlowExchanger"]
