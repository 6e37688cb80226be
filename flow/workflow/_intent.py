"""What the current executor call wants from a walk; lives in the context only during a call."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from flow.context import NonSerializable
from flow.workflow.task import Task

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Graph, Node
    from flow.workflow.states import TaskState

INTENT_KEY = "WorkflowIntent"


class IntentType(Enum):
    UNKNOWN = "unknown"
    CLAIM_TASK = "claim_task"
    FIND_TASK = "find_task"
    FIND_NEXT_TASKS = "find_next_tasks"
    SUBMIT_TASK = "submit_task"
    SUBMIT_TASK_IF_WAITING = "submit_task_if_waiting"


class WorkflowIntent(NonSerializable):
    """The call's kind plus what the walk found: ``task`` (the last one set by the state
    machine) and ``next_tasks`` (every frontier task, in discovery order)."""

    __slots__ = ("_found", "_task", "next_tasks", "root_graph", "type")

    def __init__(self, root_graph: Graph, type: IntentType) -> None:
        self.root_graph = root_graph
        self.type = type
        self._task: Task | None = None
        self._found: tuple[Node, TaskState, FlowContext] | None = None
        self.next_tasks: list[Task] = []

    @property
    def task(self) -> Task | None:
        found = self._found
        if found is not None:
            node, state, context = found
            self._task = Task(root_graph=self.root_graph, node=node, state=state, context=context)
            self._found = None
        return self._task

    @task.setter
    def task(self, task: Task | None) -> None:
        self._task = task
        self._found = None

    def found(self, node: Node, state: TaskState, context: FlowContext) -> None:
        """Set :attr:`task` to ``node`` in ``state``, built only when it is read: a find walk
        sets it at every node it passes, and only the last one counts."""
        self._found = (node, state, context)

    def __repr__(self) -> str:
        return f"WorkflowIntent({self.type.name}, graph={self.root_graph.id!r}, task={self.task!r})"


def current_intent(ctx: FlowContext) -> WorkflowIntent | None:
    """The intent of the running call, or ``None`` when the graph is evaluated directly."""
    value = ctx.get(INTENT_KEY)
    return value if isinstance(value, WorkflowIntent) else None


__all__ = ["INTENT_KEY", "IntentType", "WorkflowIntent", "current_intent"]
