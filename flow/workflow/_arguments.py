"""The executor's argument checks: each bad argument gets the same typed error on every
repository, before anything is read or written (a driver would otherwise answer differently
per database, or fail with a bare ``TypeError``/``OverflowError``)."""

from __future__ import annotations

import decimal
import enum
import operator
import uuid

from flow._text import safe_repr
from flow.codec import int_text_limit, too_long_for_text
from flow.context import FlowContext
from flow.errors import ContextValueError
from flow.graph import Graph, Node
from flow.workflow.aggregate import (
    MAX_CURSOR,
    MAX_IDENTITIES,
    MAX_PAGE_SIZE,
    InstanceStatus,
    OpenTask,
)
from flow.workflow.errors import InvalidArgumentTypeError, InvalidInstanceIdError, InvalidQueryError
from flow.workflow.states import TaskState, member_with_code
from flow.workflow.task import Task


def check_page(limit: int, after: int | None) -> None:
    """A page size of 1..MAX_PAGE_SIZE and a cursor a row id can be (0..MAX_CURSOR): beyond
    them a driver would raise ``OverflowError`` or fetch without bound."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidQueryError(
            f"limit must be an integer from 1 to {MAX_PAGE_SIZE}, got {safe_repr(limit)}"
        )
    if after is not None and (
        isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= MAX_CURSOR
    ):
        raise InvalidQueryError(
            f"after must be a cursor from a previous page, got {safe_repr(after)}"
        )


def checked_identities(identities: tuple[object, ...]) -> tuple[str, ...]:
    """The controller's ``identities(ctx)`` for an inbox: strings (a number would match on
    one database and fail on another), at most :data:`MAX_IDENTITIES` distinct ones (an
    unbounded list would make an unbounded statement); :class:`InvalidQueryError` else."""
    distinct: dict[str, None] = {}
    for identity in identities:
        if not isinstance(identity, str):
            raise InvalidQueryError(f"identity must be a string, got {type(identity).__name__}")
        if identity:  # "" names nobody (on SQL it would match the sentinel rows' candidate)
            distinct[identity] = None
    if len(distinct) > MAX_IDENTITIES:
        raise InvalidQueryError(
            f"identities(ctx) gave {len(distinct)} distinct identities; an inbox matches at "
            f"most {MAX_IDENTITIES} (give the controller's identities the roles and groups "
            "that tasks name as candidates)"
        )
    return tuple(distinct)


def checked_instance_id(instance_id: object) -> str:
    """``instance_id`` when it can name an instance; :class:`InvalidInstanceIdError` for
    ``""``, whitespace and non-strings, on every repository alike."""
    if not isinstance(instance_id, str) or not instance_id or instance_id.isspace():
        raise InvalidInstanceIdError(instance_id)
    return instance_id


def check_filter(name: str, value: object) -> None:
    """A query filter is text or ``None``: a number or a list would reach the driver, which
    answers differently per database (an error on PostgreSQL, no match on the others)."""
    if value is not None and not isinstance(value, str):
        raise InvalidQueryError(f"{name} must be a string or None, got {safe_repr(value)}")


def check_context(ctx: object) -> None:
    """Every operation takes the instance's :class:`FlowContext` (``None`` or a dict would
    fail deep inside the walk or the controller with a bare ``AttributeError``)."""
    if not isinstance(ctx, FlowContext):
        raise InvalidArgumentTypeError("ctx", ctx, "a FlowContext (FlowContext.of(instance_id))")


def check_task(task: object, ctx: FlowContext) -> None:
    """A submit takes the ``Task`` a claim or find returned (an inbox's ``OpenTask`` is
    claimed first: ``claim_task`` returns the ``Task``) — or one built by hand, whose fields
    are checked too (a wrong one failed with a bare ``AttributeError``)."""
    if not isinstance(task, Task):
        raise InvalidArgumentTypeError(
            "task", task, "a Task from claim_task or find_task", instance_id=ctx.instance_id
        )
    fields = (
        ("task.root_graph", task.root_graph, Graph, "a Graph"),
        ("task.node", task.node, Node, "a Node"),
        ("task.state", task.state, TaskState, "a TaskState"),
        ("task.context", task.context, FlowContext, "a FlowContext"),
    )
    for name, value, kind, expected in fields:
        if not isinstance(value, kind):
            raise InvalidArgumentTypeError(name, value, expected, instance_id=ctx.instance_id)


def check_node(node: object, ctx: FlowContext) -> None:
    """A node given as an object (``get_state``)."""
    if not isinstance(node, Node):
        raise InvalidArgumentTypeError(
            "node", node, "a Node of the graph", instance_id=ctx.instance_id
        )


def check_message(message: object, ctx: FlowContext) -> None:
    """An approver's comment is text or ``None`` (checked before anything is read)."""
    if message is not None and not isinstance(message, str):
        raise InvalidArgumentTypeError(
            "message", message, "a string or None", instance_id=ctx.instance_id
        )


