"""Human tasks on top of the engine: states, actions, controllers, repositories, the executor.

A :class:`WorkflowExecutor` walks a graph for one instance (``ctx.instance_id``), keeping each
node's :class:`TaskState` in a :class:`StateRepository`; a :class:`StateController` decides which
nodes wait for a person and who may operate them.
"""

from __future__ import annotations

from flow.workflow.aggregate import (
    MAX_CURSOR,
    MAX_IDENTITIES,
    MAX_PAGE_SIZE,
    IndexedTask,
    IndexRead,
    InstanceIndex,
    InstanceStatus,
    InstanceSummary,
    OpenTask,
    SupportsTaskIndex,
)
from flow.workflow.controllers import (
    ActorStateController,
    BlockStateController,
    NotBlockStateController,
    StateController,
    SupportsCandidates,
)
from flow.workflow.driver import WorkflowDriver
from flow.workflow.errors import (
    ConcurrentSubmitError,
    GraphMismatchError,
    IndexUnavailableError,
    InstanceClosedError,
    InvalidActionError,
    InvalidArgumentTypeError,
    InvalidInstanceIdError,
    InvalidQueryError,
    SendBackError,
    TaskNotWaitingError,
)
from flow.workflow.executor import WorkflowExecutor
from flow.workflow.records import TaskRecord, TaskRecorder
from flow.workflow.repository import InMemoryStateRepository, StateRepository, SupportsUnitOfWork
from flow.workflow.states import TaskAction, TaskState
from flow.workflow.task import Task

__all__ = [
    "MAX_CURSOR",
    "MAX_IDENTITIES",
    "MAX_PAGE_SIZE",
    "ActorStateController",
    "BlockStateController",
    "ConcurrentSubmitError",
    "GraphMismatchError",
    "InMemoryStateRepository",
    "IndexRead",
    "IndexUnavailableError",
    "IndexedTask",
    "InstanceClosedError",
    "InstanceIndex",
    "InstanceStatus",
    "InstanceSummary",
    "InvalidActionError",
    "InvalidArgumentTypeError",
    "InvalidInstanceIdError",
    "InvalidQueryError",
    "NotBlockStateController",
    "OpenTask",
    "SendBackError",
    "StateController",
    "StateRepository",
    "SupportsCandidates",
    "SupportsTaskIndex",
    "SupportsUnitOfWork",
    "Task",
    "TaskAction",
    "TaskNotWaitingError",
    "TaskRecord",
    "TaskRecorder",
    "TaskState",
    "WorkflowDriver",
    "WorkflowExecutor",
]
