"""The workflow executor: claim, find and submit human tasks of flow instances.

Every operation walks the graph from its start through a :class:`WorkflowDriver`, reading and
writing node states in the state repository (reference ``WorkflowExecutorDefault``). Operations
on one instance are serialized in this process; a repository with ``unit_of_work`` wraps each
operation in one unit of work (a transaction for ``flow_sqla``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, suppress
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from flow._expression.limits import OperationBudget
from flow._hooks import check_hooks
from flow._text import safe_repr
from flow._walk import call_task
from flow.context import FlowContext
from flow.errors import GraphNotFoundError, NodeNotFoundError, SnapshotError
from flow.exchanger import FlowExchanger
from flow.graph import Graph, Node
from flow.node_type import NodeType
from flow.workflow._arguments import (
    check_context,
    check_filter,
    check_message,
    check_node,
    check_page,
    check_sendable,
    check_task,
    checked_identities,
    checked_instance_id,
    checked_status,
    identity_text,
)
from flow.workflow._frontier import Frontier, build_index, claimed_only, walked_frontier
from flow.workflow._intent import INTENT_KEY, IntentType, WorkflowIntent
from flow.workflow._locks import INSTANCE_LOCKS
from flow.workflow._overlay import OverlayRepository
from flow.workflow._root_graph import (
    called_graphs,
    graphs_called_by,
    root_by_states,
    states_elsewhere,
    sub_graphs,
)
from flow.workflow._send_back import send_back_target
from flow.workflow.aggregate import (
    IndexedTask,
    IndexRead,
    InstanceIndex,
    InstanceStatus,
    InstanceSummary,
    OpenTask,
    SupportsTaskIndex,
    utc_now,
)
from flow.workflow.controllers import (
    ActorStateController,
    BlockStateController,
    identities_of,
)
from flow.workflow.driver import WorkflowDriver
from flow.workflow.errors import (
    GraphMismatchError,
    IndexUnavailableError,
    InstanceClosedError,
    InvalidActionError,
    InvalidArgumentTypeError,
    SendBackError,
)
from flow.workflow.records import TaskRecord, form_id_of
from flow.workflow.repository import InMemoryStateRepository, key_of, state_key
from flow.workflow.states import TaskAction, TaskState
from flow.workflow.task import Task

if TYPE_CHECKING:
    from flow.engine import FlowEngine
    from flow.workflow.controllers import StateController
    from flow.workflow.records import TaskRecorder
    from flow.workflow.repository import StateRepository

_ASSIGNEE_KEYS = ("actor",)
#: States of a task that is the current one (a record's target) rather than one passed.
_CURRENT_STATES = (TaskState.WAITING, TaskState.UNKNOWN)
#: The states a task that is no longer open has.
_SETTLED = (int(TaskState.COMPLETED), int(TaskState.TERMINATED))
_WAITING_CODE = int(TaskState.WAITING)


#: What the executor calls on each object it is built with (see WorkflowExecutor.__init__).
_ENGINE_HOOKS = ("get_graph", "get_graph_or_throw", "get_driver", "eval_exchanger")
_CONTROLLER_HOOKS = ("is_operatable", "is_auto_forward")
_REPOSITORY_HOOKS = ("vars_get", "state_get", "state_put", "state_remove", "state_clear")
_RECORDER_HOOKS = ("record",)


class WorkflowExecutor:
    """Claims, finds and submits tasks. Defaults: :class:`BlockStateController` and a fresh
    :class:`InMemoryStateRepository`; ``recorder`` (optional) receives one
    :class:`TaskRecord` per successful submit, inside the submit's unit of work.

    ``max_steps`` is the step budget of every walk an operation makes: a walk that passes more
    nodes (and loop iterations) than that raises :class:`~flow.errors.StepBudgetError` naming
    the graph, node and instance, and the operation's unit of work ends with the error (a
    ``flow_sqla`` transaction rolls back and releases the instance row lock). Walks pass every
    node they have completed, so an edge back to an earlier task, or a cycle of automatic
    nodes, would otherwise go round forever while holding that lock. ``None`` means unlimited.

    An ``engine``, ``state_controller``, ``state_repository`` or ``recorder`` without the
    methods the executor calls on it (``None`` for the engine, a class instead of an instance,
    an ``Engine`` for the ``FlowEngine``) raises :class:`InvalidArgumentTypeError` here.
    """

    #: Default of ``max_steps``: far above any acyclic graph's walk (a walk passes each node
    #: once per incoming branch), small enough to end a runaway walk within about a second.
    MAX_STEPS = 100_000

    def __init__(
        self,
        engine: FlowEngine,
        state_controller: StateController | None = None,
        state_repository: StateRepository | None = None,
        *,
        recorder: TaskRecorder | None = None,
        max_steps: int | None = MAX_STEPS,
    ) -> None:
        # Checked here, once: a wrong object (None or an Engine for the FlowEngine, a class
        # for an instance) failed every later operation with a bare AttributeError, or as a
        # TaskError blaming the graph's first task.
        check_hooks("engine", engine, _ENGINE_HOOKS, "a FlowEngine")
        for name, value, hooks, expected in (
            ("state_controller", state_controller, _CONTROLLER_HOOKS, "a StateController"),
            ("state_repository", state_repository, _REPOSITORY_HOOKS, "a StateRepository"),
            ("recorder", recorder, _RECORDER_HOOKS, "a TaskRecorder"),
        ):
            if value is not None:
                check_hooks(name, value, hooks, f"{expected} or None")
        self.engine = engine
        self.max_steps = max_steps
        self.state_controller: StateController = (
            state_controller if state_controller is not None else BlockStateController()
        )
        self.state_repository: StateRepository = (
            state_repository if state_repository is not None else InMemoryStateRepository()
        )
        self.recorder = recorder
        # A repository keeping the task index whose snapshots change routing variables needs
        # this executor's walk to keep it (flow_sqla's save_snapshot; see index_snapshot).
        index_snapshots_with = getattr(self.state_repository, "index_snapshots_with", None)
        if callable(index_snapshots_with):
            index_snapshots_with(self)

    @property
    def max_steps(self) -> int | None:
        """The step budget of every walk (see the class docstring); ``None``: unlimited."""
        return self._max_steps

    @max_steps.setter
    def max_steps(self, value: int | None) -> None:
        # Checked wherever it is set, the constructor or a later assignment: a string failed
        # every walk with a raw TypeError; 0, a negative count or a bool refused every
        # operation with StepBudgetError — both long after the budget was set.
        if value is not None and (type(value) is not int or value < 1):
            raise ValueError(f"max_steps must be a positive int or None, got {safe_repr(value)}")
        self._max_steps = value

    # -- queries -----------------------------------------------------------------------
    def claim_task(self, graph: Graph | str, ctx: FlowContext) -> Task | None:
        """The task this context may operate now (WAITING), or ``None`` when the flow reached
        END or nothing is operatable. Writes states as a side effect: automatic nodes reached
        run and complete, the claimed task becomes WAITING. Raises ``GraphNotFoundError``, and
        with the task index :class:`GraphMismatchError` when the instance runs another graph
        (so do the finds and the submits, a RESTART excepted)."""
        check_context(ctx)
        root = self._graph(graph)
        self._check_for_index(root, ctx)
        with self._operation(ctx, lock=False):
            index = self._indexing()
            if index is None:
                return self._walk(root, ctx, IntentType.CLAIM_TASK).task
            read, indexed = self._indexed_read(index, root, ctx)
            if _withdrawn(read):
                return None
            driver = self._driver(root)
            intent = self._walk(root, ctx, IntentType.CLAIM_TASK, driver)
            task = intent.task
            # A claim's walk ends at the first task on each branch, as a dry walk's does.
            stop = intent.next_tasks[0].node if len(intent.next_tasks) == 1 else None
            walked = walked_frontier(self, root, ctx, driver, stop) if indexed is root else None
            self._index_end(index, indexed, ctx, read, walked=walked)
            return task

    def find_task(self, graph: Graph | str, ctx: FlowContext) -> Task | None:
        """The current task whoever may operate it (UNKNOWN when this context may not), or the
        TERMINATED task the flow stopped at, or the last task passed; ``None`` if none — and,
        with the task index, for a WITHDRAWN instance, without walking (a walk would run the
        automatic nodes it reaches: a withdrawn instance accepts nothing)."""
        check_context(ctx)
        root = self._graph(graph)
        with self._operation(ctx, lock=False):
            index = self._indexing()
            if index is None:
                return self._walk(root, ctx, IntentType.FIND_TASK).task
            read, indexed = self._indexed_read(index, root, ctx)
            if _withdrawn(read):
                return None
            task = self._walk(root, ctx, IntentType.FIND_TASK).task
            self._index_end(index, indexed, ctx, read)
            return task

    def find_next_tasks(self, graph: Graph | str, ctx: FlowContext) -> list[Task]:
        """Every frontier task in discovery order: WAITING when this context may operate it,
        else UNKNOWN (parallel branches each contribute theirs); none for a WITHDRAWN
        instance (with the task index), as for :meth:`find_task`."""
        check_context(ctx)
        root = self._graph(graph)
        with self._operation(ctx, lock=False):
            index = self._indexing()
            if index is None:
                return list(self._walk(root, ctx, IntentType.FIND_NEXT_TASKS).next_tasks)
            read, indexed = self._indexed_read(index, root, ctx)
            if _withdrawn(read):
                return []
            tasks = list(self._walk(root, ctx, IntentType.FIND_NEXT_TASKS).next_tasks)
            self._index_end(index, indexed, ctx, read)
            return tasks

    def get_state(self, node: Node, ctx: FlowContext) -> TaskState:
        """The stored state of ``node`` for ``ctx.instance_id`` (UNKNOWN when none)."""
        check_context(ctx)
        check_node(node, ctx)
        return self.state_repository.state_get(ctx, node)

    # -- submits -----------------------------------------------------------------------
    def submit_task(
        self, task: Task, action: TaskAction, ctx: FlowContext, *, message: str | None = None
    ) -> None:
        """Apply ``action`` to ``task``'s node (no check that it is WAITING: see
        :meth:`submit_task_if_waiting`). Raises :class:`InvalidActionError` for UNKNOWN."""
        check_context(ctx)
        check_message(message, ctx)
        check_task(task, ctx)
        self._submit(task.root_graph, task.node, action, ctx, message, check_waiting=False)

    def submit_task_at(
        self,
        graph: Graph | str,
        node: Node | str,
        action: TaskAction,
        ctx: FlowContext,
        *,
        message: str | None = None,
    ) -> None:
        """Apply ``action`` to a node given by object or id. Raises ``GraphNotFoundError``,
        ``NodeNotFoundError``, :class:`InvalidActionError` and, with the task index,
        :class:`GraphMismatchError` when the instance runs another graph (a RESTART may start
        it over as ``graph``'s)."""
        check_context(ctx)
        check_message(message, ctx)
        root = self._graph(graph)
        target = node if isinstance(node, Node) else root.get_node_or_throw(node)
        self._submit(root, target, action, ctx, message, check_waiting=False)

    def submit_task_if_waiting(
        self, task: Task | None, action: TaskAction, ctx: FlowContext, *, message: str | None = None
    ) -> bool:
        """Submit only if ``task`` is WAITING — checked on the task, then again under the
        instance lock against the repository together with ``is_operatable``. True if done;
        False, writing nothing, for a task claimed for another instance than ``ctx``'s."""
        check_context(ctx)
        check_message(message, ctx)
        if task is None:
            return False
        check_task(task, ctx)
        if task.state != TaskState.WAITING or _of_another_instance(task, ctx):
            return False
        return self._submit(task.root_graph, task.node, action, ctx, message, check_waiting=True)

    # -- the approval aggregate: queries ---------------------------------------------------
    def inbox(
        self,
        ctx: FlowContext,
        *,
        graph_id: str | None = None,
        limit: int = 50,
        after: int | None = None,
    ) -> list[OpenTask]:
        """Open tasks of RUNNING instances that ``ctx`` may operate (the controller's
        ``identities(ctx)`` meet the task's candidates), oldest first, each once. Page with
        ``after`` = the last task's ``cursor``. Raises :class:`IndexUnavailableError` when the
        repository keeps no task index, :class:`InvalidQueryError` for a bad limit/cursor
        or identities that are not strings or more than ``MAX_IDENTITIES`` distinct ones. On
        SQL the page is read on ``ctx.connection`` when it holds one: it sees your
        transaction's own uncommitted steps."""
        check_context(ctx)
        index = self._require_index("inbox")
        check_page(limit, after)
        check_filter("graph_id", graph_id)
        identities = checked_identities(identities_of(self.state_controller, ctx))
        if not identities:
            return []
        return index.index_inbox(
            identities, graph_id=graph_id, limit=limit, after=after, connection=ctx.connection
        )

    def open_tasks(self, instance_id: str, *, connection: object = None) -> list[OpenTask]:
        """The open tasks of one instance (empty when it has none or is unknown), oldest
        first. ``connection``: as for :meth:`status`. Raises :class:`IndexUnavailableError`,
        :class:`InvalidInstanceIdError`."""
        index = self._require_index("open_tasks")
        return index.index_open_tasks(checked_instance_id(instance_id), **_on(connection))

    def status(self, instance_id: str, *, connection: object = None) -> InstanceStatus | None:
        """The stored status of one instance; ``None`` when it is unknown (or was written
        before the index existed and not reindexed). On SQL, ``connection`` (your transaction's
        ``Connection``) runs the read there: it sees your own uncommitted steps — and, being a
        plain read, at REPEATABLE READ nothing committed after your transaction's snapshot —
        and a request that already holds a pooled connection does not wait for a second one
        (docs/tasks.md, Queries). Raises :class:`IndexUnavailableError`,
        :class:`InvalidInstanceIdError`; on SQL ``InvalidArgumentError`` for a ``connection``
        that is not a ``Connection``."""
        index = self._require_index("status")
        return index.index_status(checked_instance_id(instance_id), **_on(connection))

    def instances(
        self,
        *,
        status: InstanceStatus | None = None,
        graph_id: str | None = None,
        creator: str | None = None,
        limit: int = 50,
        after: int | None = None,
        connection: object = None,
    ) -> list[InstanceSummary]:
        """Indexed instances, newest first, filtered by status, graph and creator. Page with
        ``after`` = the last summary's ``cursor``. ``connection``: as for :meth:`status`.
        Raises :class:`IndexUnavailableError`, :class:`InvalidQueryError`."""
        index = self._require_index("instances")
        check_page(limit, after)
        check_filter("graph_id", graph_id)
        check_filter("creator", creator)
        if status is not None:
            status = checked_status(status)
        return index.index_instances(
            status=status,
            graph_id=graph_id,
            creator=creator,
            limit=limit,
            after=after,
            **_on(connection),
        )

    # -- the approval aggregate: withdraw and send back ------------------------------------
    def withdraw(self, graph: Graph | str, ctx: FlowContext, *, message: str | None = None) -> bool:
        """Withdraw the RUNNING instance ``ctx.instance_id`` in one unit of work: every open
        task becomes TERMINATED (one history record each, action TERMINATE, assignee the
        withdrawer), the status WITHDRAWN. False, writing nothing, when the instance is unknown
        or not RUNNING. Who may withdraw is the caller's decision (see
        :attr:`InstanceSummary.creator`). Raises :class:`IndexUnavailableError`."""
        check_context(ctx)
        check_message(message, ctx)
        root = self._graph(graph)
        index = self._require_index("withdraw")
        with self._operation(ctx, lock=True):
            running = self._running_index(index, root, ctx)
            if running is None:
                return False
            _, current, _ = running
            nodes = [n for n in (self._task_node(root, t, ctx) for t in current.tasks) if n]
            for node in nodes:
                self.state_repository.state_put(ctx, node, TaskState.TERMINATED)
            withdrawn = InstanceIndex(
                graph_id=root.id,
                status=InstanceStatus.WITHDRAWN,
                finished_at=utc_now(),
                tasks=(),
            )
            index.index_write(ctx, withdrawn)
            if self.recorder is not None:
                who = self._actor(ctx)
                for node in nodes:
                    record = self._record(
                        node.graph, node, TaskAction.TERMINATE, ctx, message, node
                    )
                    self.recorder.record(ctx, _with_assignee(record, who))
        return True

    def send_back(
        self, task: Task | OpenTask | None, ctx: FlowContext, *, message: str | None = None
    ) -> bool:
        """Send ``task`` back to the human task whose submit led to it (the last node of its
        lineage), which becomes WAITING again; the task and everything that submit settled on
        the way lose their states. False, writing nothing, when the task is not open and
        WAITING for ``ctx`` (checked under the instance lock), or is another instance's.
        Raises :class:`SendBackError` (nothing written) when there is no single earlier task
        to go back to, :class:`IndexUnavailableError` without a task index — whatever the
        task, ``None`` included (as withdraw raises it for an unknown instance too): an
        application wired without the index learns it at its first call, not from a False
        that reads as "nothing to send back"."""
        check_context(ctx)
        check_message(message, ctx)
        index = self._require_index("send_back")
        if task is None:
            return False
        check_sendable(task, ctx)
        if isinstance(task, Task):
            if task.state != TaskState.WAITING or _of_another_instance(task, ctx):
                return False
            root, node = task.root_graph, task.node
        else:
            if task.instance_id != ctx.instance_id:  # another instance's task is not open here
                return False
            root = self._graph(task.graph_id)
            node = root.get_node_or_throw(task.node_id)
        with self._operation(ctx, lock=True):
            # The task may be a sub-graph's: the aggregate is the instance's root graph's.
            running = self._running_index(index, root, ctx, sub_graph=True)
            if running is None:
                return False
            read, current, root = running
            stored_task = next(
                (
                    t
                    for t in current.tasks
                    if t.node_id == node.id and t.graph_of(current) == node.graph.id
                ),
                None,
            )
            if stored_task is None or not self._still_waiting(node, ctx):
                return False
            previous, between = send_back_target(
                ctx.instance_id,
                node.graph,
                stored_task,
                current,
                lambda n: not self.state_controller.is_auto_forward(ctx, n),
                lambda n: state_key(n) in read.states,
                lambda n: graphs_called_by(self.engine, n),
            )
            repository = self.state_repository
            for settled in (node, *between):
                repository.state_remove(ctx, settled)
            repository.state_put(ctx, previous, TaskState.WAITING)
            states, _ = index.index_changes(ctx)
            fresh = build_index(
                self,
                root,
                ctx,
                IndexRead(states=read.states, stored=current),
                states,
                reopened={previous: stored_task.lineage[:-1]},
            )
            opened = {(t.graph_of(fresh), t.node_id) for t in fresh.tasks}
            back = (previous.graph.id, previous.id)
            if back not in opened or ((node.graph.id, node.id) in opened and node is not previous):
                # e.g. the task lies before P on a loop: clearing it re-opens it, not P.
                # Raising undoes the unit of work: nothing is written.
                raise SendBackError(
                    ctx.instance_id,
                    node.graph.id,
                    node.id,
                    f"going back would not make {previous.id!r} the open task again",
                )
            index.index_write(ctx, fresh)
            if self.recorder is not None:
                record = self._record(
                    node.graph, node, TaskAction.BACK_JUMP, ctx, message, previous
                )
                self.recorder.record(ctx, record)
        return True

    def index_snapshot(self, graph: Graph, ctx: FlowContext) -> None:
        """Recompute the aggregate of ``ctx.instance_id`` inside the repository's unit of work
        that stores a snapshot of it (``graph``, the states as stored, the context's variables
        replacing the stored ones): a repository keeping the task index calls it from
        ``save_snapshot`` — the open tasks route on the variables, and the repository has no
        walk of its own (an executor built with such a repository hands itself over). The
        aggregate is written with the snapshot, or not at all; a snapshot naming another graph
        than the instance's raises :class:`GraphMismatchError`. Not for applications: call
        ``save_snapshot``."""
        index = self._indexing()
        if index is None:
            return
        read = index.index_read(ctx)
        # The states stay: a snapshot naming another graph than the one they (or the index)
        # belong to raises GraphMismatchError, nothing written.
        self._index_end(index, self._root_of(graph, ctx, read), ctx, read)

    def reindex(
        self,
        graph: Graph | str,
        ctx: FlowContext,
        *,
        as_of: datetime | None = None,
        unindexed_only: bool = False,
    ) -> bool:
        """Recompute and store the aggregate of ``ctx.instance_id`` from its stored states
        (lineages start empty; a WITHDRAWN status is kept). False when nothing of the instance
        is stored — or, with ``unindexed_only``, when it is indexed already (by another
        process since the caller saw it unindexed: its index was computed under the same lock);
        a row with empty states (the Go plugin's restart) is indexed at its first task. For
        rows written by the Go plugin or before the index existed; ``flow_sqla.reindex`` runs
        it over a whole table in batches.

        ``as_of`` (naive UTC; default now) is when the stored states were reached — the time
        a closed instance finished and its open tasks opened, as far as the index can tell.
        Only the index changes: the instance's updater and update time stay as they were.
        Named a sub-graph of the graph the stored states belong to, it indexes that graph;
        states of another graph only raise :class:`GraphMismatchError`, nothing written.
        ``as_of`` that is not a ``datetime`` and ``unindexed_only`` that is not a ``bool``
        raise :class:`InvalidArgumentTypeError` before anything is read (a date string failed
        inside the operation with an ``AttributeError``; ``unindexed_only="no"`` was true)."""
        check_context(ctx)
        if as_of is not None and not isinstance(as_of, datetime):
            raise InvalidArgumentTypeError(
                "as_of", as_of, "a datetime (naive UTC) or None", instance_id=ctx.instance_id
            )
        if not isinstance(unindexed_only, bool):
            raise InvalidArgumentTypeError(
                "unindexed_only", unindexed_only, "True or False", instance_id=ctx.instance_id
            )
        root = self._graph(graph)
        index = self._require_index("reindex")
        with self._operation(ctx, lock=True):
            read = index.index_read(ctx)
            if not read.stored_before or (unindexed_only and read.stored is not None):
                return False
            # Named a sub-graph of the graph the states (or, with none, the row's stored
            # graph) belong to: that graph's aggregate.
            root = self._root_not_indexed(root, ctx, read)
            self._check_for_index(root, ctx)
            # The gateways are evaluated with the variables of the locked row, not ctx's: a
            # reindex stores none.
            stored = getattr(self.state_repository, "stored_variables", None)
            data = None if stored is None else stored(ctx)
            # A sub-graph the engine lacks is an error here (a claim's walk reports it when
            # it gets there): without it the instance's open tasks are not known.
            fresh = build_index(
                self, root, ctx, read, read.states, now=as_of, data=data, every_sub_graph=True
            )
            if fresh.same_as(read.stored):
                return True
            if fresh.status in (InstanceStatus.RUNNING, InstanceStatus.COMPLETED):
                self._check_waiting_tasks_open(root, ctx, read.states, fresh)
            index.index_write(ctx, fresh, bookkeeping=True)
        return True

    def _check_waiting_tasks_open(
        self, root: Graph, ctx: FlowContext, states: Mapping[str, int], fresh: InstanceIndex
    ) -> None:
        """Refuse to index an instance whose stored variables route the walk past a human task
        its states hold WAITING: the Go plugin stores the variables of an instance's first
        write only, so a later step decided on others (``days: 3`` → the lead's task) while the
        stored ones (``days: 12``) lead elsewhere — the index would list a task nobody waits on,
        or call a running instance COMPLETED. :class:`SnapshotError`, nothing written; the
        instance's next submit (or a claim that changes a state) indexes it, routing on its
        own variables.

        Not for an index equal to the stored one (nothing is written then): a live operation
        stores the variables it routed on with the index it computed, so that index is right
        even where a WAITING task was left behind (a variable changed the route after a
        claim). Not for a TERMINATED instance: a TERMINATE on one branch of a parallel split
        leaves the other branch's claimed task WAITING."""
        opened = {key_of(task.graph_of(fresh), task.node_id) for task in fresh.tasks}
        for key, code in states.items():
            if code != _WAITING_CODE or key in opened:
                continue
            graph_id, _, node_id = key.partition(":")
            graph = root if graph_id == root.id else self.engine.get_graph(graph_id)
            node = None if graph is None else graph.get_node(node_id)
            if node is None or node.type != NodeType.ACTIVITY:
                continue
            if self.state_controller.is_auto_forward(ctx, node):
                continue  # an automatic node its task code left waiting: never an open task
            raise SnapshotError(
                f"Stored states and variables disagree: {node_id!r} of graph {graph_id!r} is "
                "WAITING, but the walk on the stored variables does not reach it (the Go "
                "plugin stores an instance's first variables only); its next submit indexes it "
                "on the variables it carries",
                instance_id=ctx.instance_id,
            )

    # -- the approval aggregate: bookkeeping -----------------------------------------------
    def _indexing(self) -> SupportsTaskIndex | None:
        """The repository when it keeps the task index (checked per operation: the
        repository attribute is public and may be replaced)."""
        repository = self.state_repository
        if getattr(repository, "keeps_task_index", False):
            return repository  # type: ignore[return-value]
        return None

    def _indexed_read(
        self, index: SupportsTaskIndex, graph: Graph, ctx: FlowContext
    ) -> tuple[IndexRead, Graph]:
        """What the unit of work read, and the root graph whose aggregate the index keeps.

        With the task index an instance belongs to one root graph: its open tasks, status and
        inbox rows are that graph's. An operation naming one of the sub-graphs that root
        graph calls (the reference claims a sub-graph's task on the sub-graph's own id) acts
        there, and the aggregate stays the root graph's. An operation naming any other graph
        would rewrite the aggregate for it — the instance's tasks gone from every inbox, two
        graphs' states in one row — so it raises :class:`GraphMismatchError`, nothing
        written, as withdraw and send-back do. (Only a RESTART, which clears every state,
        may start the instance over as another graph's.) An instance not indexed yet — the
        Go plugin's, or written with ``index=False`` — is judged by its state keys
        (:func:`root_by_states`), and so is one indexed as the graph named whose states
        another writer has since replaced with another graph's only."""
        read = index.index_read(ctx)
        return read, self._root_of(graph, ctx, read)

    def _root_of(self, graph: Graph, ctx: FlowContext, read: IndexRead) -> Graph:
        """The root graph of the instance ``read`` holds for an operation naming ``graph``
        (see :meth:`_indexed_read`); :class:`GraphMismatchError` when it runs another."""
        stored = read.stored
        if stored is None or _replaced_behind_the_index(self.engine, graph, stored, read):
            return self._root_not_indexed(graph, ctx, read)
        return self._root_named(graph, ctx, stored.graph_id)

    def _root_not_indexed(self, graph: Graph, ctx: FlowContext, read: IndexRead) -> Graph:
        """The root graph of an instance its index does not describe (not indexed yet, or its
        states replaced behind the index) for an operation naming ``graph``: its state keys
        tell (:func:`root_by_states`); with no states, the graph stored with it does — the
        Go plugin's restart leaves the row's graph and ``{}`` states, and a reindex would
        index the instance as that graph."""
        if read.states:
            return root_by_states(self.engine, graph, ctx.instance_id, read.states)
        return self._root_named(graph, ctx, read.stored_graph_id)

    def _root_named(self, graph: Graph, ctx: FlowContext, graph_id: str | None) -> Graph:
        """The root graph of an instance stored as graph ``graph_id`` (``None``: not known)
        for an operation naming ``graph``: ``graph`` itself, or the root graph calling it;
        :class:`GraphMismatchError` when the instance runs another graph."""
        if not graph_id or graph_id == graph.id:
            return graph
        root = self.engine.get_graph(graph_id)
        if root is not None and graph.id in called_graphs(self.engine, root):
            return root
        raise GraphMismatchError(ctx.instance_id, graph.id, graph_id)

    def _restart_root(self, graph: Graph, ctx: FlowContext, read: IndexRead) -> Graph:
        """The root graph a RESTART naming ``graph`` starts the instance over as: the root it
        runs as when ``graph`` is one of the sub-graphs that root calls (its task was claimed
        on the sub-graph's id), else ``graph`` itself — a RESTART may start the instance over
        as another graph's. (The index's root graph decides even when the states were
        replaced behind it: a RESTART clears them all.)"""
        stored = read.stored
        if stored is not None and stored.graph_id:
            with suppress(GraphMismatchError):  # named another root graph: the RESTART moves it
                return self._root_named(graph, ctx, stored.graph_id)
        try:
            return self._root_of(graph, ctx, read)
        except GraphMismatchError:
            return graph

    def _check_for_index(self, graph: Graph, ctx: FlowContext) -> None:
        """Before a claim or submit of ``graph`` (before its first statement; the reads leave
        an instance's stored tasks readable, and the index write still checks each task):
        a repository that bounds what its index holds checks every task the graph and the
        sub-graphs it calls could open (``index_check_graph``) — a candidate it cannot hold
        must refuse the graph before an instance starts, not strand the instance at the task
        before."""
        check = getattr(self._indexing(), "index_check_graph", None)
        if check is not None:
            for checked in (graph, *sub_graphs(self.engine, graph)):
                check(checked, self.state_controller, ctx.instance_id)

    def _require_index(self, operation: str) -> SupportsTaskIndex:
        index = self._indexing()
        if index is None:
            raise IndexUnavailableError(self.state_repository, operation)
        return index

    def _current_index(
        self, graph: Graph, ctx: FlowContext, read: IndexRead
    ) -> InstanceIndex | None:
        """The stored aggregate, or the one computed now for a stored instance without one
        (written before the index existed) or whose states moved on without it (the Go
        plugin, an ``index=False`` writer: a stored open task is done) — a withdraw must not
        write TERMINATED over a task completed meanwhile, nor act on another graph's tasks
        when the states were replaced behind the index; ``None`` for an unknown instance."""
        stored = read.stored
        if (
            stored is not None
            and not _tasks_settled(stored, read.states)
            and not _replaced_behind_the_index(self.engine, graph, stored, read)
        ):
            return stored
        if not read.stored_before:
            return None
        return build_index(self, graph, ctx, read, read.states)

    def _running_index(
        self, index: SupportsTaskIndex, graph: Graph, ctx: FlowContext, *, sub_graph: bool = False
    ) -> tuple[IndexRead, InstanceIndex, Graph] | None:
        """What the unit of work read, the instance's aggregate and its root graph, when it is
        RUNNING (the instances withdraw and send-back act on); ``None`` for an unknown or
        closed one. ``graph`` must be the instance's root graph — or, with ``sub_graph`` (a
        sub-graph's task sent back), one that it calls."""
        read, root = self._indexed_read(index, graph, ctx)
        if not sub_graph and root is not graph:
            # Its stored index or (not indexed yet, or replaced behind the index) its states
            # name another graph — also one calling ``graph``: withdraw and send-back act on
            # the root graph.
            raise GraphMismatchError(ctx.instance_id, graph.id, root.id)
        current = self._current_index(root, ctx, read)
        if current is None or current.status != InstanceStatus.RUNNING:
            return None
        return read, current, root

    def _task_node(self, root: Graph, task: IndexedTask, ctx: FlowContext) -> Node | None:
        """The node of an open task: of ``root``, or of the sub-graph it names; ``None`` when
        the graph no longer has it (changed under a running instance: there is no state to
        end). Raises :class:`GraphNotFoundError` (nothing written) for a sub-graph the engine
        does not have: its task could not be terminated, and a withdraw ends every open
        task or none."""
        if task.graph_id is None:
            return root.get_node(task.node_id)
        graph = self.engine.get_graph(task.graph_id)
        if graph is None:
            raise GraphNotFoundError(task.graph_id, instance_id=ctx.instance_id)
        return graph.get_node(task.node_id)

    def _index_end(
        self,
        index: SupportsTaskIndex,
        graph: Graph,
        ctx: FlowContext,
        read: IndexRead,
        *,
        submitted: Node | None = None,
        action: TaskAction | None = None,
        reopened: Mapping[Node, tuple[str, ...]] | None = None,
        passed: tuple[Node, ...] = (),
        walked: Frontier | None = None,
    ) -> None:
        """Store the aggregate after an operation, when it changed. Nothing happened (states
        and stored variables as read): nothing to do. Only open tasks became WAITING (a
        claim): the frontier is unchanged, no walk. Else the frontier the operation's own walk
        showed (``walked``), or a dry walk, gives it."""
        states, vars_changed = index.index_changes(ctx)
        stored = read.stored
        # A row not indexed yet has no graph of the index's, but may have one stored with it
        # (the Go plugin's restarted row): a RESTART naming another graph moves it.
        stored_graph = read.stored_graph_id if stored is None else stored.graph_id
        same_graph = stored_graph in (None, graph.id)
        if stored is None and not states and same_graph:
            return
        if not vars_changed and states == read.states and same_graph:
            # Nothing changed — also for an instance not indexed yet: a read does not index
            # it (its walk ran on the caller's variables, which a read does not store).
            return
        if not _withdrawn(read) and _withdrawn(index.index_read(ctx)):
            # Task code or an interceptor withdrew the instance during this operation (a call
            # back joins it): the withdraw stands — its status stays until a RESTART.
            return
        # A claim on the stored graph leaves its frontier as it was; anything else walks.
        fresh = None if vars_changed or not same_graph else claimed_only(read, states)
        if fresh is None:
            fresh = build_index(
                self,
                graph,
                ctx,
                read,
                states,
                submitted=submitted,
                action=action,
                reopened=reopened,
                passed=passed,
                walked=walked,
            )
        if not fresh.same_as(stored):
            index.index_write(ctx, fresh)

    def _actor(self, ctx: FlowContext) -> str:
        """Who the context is: its value for the first controller key it holds, else ``""``."""
        controller = self.state_controller
        keys = controller.keys if isinstance(controller, ActorStateController) else _ASSIGNEE_KEYS
        for key in keys:
            value = ctx.get(key)
            if value is not None:
                return identity_text(value, key, ctx.instance_id)
        return ""

    # -- operation frame ---------------------------------------------------------------
    def _graph(self, graph: Graph | str) -> Graph:
        return graph if isinstance(graph, Graph) else self.engine.get_graph_or_throw(graph)

    def _operation(self, ctx: FlowContext, *, lock: bool) -> AbstractContextManager[None]:
        """Instance lock first, then the repository's unit of work (when it has one).

        No process lock when the repository says its unit of work serializes this operation
        itself (``serializes(ctx)``: a database row lock taken in the caller's transaction).
        That transaction may span several operations and keeps the row lock between them; a
        process lock taken per operation would then be acquired in the opposite order by two
        threads (A holds the row, waits for the process lock; B holds the process lock, waits
        for the row) — a deadlock no database can see.

        Raises :class:`InvalidInstanceIdError` for ``""``, whitespace or a non-string id.
        """
        checked_instance_id(ctx.instance_id)
        # The operation's expressions share one work budget (entered first, left last): round
        # a cycle, conditions run again at every lap, and the step budget counts nodes only.
        return _LockedUnitOfWork(OperationBudget(), self._serialized(ctx, lock=lock))

    def _serialized(self, ctx: FlowContext, *, lock: bool) -> AbstractContextManager[None]:
        repository = self.state_repository
        unit_of_work = getattr(repository, "unit_of_work", None)
        if unit_of_work is None:
            return INSTANCE_LOCKS.hold((id(repository), ctx.instance_id))
        serializes = getattr(repository, "serializes", None)
        if serializes is not None and serializes(ctx):
            return unit_of_work(ctx, lock=lock)  # type: ignore[no-any-return]
        held = INSTANCE_LOCKS.hold((id(repository), ctx.instance_id))
        return _LockedUnitOfWork(held, unit_of_work(ctx, lock=lock))

    def _driver(self, graph: Graph) -> WorkflowDriver:
        return WorkflowDriver(
            self.engine.get_driver(graph), self.state_controller, self.state_repository
        )

    def _walk(
        self,
        graph: Graph,
        ctx: FlowContext,
        kind: IntentType,
        driver: WorkflowDriver | None = None,
        max_steps: int | None = -1,
    ) -> WorkflowIntent:
        """Evaluate ``graph`` from its start (trace cleared) with ``kind`` as the intent
        (``max_steps`` -1: the executor's budget)."""
        intent = WorkflowIntent(graph, kind)
        steps = self.max_steps if max_steps == -1 else max_steps
        with ctx.scoped(INTENT_KEY, intent):
            exchanger = FlowExchanger(
                graph, self.engine, driver or self._driver(graph), ctx, max_steps=steps
            )
            exchanger.silent = driver is not None and driver.dry_run
            exchanger.record_clear()
            self.engine.eval_exchanger(graph, exchanger)
        return intent

    def _submit(
        self,
        graph: Graph,
        node: Node,
        action: TaskAction,
        ctx: FlowContext,
        message: str | None,
        *,
        check_waiting: bool,
    ) -> bool:
        action = _checked_action(action, graph, node)
        self._check_node_of(graph, node)
        self._check_for_index(graph, ctx)
        with self._operation(ctx, lock=True):
            index = self._indexing()
            read, indexed = None, graph
            if index is not None:
                # A RESTART clears every state: the instance may start over as another graph's.
                if action == TaskAction.RESTART:
                    read = index.index_read(ctx)
                    indexed = self._restart_root(graph, ctx, read)
                else:
                    read, indexed = self._indexed_read(index, graph, ctx)
            if read is not None and _closed_to(read, action):
                if check_waiting:
                    return False
                raise InstanceClosedError(ctx.instance_id, InstanceStatus.WITHDRAWN)
            if check_waiting and not self._still_waiting(node, ctx):
                return False
            saved_exchanger = ctx.exchanger
            passed: list[Node] = []
            driver = self._driver(graph)
            try:
                # The intent names the root graph the row stores (a RESTART of a sub-graph's
                # task starts the instance over as its root graph's, not as the sub-graph's).
                intent = WorkflowIntent(
                    indexed if action == TaskAction.RESTART else graph, IntentType.SUBMIT_TASK
                )
                with ctx.scoped(INTENT_KEY, intent):
                    current = self._submit_do(graph, node, action, ctx, passed, driver)
            finally:
                ctx.exchanger = saved_exchanger
            # A submit acted, whether or not a state changed (a FORWARD of a completed node,
            # a RESTART of an empty instance): its variables are stored, as its record has them.
            keep = getattr(self.state_repository, "keep_variables", None)
            if keep is not None:
                keep(ctx)
            if index is not None and read is not None:
                # A FORWARD's last walk found the task current after it (or the END).
                forwarded = action == TaskAction.FORWARD and indexed is graph
                walked = walked_frontier(self, graph, ctx, driver, current) if forwarded else None
                self._index_end(
                    index, indexed, ctx, read, walked=walked, **_lineage_of(node, action, passed)
                )
            if self.recorder is not None:
                record = self._record(graph, node, action, ctx, message, current)
                self.recorder.record(ctx, record)
        return True

    def _check_node_of(self, root: Graph, node: Node) -> None:
        """A submitted node is ``root``'s or a node of a graph ``root`` calls: a node of an
        unrelated graph would store that graph's state in this instance (and run its task
        code), and record a node ``root`` does not have."""
        graph_id = node.graph.id
        if graph_id != root.id and graph_id not in called_graphs(self.engine, root):
            raise NodeNotFoundError(f"{graph_id}:{node.id}", root.id)

    def _still_waiting(self, node: Node, ctx: FlowContext) -> bool:
        return self.state_repository.state_get(
            ctx, node
        ) == TaskState.WAITING and self.state_controller.is_operatable(ctx, node)

    # -- actions -----------------------------------------------------------------------
    def _submit_do(
        self,
        graph: Graph,
        node: Node,
        action: TaskAction,
        ctx: FlowContext,
        passed: list[Node],
        driver: WorkflowDriver,
    ) -> Node | None:
        """Apply ``action`` with ``driver``; returns the task current afterwards when the
        action's last step already found it (a forward ending with a find walk), else
        ``None``. A jump appends the tasks it forwarded (or sent back) on the way to
        ``passed``."""
        exchanger = FlowExchanger(graph, self.engine, driver, ctx, max_steps=self.max_steps)
        if action == TaskAction.FORWARD:
            return self._forward(graph, node, exchanger)
        if action == TaskAction.BACK:
            self._back(node, ctx)
        elif action in (TaskAction.FORWARD_JUMP, TaskAction.BACK_JUMP):
            self._jump(graph, node, exchanger, passed, forward=action == TaskAction.FORWARD_JUMP)
        elif action == TaskAction.RESTART:
            self.state_repository.state_clear(ctx)
        else:
            self.state_repository.state_put(ctx, node, action.target_state)
        return None

    def _forward(self, graph: Graph, node: Node, exchanger: FlowExchanger) -> Node | None:
        """Run the node's task code, complete it, then let automatic successors run: a
        gateway successor is resolved to the task found beyond it (stop if TERMINATED); an
        automatic one triggers a walk from the start with the resume walk switched off.

        Returns the task current afterwards when the last step already shows it (else
        ``None``): the WAITING/UNKNOWN task of a final find walk, or the root END node of a
        final walk that reached it passing completed nodes only (no task code ran, so the
        record's dry walk would take the same path and end there too)."""
        ctx = exchanger.context
        driver = exchanger.driver
        # The submit's driver also serves its find walks (it keeps no per-walk state they read).
        submit_driver = driver if isinstance(driver, WorkflowDriver) else None
        exchanger.reverting = False
        call_task(driver.post_handle_task, exchanger, node)
        self.state_repository.state_put(ctx, node, TaskState.COMPLETED)
        current: Node | None = None
        for next_node in node.next_nodes:
            current = None
            target: Node | None = next_node
            if next_node.type.is_gateway:
                found = self._walk(graph, ctx, IntentType.FIND_TASK, submit_driver).task
                if found is not None and found.state == TaskState.TERMINATED:
                    break
                target = None if found is None else found.node
                if found is not None and found.state in _CURRENT_STATES:
                    current = found.node
            if target is not None and self.state_controller.is_auto_forward(ctx, target):
                exchanger.record_clear()
                walker = exchanger.copy(target.graph)
                walker.reset_steps()
                walker.reverting = False
                if submit_driver is not None:
                    submit_driver.only_completed = True
                self.engine.eval_exchanger(target.graph, walker)
                current = _end_reached(graph, target, driver, ctx)
        return current

    def _back(self, node: Node, ctx: FlowContext) -> None:
        """Remove the node's state and its predecessors' (through gateways, transitively).

        The reference recurses into each gateway predecessor as it meets it; this runs the
        same depth-first order from an explicit stack, so a long chain of gateways cannot
        exhaust Python's stack."""
        repository = self.state_repository
        visited: set[Node] = set()
        todo: list[Iterator[Node]] = []
        current: Node | None = node
        while True:
            if current is not None and current not in visited:
                visited.add(current)
                repository.state_remove(ctx, current)
                todo.append(iter(current.prev_nodes))
            current = None
            if not todo:
                return
            prev = next(todo[-1], None)
            if prev is None:
                todo.pop()
            elif prev.type == NodeType.ACTIVITY:
                repository.state_remove(ctx, prev)
            elif prev.type.is_gateway:
                for child in prev.next_nodes:
                    if child.type == NodeType.ACTIVITY:
                        repository.state_remove(ctx, child)
                current = prev

    def _jump(
        self,
        graph: Graph,
        node: Node,
        exchanger: FlowExchanger,
        passed: list[Node],
        *,
        forward: bool,
    ) -> None:
        """Forward (or back) the current task until ``node`` is current, then make it WAITING;
        give up when there is no task or no progress (``node`` then keeps its state). The
        tasks forwarded (or sent back) on the way are appended to ``passed``."""
        ctx = exchanger.context
        last: Task | None = None
        while True:
            task = self._walk(graph, ctx, IntentType.FIND_TASK).task
            if task is None or (last is not None and last.node == task.node):
                return
            last = task
            if task.node == node:
                self.state_repository.state_put(ctx, node, TaskState.WAITING)
                return
            passed.append(task.node)
            if forward:
                self._forward(graph, task.node, exchanger)
            else:
                self._back(task.node, ctx)

    # -- history -----------------------------------------------------------------------
    def _record(
        self,
        graph: Graph,
        node: Node,
        action: TaskAction,
        ctx: FlowContext,
        message: str | None,
        current: Node | None = None,
    ) -> TaskRecord:
        """The history record of a submit; ``current`` is the task found current by the
        submit itself (its target), else a dry walk finds it."""
        return TaskRecord(
            instance_id=ctx.instance_id,
            graph_id=graph.id,
            task_id=node.id,
            source=node,
            target=current if current is not None else self._record_target(graph, node, ctx),
            action=action,
            state=action.target_state,
            assignee=self._assignee(ctx, node),
            message=message,
            form_id=form_id_of(node),
            variables=ctx.ser_data(),  # the intent is NonSerializable: never among them
            created_at=datetime.now(UTC),
        )

    def _record_target(self, graph: Graph, source: Node, ctx: FlowContext) -> Node:
        """The task current after the submit, found by a dry find walk on a probe context
        whose state writes go to a throwaway overlay: nothing is written, no task code runs
        and the caller's trace is untouched."""
        overlay = OverlayRepository(self.state_repository, ctx)
        driver = WorkflowDriver(
            self.engine.get_driver(graph), self.state_controller, overlay, dry_run=True
        )
        probe = FlowContext(
            ctx.instance_id,
            {k: v for k, v in ctx.data.items() if k not in ("context", "instanceId", INTENT_KEY)},
            connection=ctx.connection,
        )
        task = self._walk(graph, probe, IntentType.FIND_TASK, driver).task
        if task is not None and task.state in _CURRENT_STATES:
            return task.node
        record = probe.last_record
        if record is not None and record.graph_id == graph.id:
            reached = graph.get_node(record.id)
            if reached is not None:
                return reached
        return source

    def _assignee(self, ctx: FlowContext, node: Node) -> str:
        controller = self.state_controller
        keys = controller.keys if isinstance(controller, ActorStateController) else _ASSIGNEE_KEYS
        for key in keys:
            value = ctx.get(key)
            if value is not None:
                return identity_text(value, key, ctx.instance_id)
        return node.meta_as_str("actor") or ""

    def __repr__(self) -> str:
        return (
            f"WorkflowExecutor({self.state_controller!r}, {self.state_repository!r}, "
            f"recorder={self.recorder!r}, max_steps={self.max_steps!r})"
        )


def _checked_action(action: TaskAction | int, graph: Graph, node: Node) -> TaskAction:
    if type(action) is TaskAction and action != TaskAction.UNKNOWN:
        return action
    checked = TaskAction.of(int(action)) if isinstance(action, int) else TaskAction.UNKNOWN
    if checked == TaskAction.UNKNOWN:
        raise InvalidActionError(action, graph_id=graph.id, node_id=node.id)
    return checked


def _of_another_instance(task: Task, ctx: FlowContext) -> bool:
    """Whether ``task`` was claimed or found for another instance than ``ctx``'s: a task is
    bound to its instance (as an inbox's ``OpenTask`` is) — one kept in a web session and
    submitted with a context built from another id must not act on that instance."""
    return task.context.instance_id != ctx.instance_id


def _withdrawn(read: IndexRead) -> bool:
    """True when the instance is WITHDRAWN: it accepts nothing but a RESTART."""
    stored = read.stored
    return stored is not None and stored.status == InstanceStatus.WITHDRAWN


def _closed_to(read: IndexRead, action: TaskAction) -> bool:
    """True when the instance is WITHDRAWN and ``action`` is not the RESTART that reopens it."""
    return _withdrawn(read) and action != TaskAction.RESTART


def _tasks_settled(index: InstanceIndex, states: Mapping[str, int]) -> bool:
    """Whether a task ``index`` holds open is COMPLETED or TERMINATED in ``states``: the
    states were written without the index since it was stored."""
    return any(
        states.get(key_of(task.graph_of(index), task.node_id)) in _SETTLED for task in index.tasks
    )


def _lineage_of(node: Node, action: TaskAction, passed: list[Node]) -> dict[str, Any]:
    """How the index dates the lineage of the tasks a submit opens (see ``build_index``): a
    FORWARD as submitted by ``node``; a FORWARD_JUMP as the chain of tasks it forwarded; a
    BACK_JUMP as a BACK of the task that was current when it started."""
    if action == TaskAction.FORWARD_JUMP and passed:
        return {"submitted": passed[0], "action": action, "passed": tuple(passed)}
    if action == TaskAction.BACK_JUMP and passed:
        return {"submitted": passed[0], "action": TaskAction.BACK}
    return {"submitted": node, "action": action}


def _replaced_behind_the_index(
    engine: FlowEngine, graph: Graph, stored: InstanceIndex, read: IndexRead
) -> bool:
    """Whether the states are all outside the call tree of the graph the instance is indexed
    as (``graph``, or the root graph calling it that the index names), replaced by the Go
    plugin or an ``index=False`` writer since the index was stored: the instance is judged
    by its states then, as a row not indexed yet — an operation of ``graph`` would merge its
    states into the other graph's row."""
    root = graph
    if stored.graph_id and stored.graph_id != graph.id:
        indexed = engine.get_graph(stored.graph_id)
        if indexed is None:
            return False  # the operation is refused as another graph's (see _root_of)
        root = indexed
    return states_elsewhere(engine, root, read.states)


def _with_assignee(record: TaskRecord, assignee: str) -> TaskRecord:
    return dataclasses.replace(record, assignee=assignee, state=TaskState.TERMINATED)


def _end_reached(graph: Graph, target: Node, driver: object, ctx: FlowContext) -> Node | None:
    """The END node of ``graph`` when the walk just run from ``target``'s graph (the root)
    passed completed nodes only and its last record is that END node, else ``None``."""
    if target.graph is not graph or not isinstance(driver, WorkflowDriver):
        return None
    record = ctx.last_record
    if not driver.only_completed or record is None or record.graph_id != graph.id:
        return None
    reached = graph.get_node(record.id)
    return reached if reached is not None and reached.type == NodeType.END else None


def _on(connection: object) -> dict[str, Any]:
    """The ``connection=`` keyword for a task-index query, only when one is given: a repository
    of the protocol's first form takes none."""
    return {} if connection is None else {"connection": connection}


class _LockedUnitOfWork:
    """``with lock: with unit_of_work:`` as one object (cheaper than a generator context
    manager on the path every operation takes). The lock never suppresses exceptions."""

    __slots__ = ("_lock", "_unit")

    def __init__(self, lock: AbstractContextManager[None], unit: AbstractContextManager[None]):
        self._lock = lock
        self._unit = unit

    def __enter__(self) -> None:
        self._lock.__enter__()
        try:
            self._unit.__enter__()
        except BaseException:
            self._lock.__exit__(*sys.exc_info())
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            return bool(self._unit.__exit__(exc_type, exc, tb))
        finally:
            self._lock.__exit__(None, None, None)


__all__ = ["WorkflowExecutor"]
