"""Fetching rows whose values another hand may have written.

SQLite keeps any text in a ``DATETIME`` or JSON column, and PostgreSQL a timestamp of
``'infinity'``; the column types (or the driver) then fail to decode the value while the rows
are fetched — a bare ``ValueError`` from deep inside SQLAlchemy on SQLite, a ``DataError`` from
psycopg — and neither says which row. Only hand edits write such values (flow_sqla and the Go
plugin always write times and JSON), so the happy path pays nothing: when a fetch fails, the
same query runs once more with every column read as text, and the first value that does not
decode names its instance, table and column in a :class:`~flow.errors.SnapshotError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from flow.context import FlowContext
from flow.errors import InvalidArgumentTypeError, SnapshotError
from flow_sqla._dialect import stored_text
from flow_sqla._limits import display_text
from flow_sqla.errors import InvalidArgumentError, RepositoryError

#: What a column type or driver raises for a stored value it cannot decode. RecursionError:
#: JSON nested deeper than Python's decoder goes (a hand-written ``[[[...]]]``), which SQLite's
#: JSON type and psycopg decode while fetching.
_DECODING = (ValueError, TypeError, OverflowError, RecursionError, sa.exc.DataError)


#: The remedy for a time column of flow_sqla's tables that does not read: only a hand edit
#: writes one there.
TIMES_BY_HAND = "flow_sqla and the Go plugin write only times there: correct the row by hand"


def callers_connection(
    connection: object, engine: sa.Engine, instance_id: str | None = None
) -> Connection | None:
    """A read's ``connection=`` argument: ``None`` (the reader's own engine) or your
    transaction's SQLAlchemy ``Connection`` to the same kind of database as ``engine`` (see
    :func:`check_same_kind`). Anything else — an ``Engine``, a ``Session``, a DBAPI
    connection — would be read around, outside your transaction and on a second pooled
    connection, which is what the argument is there to avoid: :class:`InvalidArgumentError`."""
    if connection is None:
        return None
    if not isinstance(connection, Connection):
        raise InvalidArgumentError(
            "connection",
            type(connection).__name__,
            "a read runs on your transaction's SQLAlchemy Connection (or on its own with None)",
        )
    check_same_kind(connection, engine, instance_id)
    return connection


def operation_connection(ctx: FlowContext, engine: sa.Engine) -> Connection | None:
    """The caller's transaction an operation on ``ctx`` joins: ``ctx.connection`` when it is a
    SQLAlchemy ``Connection`` to the same kind of database as ``engine`` (see
    :func:`check_same_kind`); ``None`` when it holds none — the operation then runs in a
    transaction of its own. Anything else — an ORM ``Session``, an ``Engine``, a DBAPI
    connection — is refused (:class:`InvalidArgumentTypeError` naming the instance, nothing
    written): the operation would run and commit apart, so your rows and the flow's would no
    longer commit or roll back together, and nothing would say so."""
    conn = ctx.connection
    if isinstance(conn, Connection):
        check_same_kind(conn, engine, ctx.instance_id)
        return conn
    if conn is not None:
        raise InvalidArgumentTypeError(
            "ctx.connection",
            conn,
            "a SQLAlchemy Connection (session.connection() for an ORM Session) or None",
            instance_id=ctx.instance_id,
        )
    return None


def check_same_kind(conn: Connection, engine: sa.Engine, instance_id: str | None) -> None:
    """Refuse a caller's ``conn`` to another kind of database than ``engine``'s: the library
    builds its statements for its engine's dialect (an upsert, a locking read, an exact
    comparison), and another dialect fails on them inside SQLAlchemy's compiler or on the
    server — on PostgreSQL aborting the caller's transaction. Nothing is sent. MySQL and
    MariaDB (``mysql://``, ``mariadb://``) are one kind."""
    if conn.dialect is engine.dialect:  # a connection of the engine itself (the usual case)
        return
    if _kind(conn.dialect.name) != _kind(engine.dialect.name):
        where = engine.url.render_as_string(hide_password=True)
        raise RepositoryError(
            f"The connection is to a {conn.dialect.name} database, and these tables are on "
            f"{engine.dialect.name} ({where}): pass a Connection of that engine "
            "(engine.begin())",
            instance_id=instance_id,
        )


def _kind(dialect_name: str) -> str:
    return "mysql" if dialect_name == "mariadb" else dialect_name


#: The columns that name a row's instance, in the instance, todo and history tables.
_INSTANCE_COLUMNS = ("instant_id", "flow_ins_id")


def fetch_rows(conn: Connection, stmt: sa.Select[Any], table: str, remedy: str) -> Sequence[Any]:
    """All rows of ``stmt`` (a query of ``table``). Raises :class:`SnapshotError` naming the
    instance, the column, the stored text and ``remedy`` when a value does not decode."""
    try:
        return conn.execute(stmt).all()
    except _DECODING as exc:
        try:
            found = _undecodable(conn, stmt, table, remedy)
        except sa.exc.SQLAlchemyError:
            found = None  # the text read failed too: the first error says more
        if found is None:
            raise
        raise found from exc


def _undecodable(
    conn: Connection, stmt: sa.Select[Any], table: str, remedy: str
) -> SnapshotError | None:
    """The error for the first value of ``stmt``'s rows that does not decode, read as text;
    ``None`` when every value decodes (the failure was something else)."""
    columns = list(stmt.selected_columns)
    dialect = conn.dialect.name
    texts = stmt.with_only_columns(*(stored_text(dialect, column) for column in columns))
    for row in conn.execute(texts).all():
        values = dict(zip((column.key for column in columns), row, strict=True))
        for column in columns:
            text = values[column.key]
            if text is not None and decoded(column.type, text) is UNREADABLE:
                instance = next((values[k] for k in _INSTANCE_COLUMNS if values.get(k)), None)
                return SnapshotError(
                    f"{table}.{column.key} holds {display_text(str(text), 40)!r}, which is not "
                    f"a {'time' if isinstance(column.type, sa.DateTime) else 'JSON value'}; "
                    f"{remedy}",
                    instance_id=instance,
                )
    return None


#: What :func:`decoded` returns for a value that does not decode.
UNREADABLE: Any = object()


def decoded(column_type: sa.types.TypeEngine[Any], value: Any) -> Any:
    """``value``, a value of a column of ``column_type`` read as text, decoded as the column
    reads it — a time or a JSON value; other columns' values as they are — or
    :data:`UNREADABLE` (SQLite hands back a number stored in a time or JSON column as a
    number: it does not decode either)."""
    if not isinstance(column_type, sa.DateTime | sa.JSON):
        return value
    if not isinstance(value, str):
        return UNREADABLE
    try:
        if isinstance(column_type, sa.DateTime):
            return datetime.fromisoformat(value)
        return json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python decodes
        return UNREADABLE


def read_time(value: Any) -> datetime | None:
    """A time column read as text (:func:`~flow_sqla._dialect.time_text`), or as a time, as
    naive UTC; ``None`` when it is no time (PostgreSQL's ``'infinity'``, other text on
    SQLite) — the caller decides what such a row means, the fetch never fails on it."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    when: datetime = value
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when


__all__ = [
    "TIMES_BY_HAND",
    "UNREADABLE",
    "callers_connection",
    "check_same_kind",
    "decoded",
    "fetch_rows",
    "operation_connection",
    "read_time",
]
