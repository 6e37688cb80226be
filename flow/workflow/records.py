"""Task history: one :class:`TaskRecord` per successful submit, given to a ``TaskRecorder``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from flow.workflow.states import TaskAction, TaskState

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Node


@dataclass(frozen=True, kw_only=True)
class TaskRecord:
    """What one submit did: from ``source`` (the submitted node) to ``target`` (the task that is
    current afterwards, else the last node reached — END when the flow finished — else the
    source), with the action's target ``state``. ``created_at`` is timezone-aware UTC."""

    instance_id: str
    graph_id: str
    task_id: str
    source: Node
    target: Node
    action: TaskAction
    state: TaskState
    assignee: str
    message: str | None
    form_id: int | None
    variables: Mapping[str, Any]
    created_at: datetime


@runtime_checkable
class TaskRecorder(Protocol):
    """Receives one record per successful submit, inside the submit's unit of work: if it
    raises, the submit fails and its state changes are discarded."""

    def record(self, ctx: FlowContext, record: TaskRecord) -> None: ...


def form_id_of(node: Node) -> int | None:
    """Node meta ``formId`` as an int (ints, integral floats, digit strings), else ``None``."""
    value = node.meta.get("formId")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


__all__ = ["TaskRecord", "TaskRecorder", "form_id_of"]
