"""A human (or automatic) task: one node of one instance, with the state a walk found it in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flow.context import NonSerializable
from flow.workflow.states import TaskState

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Graph, Node
    from flow.trace import NodeRecord


@dataclass(frozen=True, kw_only=True, eq=False)
class Task(NonSerializable):
    """A task as returned by claim/find/find-next.

    ``state`` is the state seen by the walk that produced it (not re-read); ``last_record`` and
    ``is_end`` read the context's trace when asked, so they follow later calls on that context.
    """

    root_graph: Graph
    node: Node
    state: TaskState
    context: FlowContext = field(repr=False)

    @property
    def node_id(self) -> str:
        return self.node.id

    @property
    def last_record(self) -> NodeRecord | None:
        """The context's last record of its root graph (dynamic)."""
        return self.context.last_record

    @property
    def is_end(self) -> bool:
        """True when the context's last record is an END node."""
        record = self.context.last_record
        return record is not None and record.is_end

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Task):
            return NotImplemented
        return (
            self.root_graph.id == other.root_graph.id
            and self.node == other.node
            and self.state == other.state
        )

    def __hash__(self) -> int:
        return hash((self.root_graph.id, self.node, self.state))


__all__ = ["Task"]
