"""Task states and task actions, with the reference codes (shared with the Java and Go ports)."""

from __future__ import annotations

from enum import IntEnum


class TaskState(IntEnum):
    """The state of one node of one instance, as stored in a repository."""

    UNKNOWN = 0
    WAITING = 1001
    COMPLETED = 1002
    TERMINATED = 1003

    @classmethod
    def of(cls, code: int | None) -> TaskState:
        """The state with ``code``; unknown codes (and ``None``) give ``UNKNOWN``."""
        if code is None:
            return cls.UNKNOWN
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


class TaskAction(IntEnum):
    """What a submit does to a task; ``target_state`` is the state the action stands for."""

    UNKNOWN = 0
    BACK = 1010
    BACK_JUMP = 1011
    FORWARD = 1020
    FORWARD_JUMP = 1021
    TERMINATE = 1030
    RESTART = 1040

    @property
    def target_state(self) -> TaskState:
        """BACK/BACK_JUMP → WAITING, FORWARD/FORWARD_JUMP → COMPLETED, TERMINATE → TERMINATED,
        RESTART/UNKNOWN → UNKNOWN."""
        return _TARGETS[self]

    @classmethod
    def of(cls, code: int | None) -> TaskAction:
        """The action with ``code``; unknown codes (and ``None``) give ``UNKNOWN``."""
        if code is None:
            return cls.UNKNOWN
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


_TARGETS: dict[TaskAction, TaskState] = {
    TaskAction.UNKNOWN: TaskState.UNKNOWN,
    TaskAction.BACK: TaskState.WAITING,
    TaskAction.BACK_JUMP: TaskState.WAITING,
    TaskAction.FORWARD: TaskState.COMPLETED,
    TaskAction.FORWARD_JUMP: TaskState.COMPLETED,
    TaskAction.TERMINATE: TaskState.TERMINATED,
    TaskAction.RESTART: TaskState.UNKNOWN,
}

__all__ = ["TaskAction", "TaskState"]
