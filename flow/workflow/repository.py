"""Where node states live: the :class:`StateRepository` protocol and the in-memory default.

States are kept per instance (``ctx.instance_id``) under the key ``"<graphId>:<nodeId>"``,
the same key the Java/Go ports and ``flow_sqla`` use.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from flow.workflow._arguments import default_auditor
from flow.workflow.aggregate import (
    IndexRead,
    InstanceIndex,
    InstanceStatus,
    InstanceSummary,
    OpenTask,
    utc_now,
)
from flow.workflow.states import TaskState

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Node


def state_key(node: Node) -> str:
    """The repository key of a node: ``"<graphId>:<nodeId>"``."""
    return key_of(node.graph.id, node.id)


def key_of(graph_id: str, node_id: str) -> str:
    """The repository key of node ``node_id`` of graph ``graph_id``."""
    return f"{graph_id}:{node_id}"


@runtime_checkable
class StateRepository(Protocol):
    """Reads and writes the state of each node of each instance.

    ``vars_get`` returns variables to merge into the context at every node start (``None`` or
    an empty mapping: nothing to merge); ``state_get`` answers ``UNKNOWN`` for a node without
    a state; ``state_clear`` forgets every state of ``ctx.instance_id``.
    """

    def vars_get(self, ctx: FlowContext, node: Node) -> Mapping[str, Any] | None: ...

    def state_get(self, ctx: FlowContext, node: Node) -> TaskState: ...

    def state_put(self, ctx: FlowContext, node: Node, state: TaskState) -> None: ...

    def state_remove(self, ctx: FlowContext, node: Node) -> None: ...

    def state_clear(self, ctx: FlowContext) -> None: ...


@runtime_checkable
class SupportsUnitOfWork(Protocol):
    """The optional capability: one context manager around one executor operation.

    It opens (or joins) a transaction, takes the instance lock when ``lock`` is true and
    makes the operation's writes permanent only if the block exits normally.
    """

    def unit_of_work(self, ctx: FlowContext, *, lock: bool) -> AbstractContextManager[Any]: ...


# One undo entry: (instance id, state key or None for "whole instance", previous value).
_Undo = tuple[str, str | None, Any]
#: The undo key of an instance's stored aggregate (no state key contains a NUL).
_INDEX_KEY = "\x00index"


@dataclass(frozen=True, kw_only=True)
class _Stored:
    """One instance's aggregate in memory, with what a SQL row would add around it."""

    index: InstanceIndex
    creator: str | None
    created_at: datetime
    updated_at: datetime
    cursor: int
    task_cursors: Mapping[str, int]


