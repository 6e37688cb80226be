"""What the tables can hold, checked before any SQL is sent.

The reference columns are ``VARCHAR(64)`` (ids, actors, auditors) and ``TEXT`` (the message;
65,535 bytes on MySQL/MariaDB). SQLite enforces neither, MySQL/MariaDB and PostgreSQL reject a
longer value, every driver fails on text that is not valid UTF-8 (a lone surrogate) with a raw
``UnicodeEncodeError``, and PostgreSQL refuses a NUL character in text. Checking here gives the
same typed error on every dialect, naming the instance, graph or node — before a claim writes
anything, so no instance gets stuck.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from flow.graph import Graph
from flow.workflow.errors import InvalidInstanceIdError, InvalidQueryError
from flow.workflow.records import form_id_of
from flow_sqla.errors import UnstorableGraphError, UnstorableValueError
from flow_sqla.tables import ID_LENGTH

#: ``TEXT`` on MySQL/MariaDB holds 65,535 bytes; the same limit applies on every dialect, so a
#: message accepted on SQLite or PostgreSQL is accepted on MySQL too.
MESSAGE_MAX_BYTES = 65_535
# A character is at most 4 UTF-8 bytes: shorter messages need no encoding to be measured.
_MESSAGE_SAFE_CHARS = MESSAGE_MAX_BYTES // 4


def encoding_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text (a lone surrogate, or a NUL character, and its
    position), or ``None``. PostgreSQL's text refuses NUL while MySQL/MariaDB and SQLite store
    it, so it is refused on every dialect alike. ASCII text, the usual case, is answered
    without encoding."""
    nul = value.find("\x00")
    if nul >= 0:
        return (
            f"NUL character at position {nul} "
            "(refused on every database, since PostgreSQL cannot store it)"
        )
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"lone surrogate {value[exc.start]!r} at position {exc.start} is not valid UTF-8"
    return None


def display_text(text: str | None, limit: int) -> str:
    """A node title as stored: display text, cut to ``limit`` characters, NUL characters
    left out (PostgreSQL's text refuses them; a title is never worth a failed submit)."""
    text = text or ""
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text[:limit]


def check_id(
    value: str, field: str, *, instance_id: str | None = None, limit: int = ID_LENGTH
) -> str:
    """``value`` if it fits a ``VARCHAR(limit)`` column (an id: 64) and is valid UTF-8; else
    :class:`UnstorableValueError` naming ``field``."""
    if len(value) > limit:
        raise UnstorableValueError(
            field,
            f"{len(value)} characters, the column holds {limit}",
            instance_id=instance_id,
            value=value,
        )
    problem = encoding_problem(value)
    if problem is not None:
        raise UnstorableValueError(field, problem, instance_id=instance_id, value=value)
    return value


def check_instance_id(instance_id: str) -> str:
    """An instance id the tables can hold (see :func:`check_id`); ``""``, ids of only
    whitespace and non-strings raise :class:`InvalidInstanceIdError`, as in the executor."""
    if not isinstance(instance_id, str) or not instance_id or instance_id.isspace():
        raise InvalidInstanceIdError(instance_id)
    return check_id(instance_id, "instance id", instance_id=None)


def check_readable_instance_id(instance_id: str) -> str:
    """An instance id used only to look rows up: :class:`InvalidInstanceIdError` when it is
    not a string, as for the executor's reads; else as :func:`check_readable`."""
    if not isinstance(instance_id, str):
        raise InvalidInstanceIdError(instance_id)
    return check_readable(instance_id, "instance id")


def check_readable(value: str, field: str) -> str:
    """A value used only to look rows up: a string (else :class:`InvalidQueryError`), valid
    UTF-8 (any length: a longer one matches nothing)."""
    if not isinstance(value, str):
        raise InvalidQueryError(f"{field} must be a string, got {type(value).__name__}")
    problem = encoding_problem(value)
    if problem is not None:
        raise UnstorableValueError(field, problem, value=value)
    return value


def check_message(message: str | None, instance_id: str) -> str | None:
    """The approver's comment: at most :data:`MESSAGE_MAX_BYTES` UTF-8 bytes, valid UTF-8."""
    if message is None:
        return None
    if len(message) > _MESSAGE_SAFE_CHARS or not message.isascii() or "\x00" in message:
        problem = encoding_problem(message)
        if problem is not None:
            raise UnstorableValueError("message", problem, instance_id=instance_id)
        size = len(message.encode("utf-8"))
        if size > MESSAGE_MAX_BYTES:
            raise UnstorableValueError(
                "message",
                f"{size} UTF-8 bytes, the column holds {MESSAGE_MAX_BYTES}",
                instance_id=instance_id,
            )
    return message


def graph_problems(graph: Graph) -> Iterator[str]:
    """Each value of ``graph`` the history table cannot hold: graph and node ids, and a
    node's ``formId`` past the ``BIGINT`` column (every submit of that node would fail)."""
    for kind, value in (("graph id", graph.id), *(("node id", n) for n in graph.nodes)):
        if len(value) > ID_LENGTH:
            yield f"{kind} {value[:ID_LENGTH]!r}... has {len(value)} characters (limit {ID_LENGTH})"
        problem = encoding_problem(value)
        if problem is not None:
            yield f"{kind} {value!r}: {problem}"
    for node in graph.nodes.values():
        form_id = form_id_of(node)
        if form_id is not None and not _BIGINT_MIN <= form_id <= _BIGINT_MAX:
            yield f"formId of node {node.id!r} is past the range of a BIGINT column"


_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1


class CheckedGraphs:
    """A check run once per graph: the graphs it found sound are remembered by identity
    (graphs are immutable), so it costs one dict look-up per operation after a graph's first
    use. Bounded: past 1,024 graphs (an app that builds graphs per request) it starts over."""

    def __init__(self) -> None:
        self._ok: dict[int, Graph] = {}
        self._mutex = threading.Lock()

    def _known(self, graph: Graph) -> bool:
        return self._ok.get(id(graph)) is graph

    def _remember(self, graph: Graph) -> None:
        with self._mutex:
            if len(self._ok) >= 1024:
                self._ok.clear()
            self._ok[id(graph)] = graph


class GraphChecks(CheckedGraphs):
    """Raises for a graph whose ids the tables cannot hold, once per graph."""

    def check(self, graph: Graph) -> None:
        """Raise :class:`UnstorableGraphError` listing every id of ``graph`` that does not
        fit; remember the graph when all do."""
        if self._known(graph):
            return
        problems = list(graph_problems(graph))
        if problems:
            raise UnstorableGraphError(graph.id, problems)
        self._remember(graph)


__all__ = [
    "MESSAGE_MAX_BYTES",
    "CheckedGraphs",
    "GraphChecks",
    "check_id",
    "check_instance_id",
    "check_message",
    "check_readable",
    "display_text",
    "encoding_problem",
    "graph_problems",
]
