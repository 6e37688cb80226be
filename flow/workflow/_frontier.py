"""Computing an instance's aggregate — open tasks, lineage, status — from its node states.

The open tasks are the frontier of a dry walk in which every human node counts as operatable
(so the frontier holds for every identity at once): no task code runs, nothing is written (the
walk's writes go to an overlay), the caller's trace is untouched. The status follows from the
frontier, from whether the walk reached the root graph's END and from the stored status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from flow._graph_memo import GraphMemo
from flow.context import FlowContext
from flow.driver import SimpleFlowDriver, names_nothing
from flow.errors import GraphNotFoundError
from flow.node_type import NodeType
from flow.workflow._intent import INTENT_KEY, IntentType, WorkflowIntent
from flow.workflow._overlay import OverlayRepository
from flow.workflow.aggregate import (
    LINEAGE_LIMIT,
    IndexedTask,
    IndexRead,
    InstanceIndex,
    InstanceStatus,
    utc_now,
)
from flow.workflow.controllers import candidates_of
from flow.workflow.driver import WorkflowDriver
from flow.workflow.repository import key_of, state_key
from flow.workflow.states import TaskAction, TaskState

if TYPE_CHECKING:
    from flow.exchanger import FlowExchanger
    from flow.graph import Graph, Node
    from flow.workflow.controllers import StateController
    from flow.workflow.executor import WorkflowExecutor

_WAITING = int(TaskState.WAITING)
_TERMINATED = int(TaskState.TERMINATED)
_FORWARDS = (TaskAction.FORWARD, TaskAction.FORWARD_JUMP)
_BACKS = (TaskAction.BACK, TaskAction.BACK_JUMP)


class _Everyone:
    """The executor's controller, except that every human node is operatable."""

    __slots__ = ("inner",)

    def __init__(self, inner: StateController) -> None:
        self.inner = inner

    def is_operatable(self, ctx: FlowContext, node: Node) -> bool:
        return True

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool:
        return self.inner.is_auto_forward(ctx, node)


class _FrontierDriver(WorkflowDriver):
    """A dry workflow driver that notes whether the walk reached the root graph's END."""

    root: Graph | None = None
    reached_end = False
    #: Whether a sub-graph call whose graph the engine lacks fails the walk
    #: (``GraphNotFoundError``, as a real walk's does) instead of being left to the real walks.
    every_sub_graph = False

    def on_node_end(self, exchanger: FlowExchanger, node: Node) -> None:
        super().on_node_end(exchanger, node)
        if node.type == NodeType.END and node.graph is self.root:
            self.reached_end = True

    def _dry_auto(
        self, exchanger: FlowExchanger, intent: WorkflowIntent, node: Node, state: TaskState
    ) -> None:
        """A node calling a sub-graph that has not completed: walk the sub-graph (dry, as
        the rest). The call completes when that walk reaches the sub-graph's END — as a real
        walk's would — and the walk goes on to the tasks after it; else the branch ends
        there. (A dry walk that passed the call as if completed would list the tasks after
        it while the sub-graph still runs; one that stopped at it would list none once the
        sub-graph is done, until a claim on the root graph completed the call.)"""
        called = self._called_graph(node)
        if called is not None and exchanger.engine.get_graph(called) is None:
            if self.every_sub_graph:
                raise GraphNotFoundError(called, instance_id=exchanger.context.instance_id)
            called = None  # left to the real walks to report: the other branches still count
        if called is None:
            super()._dry_auto(exchanger, intent, node, state)
        else:  # its state changes go to the walk's overlay, as every state change here
            self._run_task(exchanger, intent, node, state)

    def _called_graph(self, node: Node) -> str | None:
        """The id of the sub-graph a real walk runs at ``node`` (``task: "#id"`` under the
        standard driver; a driver of the application's own may run anything there)."""
        task = node.task
        if (
            isinstance(task, str)
            and task.startswith("#")
            and not names_nothing(task)
            and type(self.driver).post_handle_task is SimpleFlowDriver.post_handle_task
        ):
            return task[1:]
        return None


@dataclass(frozen=True, kw_only=True)
class Frontier:
    """The open task nodes (discovery order, each node id once) — of the root graph and of the
    sub-graphs it calls — and whether the walk reached the root graph's END."""

    nodes: tuple[Node, ...]
    reached_end: bool


def probe_context(ctx: FlowContext, data: Mapping[str, object] | None = None) -> FlowContext:
    """A context holding ``ctx``'s data (or ``data``), without its intent, for a walk that
    must not touch ``ctx``'s trace or stop flag."""
    source = ctx.data if data is None else data
    kept = {k: v for k, v in source.items() if k not in ("context", "instanceId", INTENT_KEY)}
    return FlowContext(ctx.instance_id, kept, connection=ctx.connection)


