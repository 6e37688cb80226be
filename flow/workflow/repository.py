"""Where node states live: the :class:`StateRepository` protocol and the in-memory default.

States are kept per instance (``ctx.instance_id``) under the key ``"<graphId>:<nodeId>"``,
the same key the Java/Go ports and ``flow_sqla`` use.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from flow.workflow.states import TaskState

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Node


def state_key(node: Node) -> str:
    """The repository key of a node: ``"<graphId>:<nodeId>"``."""
    return f"{node.graph.id}:{node.id}"


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


class InMemoryStateRepository:
    """The default repository: a dict per instance, safe to share between threads.

    Its :meth:`unit_of_work` journals what an operation changes and puts it back if the
    operation raises, so a failing submit (a task error, a failing recorder) leaves no trace —
    the same guarantee the SQL repository gives with a transaction. It is public so users can
    use it as a test double.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, dict[str, int]] = {}
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


__all__ = [
    "InMemoryStateRepository",
    "StateRepository",
    "SupportsUnitOfWork",
    "state_key",
]
