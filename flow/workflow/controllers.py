"""State controllers: who may operate a node, and which nodes advance on their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from flow.node_type import NodeType

if TYPE_CHECKING:
    from flow.context import FlowContext
    from flow.graph import Node


@runtime_checkable
class StateController(Protocol):
    """Decides, per context and node, whether the node is a human task this context may
    operate (:meth:`is_operatable`) and whether it runs without a human (:meth:`is_auto_forward`).
    Answers should depend only on the context and node: a walk asks about nodes that are not
    settled yet, and passes COMPLETED (stops at TERMINATED) ones without asking.
    """

    def is_operatable(self, ctx: FlowContext, node: Node) -> bool: ...

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool: ...


class BlockStateController:
    """Every activity is a human task anyone may operate; everything else runs automatically."""

    def is_operatable(self, ctx: FlowContext, node: Node) -> bool:
        return node.type == NodeType.ACTIVITY

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool:
        return node.type != NodeType.ACTIVITY

    def __repr__(self) -> str:
        return "BlockStateController()"


class NotBlockStateController:
    """Everything runs automatically; only ``stop()``/``interrupt()`` inside a task leaves a
    node WAITING. As in the Java reference, every node auto-forwards (the Go port differs: it
    keeps activities as human tasks)."""

    def is_operatable(self, ctx: FlowContext, node: Node) -> bool:
        return True

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool:
        return True

    def __repr__(self) -> str:
        return "NotBlockStateController()"


class ActorStateController:
    """Nodes carrying one of ``keys`` in their meta are human tasks; a context may operate one
    when, for some key, the node's meta value is set and equals the context's value (compared
    as text; a non-text context value never matches). Nodes without any key, and END, advance
    automatically — so a gateway with an actor meta becomes a human task too."""

    def __init__(self, *keys: str) -> None:
        self.keys: tuple[str, ...] = tuple(dict.fromkeys(keys or ("actor",)))

    def is_operatable(self, ctx: FlowContext, node: Node) -> bool:
        for key in self.keys:
            expected = node.meta_as_str(key)
            if expected is not None and expected == ctx.get(key):
                return True
        return False

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool:
        if node.type == NodeType.END:
            return True
        return node.meta.keys().isdisjoint(self.keys)

    def actor_of(self, ctx: FlowContext) -> str | None:
        """The context's value for the first key it holds (the assignee of a task record)."""
        for key in self.keys:
            value = ctx.get(key)
            if value is not None:
                return str(value)
        return None

    def __repr__(self) -> str:
        return f"ActorStateController{self.keys!r}"


__all__ = [
    "ActorStateController",
    "BlockStateController",
    "NotBlockStateController",
    "StateController",
]