class InMemoryStateRepository:
    """The default repository: a dict per instance, safe to share between threads.

    It keeps the task index too (open tasks and status, :class:`SupportsTaskIndex`), so inbox,
    withdraw and send-back work without a database. Its :meth:`unit_of_work` journals what an
    operation changes and puts it back if the operation raises, so a failing submit (a task
    error, a failing recorder) leaves no trace — index included — the same guarantee the SQL
    repository gives with a transaction. It is public so users can use it as a test double.
    """

    #: The task index is always kept (see :class:`SupportsTaskIndex`).
    keeps_task_index = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, dict[str, int]] = {}
        self._index: dict[str, _Stored] = {}
        self._sequence = itertools.count(1)
        self._local = threading.local()

    # -- the protocol ------------------------------------------------------------------
    def vars_get(self, ctx: FlowContext, node: Node) -> Mapping[str, Any] | None:
        return None

    def state_get(self, ctx: FlowContext, node: Node) -> TaskState:
        with self._lock:
            code = self._states.get(ctx.instance_id, {}).get(state_key(node))
        return TaskState.UNKNOWN if code is None else TaskState.of(code)

    def state_put(self, ctx: FlowContext, node: Node, state: TaskState) -> None:
        key = state_key(node)
        with self._lock:
            states = self._states.setdefault(ctx.instance_id, {})
            self._journal(ctx.instance_id, key, states.get(key))
            states[key] = int(state)

    def state_remove(self, ctx: FlowContext, node: Node) -> None:
        key = state_key(node)
        with self._lock:
            states = self._states.get(ctx.instance_id)
            if states is None or key not in states:
                return
            self._journal(ctx.instance_id, key, states.pop(key))
            if not states:
                del self._states[ctx.instance_id]

    def state_clear(self, ctx: FlowContext) -> None:
        with self._lock:
            states = self._states.pop(ctx.instance_id, None)
            if states:
                self._journal(ctx.instance_id, None, states)

    # -- extras ------------------------------------------------------------------------
    def states(self, instance_id: str) -> dict[str, TaskState]:
        """A copy of the states of one instance, ``{"graphId:nodeId": TaskState}``."""
        with self._lock:
            codes = dict(self._states.get(instance_id, {}))
        return {key: TaskState.of(code) for key, code in codes.items()}

    # -- the task index (SupportsTaskIndex) ----------------------------------------------
    def index_read(self, ctx: FlowContext) -> IndexRead:
        with self._lock:
            states = dict(self._states.get(ctx.instance_id, {}))
            stored = self._index.get(ctx.instance_id)
        return IndexRead(
            states=states,
            stored=None if stored is None else stored.index,
            stored_before=bool(states) or stored is not None,
        )

    def keep_variables(self, ctx: FlowContext) -> None:
        """A submit acted: the SQL repository stores its context's variables, which the
        instance then runs on, and computes the open tasks again from them even when no state
        changed (a FORWARD of a completed gateway with other routing variables). Variables
        are not stored here, but the open tasks are computed again all the same."""
        if not self.keeps_task_index:  # a subclass without the index: nothing to redo
            return
        acted: set[str] | None = getattr(self._local, "acted", None)
        if acted is None:
            acted = self._local.acted = set()
        acted.add(ctx.instance_id)

    def index_changes(self, ctx: FlowContext) -> tuple[Mapping[str, int], bool]:
        """The instance's states now, and whether a submit acted in this operation (see
        :meth:`keep_variables`): its variables count as changed."""
        acted: set[str] | None = getattr(self._local, "acted", None)
        submitted = acted is not None and ctx.instance_id in acted
        if submitted and acted is not None:
            acted.discard(ctx.instance_id)
        with self._lock:
            return dict(self._states.get(ctx.instance_id, {})), submitted

    def index_write(
        self, ctx: FlowContext, index: InstanceIndex, *, bookkeeping: bool = False
    ) -> None:
        instance_id = ctx.instance_id
        now = utc_now()
        with self._lock:
            previous = self._index.get(instance_id)
            old = {} if previous is None else {t.node_id: t for t in previous.index.tasks}
            cursors: dict[str, int] = {}
            for task in index.tasks:
                kept = old.get(task.node_id)
                # As SQL's todo rows: a task of another graph (the instance driven on through
                # it) sorts as newly opened even where the node id matches.
                same = (
                    kept is not None
                    and previous is not None
                    and previous.index.graph_id == index.graph_id
                    and (kept.graph_id, kept.lineage, kept.opened_at, kept.candidates)
                    == (task.graph_id, task.lineage, task.opened_at, task.candidates)
                )
                if same and previous is not None:
                    cursors[task.node_id] = previous.task_cursors[task.node_id]
                else:
                    cursors[task.node_id] = next(self._sequence)
            self._journal(instance_id, _INDEX_KEY, previous)
            self._index[instance_id] = _Stored(
                index=index,
                creator=default_auditor(ctx) if previous is None else previous.creator,
                created_at=now if previous is None else previous.created_at,
                updated_at=previous.updated_at if bookkeeping and previous else now,
                cursor=next(self._sequence) if previous is None else previous.cursor,
                task_cursors=cursors,
            )

    def index_inbox(
        self,
        identities: Sequence[str],
        *,
        graph_id: str | None,
        limit: int,
        after: int | None,
        connection: object = None,
    ) -> list[OpenTask]:
        wanted = set(identities)
        with self._lock:
            found = [
                # As the SQL inbox: the task carries the caller's first matching candidate.
                replace(task, candidates=(next(c for c in task.candidates if c in wanted),))
                for instance_id, stored in self._index.items()
                if stored.index.status == InstanceStatus.RUNNING
                for task in _open_tasks(instance_id, stored)
                if wanted.intersection(task.candidates)
                and (graph_id is None or task.graph_id == graph_id)
                and (after is None or task.cursor > after)
            ]
        found.sort(key=lambda t: t.cursor)
        return found[:limit]

    def index_open_tasks(self, instance_id: str, *, connection: object = None) -> list[OpenTask]:
        with self._lock:
            stored = self._index.get(instance_id)
            tasks = [] if stored is None else _open_tasks(instance_id, stored)
        return sorted(tasks, key=lambda t: t.cursor)

    def index_status(self, instance_id: str, *, connection: object = None) -> InstanceStatus | None:
        with self._lock:
            stored = self._index.get(instance_id)
        return None if stored is None else stored.index.status

    def index_instances(
        self,
        *,
        status: InstanceStatus | None,
        graph_id: str | None,
        creator: str | None,
        limit: int,
        after: int | None,
        connection: object = None,
    ) -> list[InstanceSummary]:
        with self._lock:
            found = [
                _summary(instance_id, stored)
                for instance_id, stored in self._index.items()
                if (status is None or stored.index.status == status)
                and (graph_id is None or stored.index.graph_id == graph_id)
                and (creator is None or stored.creator == creator)
                and (after is None or stored.cursor < after)
            ]
        found.sort(key=lambda s: s.cursor, reverse=True)
        return found[:limit]

    @contextmanager
    def unit_of_work(self, ctx: FlowContext, *, lock: bool) -> Iterator[None]:
        """Undo every change made in the block (on this thread) if the block raises.

        Nested units of work hand their journal to the enclosing one on success. ``lock`` is
        accepted for the protocol; in one process the executor's instance lock serializes.
        """
        stack: list[list[_Undo]] = self._journals()
        journal: list[_Undo] = []
        stack.append(journal)
        try:
            yield
        except BaseException:
            stack.pop()
            self._undo(journal)
            acted: set[str] | None = getattr(self._local, "acted", None)
            if acted is not None:
                acted.discard(ctx.instance_id)
            raise
        stack.pop()
        if stack:
            stack[-1].extend(journal)

    # -- internals ---------------------------------------------------------------------
    def _journals(self) -> list[list[_Undo]]:
        stack: list[list[_Undo]] | None = getattr(self._local, "journals", None)
        if stack is None:
            stack = []
            self._local.journals = stack
        return stack

    def _journal(self, instance_id: str, key: str | None, previous: Any) -> None:
        stack: list[list[_Undo]] | None = getattr(self._local, "journals", None)
        if stack:
            stack[-1].append((instance_id, key, previous))

    def _undo(self, journal: list[_Undo]) -> None:
        with self._lock:
            for instance_id, key, previous in reversed(journal):
                if key == _INDEX_KEY:
                    if previous is None:
                        self._index.pop(instance_id, None)
                    else:
                        self._index[instance_id] = previous
                    continue
                if key is None:
                    self._states[instance_id] = dict(previous)
                    continue
                states = self._states.setdefault(instance_id, {})
                if previous is None:
                    states.pop(key, None)
                else:
                    states[key] = previous
                if not states:
                    del self._states[instance_id]

    def __repr__(self) -> str:
        with self._lock:
            count = len(self._states)
        return f"InMemoryStateRepository({count} instances)"


def _open_tasks(instance_id: str, stored: _Stored) -> list[OpenTask]:
    index = stored.index
    return [
        OpenTask(
            instance_id=instance_id,
            graph_id=task.graph_of(index),
            node_id=task.node_id,
            node_title=task.node_title,
            state=task.state,
            candidates=task.candidates,
            lineage=task.lineage,
            opened_at=task.opened_at,
            cursor=stored.task_cursors[task.node_id],
        )
        for task in index.tasks
    ]


def _summary(instance_id: str, stored: _Stored) -> InstanceSummary:
    return InstanceSummary(
        instance_id=instance_id,
        graph_id=stored.index.graph_id,
        status=stored.index.status,
        creator=stored.creator,
        created_at=stored.created_at,
        updated_at=stored.updated_at,
        finished_at=stored.index.finished_at,
        cursor=stored.cursor,
    )


__all__ = [
    "InMemoryStateRepository",
    "StateRepository",
    "SupportsUnitOfWork",
    "key_of",
    "state_key",
]