_EXPECTED_IDENTITY = "a string, an integer, a UUID or an enum member"


def identity_text(value: object, key: str, instance_id: object) -> str:
    """Who acts or audits, as the text stored in history and instance rows (``assignee``,
    ``creator``): a string as it is; an integer — anything with ``__index__`` (NumPy's
    ``int64``, an ``IntFlag``), a whole ``Decimal`` — as its decimal digits; a ``UUID`` or an
    enum member as its ``str()``.

    Anything else is refused, on every repository alike, with
    :class:`InvalidArgumentTypeError`: a bool, a float, bytes, a collection, any other object
    — stored, it would read as some repr (``b"bob"`` as ``"b'bob'"``, an object with its
    memory address) — and a value whose conversion raises;
    :class:`ContextValueError` for an integer with more digits than Python writes as text.
    Both name ``key`` and the instance. The text is always a plain ``str``: a subclass's
    own ``__str__``/``__eq__`` never reach storage.
    """
    if type(value) is str:  # the usual case, on every operation
        return value
    if isinstance(value, str):
        return str.__str__(value)
    try:
        number = _whole_number(value)
        if number is None and isinstance(value, uuid.UUID | enum.Enum):
            return str.__str__(str(value))
    except Exception as exc:  # an __index__ or __str__ of the caller's that raises
        raise InvalidArgumentTypeError(
            key, value, _EXPECTED_IDENTITY, instance_id=instance_id
        ) from exc
    if number is None:
        raise InvalidArgumentTypeError(key, value, _EXPECTED_IDENTITY, instance_id=instance_id)
    if too_long_for_text(number):
        raise ContextValueError(
            f"{key}: integer with more than {int_text_limit()} digits cannot be written as text",
            instance_id=instance_id if isinstance(instance_id, str) else None,
        )
    return int.__repr__(number)


#: Where the default auditor looks, in order, for who writes (an instance's creator, the
#: SQL rows' ``creator``/``updater``), as the Go plugin does.
AUDIT_KEYS: tuple[str, ...] = ("auditor", "creator", "actor")


def default_auditor(ctx: FlowContext) -> str | None:
    """Who writes: the context's ``auditor``, else ``creator``, else ``actor``, as text (see
    :func:`identity_text` for the values refused, before anything is written); ``None`` when
    the context names nobody. The in-memory repository and flow_sqla both use it."""
    data = ctx.data
    for key in AUDIT_KEYS:
        value = data.get(key)
        if value is not None:
            return identity_text(value, key, ctx.instance_id)
    return None


def _whole_number(value: object) -> int | None:
    """``value`` as an ``int`` when it is a whole number and no bool: an ``int`` (an
    ``IntEnum``/``IntFlag`` too), another library's integer (``__index__``), a whole, finite
    ``Decimal``; else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, decimal.Decimal):
        whole = value.is_finite() and value == value.to_integral_value()
        return int(value) if whole else None
    if getattr(type(value), "__index__", None) is None:
        return None
    return operator.index(value)  # type: ignore[arg-type]


def checked_status(status: InstanceStatus | int) -> InstanceStatus:
    """An ``instances(status=...)`` filter: a member or its code."""
    member = member_with_code(InstanceStatus, status)
    if member is None:
        raise InvalidQueryError(f"unknown instance status {safe_repr(status)}")
    return member


def check_sendable(task: object, ctx: FlowContext) -> None:
    """``send_back`` takes a claimed ``Task`` or an inbox's ``OpenTask``."""
    if not isinstance(task, (Task, OpenTask)):
        raise InvalidArgumentTypeError(
            "task", task, "a Task, an OpenTask or None", instance_id=ctx.instance_id
        )
    if isinstance(task, Task):
        check_task(task, ctx)
    if isinstance(task, OpenTask) and not isinstance(task.node_id, str):
        # An OpenTask built by hand: its node id is looked up in the graph.
        raise InvalidArgumentTypeError(
            "task.node_id", task.node_id, "a node id (str)", instance_id=ctx.instance_id
        )


__all__ = [
    "AUDIT_KEYS",
    "check_context",
    "check_filter",
    "check_message",
    "check_node",
    "check_page",
    "check_sendable",
    "check_task",
    "checked_identities",
    "checked_instance_id",
    "checked_status",
    "default_auditor",
    "identity_text",
]