def frontier(
    executor: WorkflowExecutor,
    graph: Graph,
    ctx: FlowContext,
    data: Mapping[str, object] | None = None,
    *,
    every_sub_graph: bool = False,
) -> Frontier:
    """The frontier of ``graph`` for ``ctx.instance_id`` with the states the repository holds
    now (inside the caller's unit of work), its gateways deciding on ``data`` (default: the
    context's own). ``every_sub_graph``: a call of a sub-graph the engine lacks raises
    ``GraphNotFoundError`` (a reindex cannot know the open tasks without it)."""
    overlay = OverlayRepository(executor.state_repository, ctx)
    driver = _FrontierDriver(
        executor.engine.get_driver(graph),
        _Everyone(executor.state_controller),
        overlay,
        dry_run=True,
    )
    driver.root = graph
    driver.every_sub_graph = every_sub_graph
    # The graph driver's own node callbacks are for real walks (they may log or count).
    driver._inner_on_start = driver._inner_on_end = False
    # It follows every branch (a claim's walk stops at the first task): the executor's
    # per-walk budget plus two passes over the graph for the branches a claim leaves. (The
    # budget once grew with the graph — per node of it — and let a cycle no task breaks, or
    # an exponential fan of splits, run for a minute holding the row lock.)
    budget = executor.max_steps
    steps = None if budget is None else budget + 2 * len(graph.nodes)
    intent = executor._walk(
        graph, probe_context(ctx, data), IntentType.FIND_NEXT_TASKS, driver, max_steps=steps
    )
    # The task table keys an instance's open task by its node id: the root graph's tasks
    # come first, and a sub-graph's task whose node id one listed before has is left out.
    found = [task.node for task in intent.next_tasks]
    seen: set[str] = set()
    nodes: list[Node] = []
    for node in [n for n in found if n.graph is graph] + [n for n in found if n.graph is not graph]:
        if node.id not in seen:
            seen.add(node.id)
            nodes.append(node)
    return Frontier(nodes=tuple(nodes), reached_end=driver.reached_end)


#: The node types a walk passes without splitting: a start, an activity or an end flows to at
#: most one node (when it has one link), an exclusive gateway to one of its links.
_ONE_PATH_TYPES = frozenset({NodeType.START, NodeType.END, NodeType.ACTIVITY, NodeType.EXCLUSIVE})
_ONE_PATH: GraphMemo[bool] = GraphMemo()


def one_path(graph: Graph) -> bool:
    """Whether every walk of ``graph`` follows a single path: only start, end, activity and
    exclusive gateway nodes, none but the gateways with more than one link, and no sub-graph
    call (worked out once per graph object: graphs are immutable)."""
    found = _ONE_PATH.get(graph)
    if found is None:
        found = _ONE_PATH.put(graph, all(_on_one_path(node) for node in graph.nodes.values()))
    return found


def _on_one_path(node: Node) -> bool:
    if node.type not in _ONE_PATH_TYPES:
        return False
    if node.type != NodeType.EXCLUSIVE and len(node.next_link_list) > 1:
        return False
    task = node.task
    return not (isinstance(task, str) and task.startswith("#"))


def walked_frontier(
    executor: WorkflowExecutor,
    graph: Graph,
    ctx: FlowContext,
    driver: WorkflowDriver,
    stop: Node | None,
) -> Frontier | None:
    """The frontier an operation's last walk of ``graph`` already shows — ``stop``, the human
    task it stopped at, or the root END it reached — so that the dry walk of :func:`frontier`
    need not run again; ``None`` when it must.

    That holds when the dry walk would take the very same path: the graph follows one path
    (:func:`one_path`: a walk ending at a task has no other branch open), and nothing but the
    states and variables the dry walk also sees decided it — no interceptor (the dry walk is
    silent), no node callbacks of the graph's driver (the dry walk skips them), and no task
    code nor a condition that may act run on the way (``WorkflowDriver.repeatable``: either
    may have changed a variable a gateway passed before decided on; the submitted task's own
    code ran before the walk, which saw its changes). A condition that only reads variables
    decides the same on the same variables.
    """
    if (
        stop is None
        or stop.graph is not graph
        or not driver.repeatable
        or executor.engine.interceptors
        or not one_path(graph)
    ):
        return None
    if stop.type == NodeType.END:
        return Frontier(nodes=(), reached_end=True)
    if stop.type == NodeType.ACTIVITY and not executor.state_controller.is_auto_forward(ctx, stop):
        return Frontier(nodes=(stop,), reached_end=False)
    return None


