"""Errors of the human-task layer (all :class:`~flow.errors.FlowError` subclasses)."""

from __future__ import annotations

from flow._text import safe_repr
from flow.errors import FlowError, InvalidArgumentTypeError


class InvalidActionError(FlowError, ValueError):
    """A submit was asked to perform ``TaskAction.UNKNOWN`` (or a code that is no action).

    Also a ``ValueError`` because the caller passed a bad argument; the reference raises
    ``IllegalArgumentException`` here.
    """

    def __init__(self, action: object, *, graph_id: str | None = None, node_id: str | None = None):
        self.action = action
        self.graph_id = graph_id
        self.node_id = node_id
        where = f" (graph {graph_id!r}, node {node_id!r})" if graph_id is not None else ""
        super().__init__(f"Task action is UNKNOWN: {safe_repr(action)}{where}")


class TaskNotWaitingError(FlowError):
    """A task was expected to be WAITING for this context but is not (for callers that prefer
    an exception to the ``False`` of :meth:`WorkflowExecutor.submit_task_if_waiting`)."""

    def __init__(self, instance_id: str, graph_id: str, node_id: str, state: object) -> None:
        self.instance_id = instance_id
        self.graph_id = graph_id
        self.node_id = node_id
        self.state = state
        super().__init__(
            f"Task {graph_id}:{node_id} of instance {safe_repr(instance_id)} is not waiting "
            f"(state {safe_repr(state)})"
        )


class ConcurrentSubmitError(FlowError):
    """The instance lock could not be taken (lock timeout or deadlock). Retryable: nothing of
    the failed operation was kept, so the caller may simply try again."""

    def __init__(self, instance_id: str, message: str | None = None) -> None:
        self.instance_id = instance_id
        self.retryable = True
        super().__init__(
            message
            or f"Instance {safe_repr(instance_id)} is locked by a concurrent operation; retry the "
            "submit"
        )


class InvalidInstanceIdError(FlowError, ValueError):
    """A workflow operation got no usable instance id: ``""`` (a ``FlowContext`` made without
    one), an id of only whitespace, or a value that is not a string. Every repository would
    otherwise keep the states of all such calls under one shared key. Ids are otherwise kept
    exactly as given (case, accents and surrounding spaces included)."""

    def __init__(self, instance_id: object) -> None:
        self.instance_id = instance_id
        if not isinstance(instance_id, str):
            reason = f"must be a string, got {type(instance_id).__name__}"
        else:
            reason = "must not be empty or only whitespace"
        super().__init__(f"Invalid instance id {safe_repr(instance_id)}: {reason}")


class InstanceClosedError(FlowError):
    """A submit other than RESTART on a WITHDRAWN instance (``submit_task_if_waiting``
    returns ``False`` instead). Nothing was written."""

    def __init__(self, instance_id: str, status: object) -> None:
        self.instance_id = instance_id
        self.status = status
        name = getattr(status, "name", status)
        super().__init__(
            f"Instance {safe_repr(instance_id)} is {name}: only a RESTART submit may change it"
        )


class GraphMismatchError(FlowError, ValueError):
    """An instance operation named a graph the instance does not run (its stored task index,
    or every stored state, belongs to another graph). Nothing was written."""

    def __init__(self, instance_id: str, graph_id: str, stored_graph_id: str | None) -> None:
        self.instance_id = instance_id
        self.graph_id = graph_id
        self.stored_graph_id = stored_graph_id
        runs = f"graph {safe_repr(stored_graph_id)}" if stored_graph_id else "another graph"
        super().__init__(
            f"Instance {safe_repr(instance_id)} runs {runs}, not graph {safe_repr(graph_id)}"
        )


class SendBackError(FlowError):
    """``send_back`` refused: the task has no single earlier human task to go back to
    (``reason`` says why). Nothing was written."""

    def __init__(self, instance_id: str, graph_id: str, node_id: str, reason: str) -> None:
        self.instance_id = instance_id
        self.graph_id = graph_id
        self.node_id = node_id
        self.reason = reason
        super().__init__(
            f"Cannot send back task {graph_id}:{node_id} of instance {safe_repr(instance_id)}: "
            f"{reason}"
        )


class IndexUnavailableError(FlowError):
    """An inbox/status/withdraw/send-back call on an executor whose state repository keeps no
    task index (e.g. ``sql_workflow(..., index=False)``)."""

    def __init__(self, repository: object, operation: str) -> None:
        self.repository = repository
        self.operation = operation
        super().__init__(
            f"{operation}() needs a state repository that keeps the task index; "
            f"{safe_repr(repository)} does not (use sql_workflow(..., index=True) or "
            "InMemoryStateRepository)"
        )


class InvalidQueryError(FlowError, ValueError):
    """A query argument is out of range (a ``limit`` below 1, a negative cursor...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


__all__ = [
    "ConcurrentSubmitError",
    "GraphMismatchError",
    "IndexUnavailableError",
    "InstanceClosedError",
    "InvalidActionError",
    "InvalidArgumentTypeError",
    "InvalidInstanceIdError",
    "InvalidQueryError",
    "SendBackError",
    "TaskNotWaitingError",
]
