"""What each field of a graph may hold, checked once when the graph is built.

The loader turns the scalars of a graph text into each field's type (``title: 5`` becomes
``"5"``, a missing node id ``n-<position>``); a :class:`~flow.spec.GraphSpec` filled in code
gets the declared types checked here instead, when ``create()`` builds the graph — so a wrong
value is a :class:`~flow.errors.GraphDefinitionError` naming the graph, node and field, never
an ``AttributeError`` from an export or a picture much later. Every text, from either path,
must be valid Unicode (no lone surrogate): it is written to JSON, to databases and to
terminals, none of which can hold one.
"""

from __future__ import annotations

from typing import Any

from flow._text import is_unicode, safe_repr
from flow.codec import int_text_limit, too_long_for_text
from flow.errors import GraphDefinitionError
from flow.node_type import NodeType
from flow.spec import _description

#: Characters of a bad value quoted in an error message.
_SHOWN = 60


def check_id(value: object, what: str, graph_id: str | None, *, allow_empty: bool = False) -> str:
    """An id: text, valid Unicode, and not empty unless ``allow_empty`` (a link without a
    target, which the loader also gives and ``validate()`` reports). ``what`` names the id."""
    text = check_text(value, what, graph_id)
    if text is None:
        raise GraphDefinitionError(f"{what} must be a string, not None", graph_id=graph_id)
    if not text and not allow_empty:
        raise GraphDefinitionError(f"{what} is empty", graph_id=graph_id)
    return text


def check_text(value: object, what: str, graph_id: str | None) -> str | None:
    """A title or driver: ``None`` or valid Unicode text."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise GraphDefinitionError(
            f"{what} must be a string, not {type(value).__name__}", graph_id=graph_id
        )
    if not is_unicode(value):
        raise GraphDefinitionError(
            f"{what} is not valid Unicode text (lone surrogate): {safe_repr(value, _SHOWN)}",
            graph_id=graph_id,
        )
    return value


def check_description(value: Any, what: str, graph_id: str | None) -> Any:
    """A condition or task: text (stripped, ``None`` when blank) or a component object —
    not a number, boolean or bytes, which would fail only when the node runs."""
    if isinstance(value, str):
        check_text(value, what, graph_id)
    elif isinstance(value, int | float | complex | bytes | bytearray):  # bool is an int
        raise GraphDefinitionError(
            f"{what} must be a string or a component object, not {type(value).__name__}",
            graph_id=graph_id,
        )
    return _description(value)


def check_type(value: object, what: str, graph_id: str | None) -> NodeType:
    """A node type: a :class:`NodeType` (text is the loader's business: it warns about
    unknown names, which code has no place to hear)."""
    if isinstance(value, NodeType):
        return value
    raise GraphDefinitionError(
        f"{what} must be a NodeType, not {type(value).__name__} (NodeType.of(name) looks a "
        "type up by name)",
        graph_id=graph_id,
    )


def check_priority(value: object, what: str, graph_id: str | None) -> int:
    """A link priority: an integer (not a bool) that can be written as text, as the loader
    requires of ``priority`` in a graph text."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise GraphDefinitionError(
            f"{what} must be an integer, not {type(value).__name__}", graph_id=graph_id
        )
    if too_long_for_text(value):
        raise GraphDefinitionError(
            f"{what} is an integer of more than {int_text_limit()} decimal digits "
            "(Python's limit for turning integers into text)",
            graph_id=graph_id,
        )
    return int(value)
