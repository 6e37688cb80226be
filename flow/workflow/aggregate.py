"""The approval aggregate's records: instance status, open tasks, instance summaries, and the
optional repository capability that stores them.

An instance's *open tasks* are the human tasks some actor's claim could return now (the
frontier, computed for every identity at once); its *status* says whether it still runs. A
repository that implements :class:`SupportsTaskIndex` stores both in the same unit of work as
the node states, so "what waits for me" is one indexed query instead of a walk per instance.
See ``docs/tasks.md``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from flow.workflow.states import TaskState

if TYPE_CHECKING:
    from flow.context import FlowContext


def utc_now() -> datetime:
    """Naive UTC, whole seconds (what a plain DATETIME column keeps on every dialect)."""
    return datetime(*time.gmtime()[:6])


#: How many earlier tasks an open task remembers (its lineage keeps the last ones).
LINEAGE_LIMIT = 32

#: The largest page a query returns: a page is one statement whose rows are all held in
#: memory, so an unbounded ``limit`` (from a URL, say) would be a way to exhaust it.
MAX_PAGE_SIZE = 10_000

#: The largest cursor: cursors are row ids, 64-bit signed integers on every dialect.
MAX_CURSOR = 2**63 - 1

#: The most distinct identities an inbox matches (an actor and the roles or groups the
#: controller's ``identities(ctx)`` gives). On SQL the page is one index range per identity,
#: each skipping tasks listed under the others: the statement grows with their square.
MAX_IDENTITIES = 64


class InstanceStatus(IntEnum):
    """Where an instance stands. COMPLETED and TERMINATED are recomputed from the node states
    after every operation (a BACK after END re-opens an instance); WITHDRAWN is sticky until a
    RESTART."""

    RUNNING = 10
    COMPLETED = 20
    WITHDRAWN = 30
    TERMINATED = 40

    @property
    def is_closed(self) -> bool:
        return self != InstanceStatus.RUNNING


@dataclass(frozen=True, kw_only=True)
class OpenTask:
    """A human task of a running instance that a claim could return now.

    ``state`` is WAITING once claimed, else UNKNOWN ("ready"); ``candidates`` are the
    controller's strings for who may operate it; ``lineage`` the node ids of the human tasks
    whose submits led here, oldest first; ``opened_at`` naive UTC; ``cursor`` is opaque and
    only good for the ``after`` argument of the next :meth:`WorkflowExecutor.inbox` page.
    """

    instance_id: str
    graph_id: str
    node_id: str
    node_title: str
    state: TaskState
    candidates: tuple[str, ...]
    lineage: tuple[str, ...]
    opened_at: datetime
    cursor: int


@dataclass(frozen=True, kw_only=True)
class InstanceSummary:
    """One instance as :meth:`WorkflowExecutor.instances` lists it. ``creator`` is the auditor
    of the instance's first write; ``finished_at`` is set for every closed status and ``None``
    while RUNNING; times are naive UTC; ``cursor`` is for the ``after`` of the next page."""

    instance_id: str
    graph_id: str | None
    status: InstanceStatus
    creator: str | None
    created_at: datetime | None
    updated_at: datetime | None
    finished_at: datetime | None
    cursor: int


@dataclass(frozen=True, kw_only=True)
class IndexedTask:
    """An open task as a repository stores it for one instance (no instance id, no cursor).
    ``graph_id`` names the sub-graph its node belongs to, ``None`` for the instance's own
    (root) graph."""

    node_id: str
    node_title: str
    state: TaskState
    candidates: tuple[str, ...]
    lineage: tuple[str, ...]
    opened_at: datetime
    graph_id: str | None = None

    def graph_of(self, index: InstanceIndex) -> str:
        """The id of the graph the task's node belongs to, in the instance ``index``."""
        return self.graph_id or index.graph_id


@dataclass(frozen=True, kw_only=True)
class InstanceIndex:
    """What the aggregate stores for one instance besides its node states."""

    graph_id: str
    status: InstanceStatus
    finished_at: datetime | None
    tasks: tuple[IndexedTask, ...]

    def same_as(self, other: InstanceIndex | None) -> bool:
        """True when writing ``self`` over ``other`` would change nothing a query returns."""
        return other is not None and (self.graph_id, self.status, self.tasks) == (
            other.graph_id,
            other.status,
            other.tasks,
        )


@dataclass(frozen=True, kw_only=True)
class IndexRead:
    """An instance as one unit of work found it: its node states (a copy) and its stored
    aggregate (``None`` for a new instance, or one written before the index existed).
    ``stored_before`` says whether anything of the instance was stored before this unit of
    work — false for an unknown id; true for a row with empty states (the Go plugin's
    restart writes ``{}``), which is still an instance at its first task.
    ``stored_graph_id`` is the id of the graph stored with the instance, where a repository
    keeps one and nothing else tells which graph the instance runs: not indexed yet, and no
    states (``None`` otherwise)."""

    states: Mapping[str, int]
    stored: InstanceIndex | None
    stored_before: bool = True
    stored_graph_id: str | None = None


@runtime_checkable
class SupportsTaskIndex(Protocol):
    """The optional repository capability behind inbox, status, withdraw and send-back.

    The executor calls ``index_read`` at the start and ``index_changes``/``index_write`` at the
    end of an operation, inside the repository's ``unit_of_work``: the aggregate is written in
    the same transaction as the states, and only when it changed. The query methods run on
    their own (a read each). ``keeps_task_index`` must be true for the executor to use it (a
    repository class may offer the capability and have it switched off).
    """

    keeps_task_index: bool

    def index_read(self, ctx: FlowContext) -> IndexRead: ...

    def index_changes(self, ctx: FlowContext) -> tuple[Mapping[str, int], bool]:
        """The states as the unit holds them now, and whether the stored variables change."""
        ...

    def index_write(
        self, ctx: FlowContext, index: InstanceIndex, *, bookkeeping: bool = False
    ) -> None:
        """Store ``index`` with the unit of work. ``bookkeeping`` (a reindex): nothing about
        the instance changed, so its last-update audit (who, when) stays as it was."""
        ...

    def index_inbox(
        self,
        identities: Sequence[str],
        *,
        graph_id: str | None,
        limit: int,
        after: int | None,
        connection: object = None,
    ) -> list[OpenTask]:
        """One page of the inbox; run on ``connection`` (the caller's ``ctx.connection``)
        when the repository can, so it sees the caller's own uncommitted work."""
        ...

    def index_open_tasks(
        self, instance_id: str, *, connection: object = None
    ) -> list[OpenTask]: ...

    def index_status(
        self, instance_id: str, *, connection: object = None
    ) -> InstanceStatus | None: ...

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
        """As :meth:`index_inbox`, each query runs on ``connection`` when one is given and
        the repository can use it."""
        ...


__all__ = [
    "LINEAGE_LIMIT",
    "MAX_CURSOR",
    "MAX_IDENTITIES",
    "MAX_PAGE_SIZE",
    "IndexRead",
    "IndexedTask",
    "InstanceIndex",
    "InstanceStatus",
    "InstanceSummary",
    "OpenTask",
    "SupportsTaskIndex",
    "utc_now",
]