def build_index(
    executor: WorkflowExecutor,
    graph: Graph,
    ctx: FlowContext,
    read: IndexRead,
    states: Mapping[str, int],
    *,
    submitted: Node | None = None,
    action: TaskAction | None = None,
    reopened: Mapping[Node, tuple[str, ...]] | None = None,
    now: datetime | None = None,
    passed: tuple[Node, ...] = (),
    data: Mapping[str, object] | None = None,
    every_sub_graph: bool = False,
    walked: Frontier | None = None,
) -> InstanceIndex:
    """The aggregate of the instance after an operation (states as the unit holds them now).

    Tasks still open keep their lineage and opening time; a task opened by a forward of
    ``submitted`` gets ``submitted``'s lineage plus ``submitted``; one re-opened by a back gets
    the part of that lineage before it; ``reopened`` sets lineages explicitly (send-back).
    ``now`` (default: the clock) stamps tasks opened and a status closed by it (a reindex
    passes the time the stored states were written). ``passed``: the tasks a FORWARD_JUMP
    forwarded, ``submitted`` first — a task it opens has them all in its lineage. ``data``:
    the variables the gateways decide on (default: the context's). ``every_sub_graph``: see
    :func:`frontier`. ``walked``: the frontier the operation's own walk showed
    (:func:`walked_frontier`), used instead of a dry walk.
    """
    stored = read.stored
    if (
        stored is not None
        and stored.status == InstanceStatus.WITHDRAWN
        and action != TaskAction.RESTART
    ):
        return stored
    found = walked
    if found is None:
        found = frontier(executor, graph, ctx, data, every_sub_graph=every_sub_graph)
    # Tasks keep lineage and opening time only within one graph (a RESTART may start the
    # instance over as another graph's, whose node ids may repeat the old one's).
    same_graph = stored is not None and stored.graph_id == graph.id
    before = _by_node(stored) if same_graph and stored is not None else {}
    now = utc_now() if now is None else now
    controller = executor.state_controller
    tasks = []
    for node in found.nodes:
        state = TaskState.WAITING if states.get(state_key(node)) == _WAITING else TaskState.UNKNOWN
        kept = before.get((node.graph.id, node.id))
        if reopened is not None and node in reopened:
            lineage, opened_at = reopened[node], now
        elif kept is not None:
            lineage, opened_at = kept.lineage, kept.opened_at
        else:
            lineage, opened_at = _opened_lineage(node, submitted, action, before, passed), now
        tasks.append(
            IndexedTask(
                node_id=node.id,
                node_title=node.title or node.id,
                state=state,
                candidates=candidates_of(controller, node),
                lineage=lineage,
                opened_at=opened_at,
                graph_id=None if node.graph is graph else node.graph.id,
            )
        )
    status = _status(bool(tasks), found.reached_end, states)
    finished = None
    if status.is_closed:
        same = stored is not None and stored.status == status and stored.finished_at is not None
        finished = stored.finished_at if same and stored is not None else now
    return InstanceIndex(graph_id=graph.id, status=status, finished_at=finished, tasks=tuple(tasks))


def _status(has_tasks: bool, reached_end: bool, states: Mapping[str, int]) -> InstanceStatus:
    if has_tasks:
        return InstanceStatus.RUNNING
    if reached_end:
        return InstanceStatus.COMPLETED
    if _TERMINATED in states.values():
        return InstanceStatus.TERMINATED
    return InstanceStatus.RUNNING


def _by_node(index: InstanceIndex) -> dict[tuple[str, str], IndexedTask]:
    """The tasks of ``index`` by (graph id, node id)."""
    return {(t.graph_of(index), t.node_id): t for t in index.tasks}


def _opened_lineage(
    node: Node,
    submitted: Node | None,
    action: TaskAction | None,
    before: Mapping[tuple[str, str], IndexedTask],
    passed: tuple[Node, ...] = (),
) -> tuple[str, ...]:
    """The lineage of ``node``'s task, opened by ``submitted``'s ``action``. A lineage holds
    node ids of one graph: a task opened across a sub-graph's boundary starts a new one."""
    if submitted is None or action is None or submitted.graph is not node.graph:
        return ()
    source = before.get((submitted.graph.id, submitted.id))
    base = source.lineage if source is not None else ()
    if action in _FORWARDS:
        chain = tuple(n.id for n in passed) or (submitted.id,)
        return (*base, *chain)[-LINEAGE_LIMIT:]
    if action in _BACKS and node.id in base:
        cut = len(base) - 1 - base[::-1].index(node.id)
        return base[:cut]
    return ()


def claimed_only(read: IndexRead, states: Mapping[str, int]) -> InstanceIndex | None:
    """The stored aggregate with states updated, when the only change since ``read`` is open
    tasks becoming WAITING (a claim): the frontier is then unchanged, no walk is needed.
    ``None`` when anything else changed."""
    stored = read.stored
    if stored is None:
        return None
    before = read.states
    keys = [key_of(t.graph_of(stored), t.node_id) for t in stored.tasks]
    open_keys = set(keys)
    if before.keys() - states.keys():
        return None
    for key, code in states.items():
        if before.get(key) != code and (code != _WAITING or key not in open_keys):
            return None
    tasks = tuple(
        t
        if t.state == TaskState.WAITING or states.get(key) != _WAITING
        else replace(t, state=TaskState.WAITING)
        for t, key in zip(stored.tasks, keys, strict=True)
    )
    return InstanceIndex(
        graph_id=stored.graph_id,
        status=stored.status,
        finished_at=stored.finished_at,
        tasks=tasks,
    )


__all__ = [
    "Frontier",
    "build_index",
    "claimed_only",
    "frontier",
    "one_path",
    "probe_context",
    "walked_frontier",
]
