"""What the current executor call wants from a walk; lives in the context only during a call."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from flow.context import NonSerializable

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Graph
    from flow.workflow.task import Task

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

    __slots__ = ("next_tasks", "root_graph", "task", "type")

    def __init__(self, root_graph: Graph, type: IntentType) -> None:
        self.root_graph = root_graph
        self.type = type
        self.task: Task | None = None
        self.next_tasks: list[Task] = []

    def __repr__(self) -> str:
        return f"WorkflowIntent({self.type.name}, graph={self.root_graph.id!r}, task={self.task!r})"


def current_intent(ctx: FlowContext) -> WorkflowIntent | None:
    """The intent of the running call, or ``None`` when the graph is evaluated directly."""
    value = ctx.get(INTENT_KEY)
    return value if isinstance(value, WorkflowIntent) else None


__all__ = ["INTENT_KEY", "IntentType", "WorkflowIntent", "current_intent"]
