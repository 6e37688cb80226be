"""State controllers: who may operate a node, and which nodes advance on their own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from flow.node_type import NodeType
from flow.workflow._arguments import identity_text
from flow.workflow.errors import InvalidArgumentTypeError, InvalidQueryError

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


@runtime_checkable
class SupportsCandidates(Protocol):
    """Who may operate a node, as strings the task index can store and match.

    ``candidates(node)`` names who may operate ``node``; ``identities(ctx)`` names who the
    context is, in the same vocabulary: a task is in a context's inbox when the two meet. The
    built-in controllers implement both; a custom controller without them counts as
    ``("*",)`` on both sides (every open task in every inbox).
    """

    def candidates(self, node: Node) -> tuple[str, ...]: ...

    def identities(self, ctx: FlowContext) -> tuple[str, ...]: ...


#: The candidate (and identity) meaning "anyone".
ANYONE = "*"


def candidates_of(controller: object, node: Node) -> tuple[str, ...]:
    """``controller.candidates(node)``, or ``("*",)`` when the controller has no such method.

    Raises :class:`~flow.workflow.errors.InvalidArgumentTypeError` naming the node when the
    answer is not a collection: one string would be taken letter by letter (a task stored
    for ``"a"``, ``"c"``, ... — in the inbox of whoever is named by one letter)."""
    method = getattr(controller, "candidates", None)
    if method is None:
        return (ANYONE,)
    answer = method(node)
    if not _is_collection(answer):
        raise InvalidArgumentTypeError(
            f"{type(controller).__name__}.candidates() of node {node.graph.id}:{node.id}",
            answer,
            "a tuple or list of strings",
        )
    return tuple(answer)


def identities_of(controller: object, ctx: FlowContext) -> tuple[str, ...]:
    """``controller.identities(ctx)``, or ``("*",)`` when the controller has no such method.

    Raises :class:`~flow.workflow.errors.InvalidQueryError` when the answer is not a
    collection (one string would be matched letter by letter: an empty inbox)."""
    method = getattr(controller, "identities", None)
    if method is None:
        return (ANYONE,)
    answer = method(ctx)
    if not _is_collection(answer):
        raise InvalidQueryError(
            f"{type(controller).__name__}.identities(ctx) must return a tuple or list of "
            f"strings, not {type(answer).__name__}"
        )
    return tuple(answer)


def _is_collection(answer: object) -> bool:
    """Something to iterate over (a tuple, list, set, generator, a class with only
    ``__getitem__``) — not text, bytes or a mapping (whose keys alone would be taken)."""
    if isinstance(answer, str | bytes | bytearray | Mapping):
        return False
    try:
        iter(answer)  # type: ignore[call-overload]
    except TypeError:
        return False
    return True


class BlockStateController:
    """Every activity is a human task anyone may operate; everything else runs automatically."""

    def is_operatable(self, ctx: FlowContext, node: Node) -> bool:
        return node.type == NodeType.ACTIVITY

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool:
        return node.type != NodeType.ACTIVITY

    def candidates(self, node: Node) -> tuple[str, ...]:
        """Anyone: ``("*",)``."""
        return (ANYONE,)

    def identities(self, ctx: FlowContext) -> tuple[str, ...]:
        """Anyone: ``("*",)``."""
        return (ANYONE,)

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

    def candidates(self, node: Node) -> tuple[str, ...]:
        """No human tasks: nobody."""
        return ()

    def identities(self, ctx: FlowContext) -> tuple[str, ...]:
        return ()

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

    def candidates(self, node: Node) -> tuple[str, ...]:
        """``"<key>:<meta value>"`` for each key the node's meta has, e.g. ``"actor:boss"``,
        ``"role:finance"``."""
        found = []
        for key in self.keys:
            value = node.meta_as_str(key)
            if value is not None:
                found.append(f"{key}:{value}")
        return tuple(found)

    def identities(self, ctx: FlowContext) -> tuple[str, ...]:
        """``"<key>:<context value>"`` for each key the context holds as text (what
        :meth:`is_operatable` compares against)."""
        found = []
        for key in self.keys:
            value = ctx.get(key)
            if isinstance(value, str):
                found.append(f"{key}:{value}")
        return tuple(found)

    def actor_of(self, ctx: FlowContext) -> str | None:
        """The context's value for the first key it holds (the assignee of a task record), as
        text; a value that is neither a string nor an integer raises (see
        :func:`~flow.workflow._arguments.identity_text`)."""
        for key in self.keys:
            value = ctx.get(key)
            if value is not None:
                return identity_text(value, key, ctx.instance_id)
        return None

    def __repr__(self) -> str:
        return f"ActorStateController{self.keys!r}"


__all__ = [
    "ANYONE",
    "ActorStateController",
    "BlockStateController",
    "NotBlockStateController",
    "StateController",
    "SupportsCandidates",
    "candidates_of",
    "identities_of",
]
