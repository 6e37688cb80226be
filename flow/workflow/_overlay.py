"""A repository view for dry walks: reads go through, writes stay in the view."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flow.workflow.repository import state_key
from flow.workflow.states import TaskState

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Node
    from flow.workflow.repository import StateRepository


class OverlayRepository:
    """Reads through to ``base`` (with the caller's context, so a transactional repository
    answers from the caller's unit of work); keeps every write to itself."""

    def __init__(self, base: StateRepository, ctx: FlowContext) -> None:
        self._base = base
        self._ctx = ctx
        self._states: dict[str, TaskState] = {}
        self._cleared = False

    def vars_get(self, ctx: FlowContext, node: Node) -> Mapping[str, Any] | None:
        return self._base.vars_get(self._ctx, node)

    def state_get(self, ctx: FlowContext, node: Node) -> TaskState:
        key = state_key(node)
        if key in self._states:
            return self._states[key]
        if self._cleared:
            return TaskState.UNKNOWN
        return self._base.state_get(self._ctx, node)

    def state_put(self, ctx: FlowContext, node: Node, state: TaskState) -> None:
        self._states[state_key(node)] = state

    def state_remove(self, ctx: FlowContext, node: Node) -> None:
        self._states[state_key(node)] = TaskState.UNKNOWN

    def state_clear(self, ctx: FlowContext) -> None:
        self._states.clear()
        self._cleared = True


__all__ = ["OverlayRepository"]
