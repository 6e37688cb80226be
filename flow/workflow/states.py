"""Task states and task actions, with the reference codes (shared with the Java and Go ports)."""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar, cast

_Code = TypeVar("_Code", bound=IntEnum)


def member_with_code(enum: type[_Code], code: object) -> _Code | None:
    """The member of ``enum`` whose value is ``code``; ``None`` for anything else.

    Looked up by value, not by calling the enum: its "is not a valid" error ``repr()``s the
    code, which raises for an integer past Python's digit limit or a broken ``__repr__``."""
    try:
        member = enum._value2member_map_.get(code)
    except TypeError:  # unhashable (a list, a dict): no code
        return None
    return None if member is None else cast(_Code, member)


def _member_or_unknown(enum: type[_Code], code: int | None) -> _Code:
    """The member of ``enum`` with ``code``, else its UNKNOWN member (code 0), as the reference's
    ``codeOf`` does for codes written by other services."""
    member = member_with_code(enum, code)
    return enum(0) if member is None else member


class TaskState(IntEnum):
    """The state of one node of one instance, as stored in a repository."""

    UNKNOWN = 0
    WAITING = 1001
    COMPLETED = 1002
    TERMINATED = 1003

    @classmethod
    def of(cls, code: int | None) -> TaskState:
        """The state with ``code``; unknown codes (and ``None``) give ``UNKNOWN``."""
        return _member_or_unknown(cls, code)


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
        return _member_or_unknown(cls, code)


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
