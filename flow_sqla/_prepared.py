"""Core statements compiled once per dialect and executed on the driver-level path.

Every ``conn.execute(stmt, params)`` of a Core construct computes the statement's cache key,
looks the compiled form up, builds an execution context and processes the result — and even
``exec_driver_sql`` builds the context. Together that is most of the client CPU an approval
spends outside the driver. The repository's hot statements never change after they are built,
so :class:`PreparedStatement` compiles each once for the engine's dialect: the SQL text, the
dialect's parameter style and the columns' bind processors (JSON encoding, SQLite's date
strings) are the compiler's own (plus, for MySQL's drivers, a time bound as its text:
``_dialect.datetime_bind_processor``), so the ``Table`` objects and constructs stay the single
source of the SQL, and the compiled-SQL snapshot tests keep guarding it.

The text then runs on the connection's DBAPI cursor through the dialect's own ``do_execute`` /
``do_executemany``, inside the transaction the ``Connection`` began; a driver error goes through
the ``Connection``'s own error handling (wrapping as ``DBAPIError``, invalidation on a lost
connection, ``handle_error`` events), so callers see exactly what ``Connection.execute`` raises.
Whenever the ``Connection`` itself must see the statement — statement, cursor or dialect
execution listeners (statement counters, tracing), ``echo`` logging, or no transaction begun
yet (its autobegin must start one, or a later ``commit()`` would not know there is anything to
commit) — the statement goes through ``Connection.exec_driver_sql`` instead: same text, same
parameters.

Rows come back as the driver returns them: no result processing (see
``DialectOps.decode_json`` for the JSON columns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from itertools import chain
from operator import itemgetter
from typing import Any, TypeVar

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import StatementError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.types import DateTime

from flow_sqla._dialect import datetime_bind_processor

# ``Connection._handle_dbapi_exception`` is how every SQLAlchemy 2.x statement reports a driver
# error; without it (a future SQLAlchemy) the driver-level path is simply not taken.
_HANDLES_DRIVER_ERRORS = callable(getattr(Connection, "_handle_dbapi_exception", None))


class DriverResult:
    """What a statement run on the cursor left: its rows (a buffered copy), ``rowcount`` and
    ``lastrowid`` — the parts of a ``CursorResult`` the repository reads."""

    __slots__ = ("lastrowid", "rowcount", "rows")

    def __init__(self, rows: Sequence[Any], rowcount: int, lastrowid: Any) -> None:
        self.rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def first(self) -> Any:
        return self.rows[0] if self.rows else None


#: Drivers whose plain ``cursor()`` is what SQLAlchemy itself executes on (buffered results,
#: the dialect's ``do_execute``); others (e.g. mariadbconnector, which SQLAlchemy gives
#: buffered cursors explicitly) keep the ``Connection`` path.
_CURSOR_DRIVERS = frozenset({"mysqldb", "pymysql", "psycopg", "psycopg2", "pysqlite"})


def driver_path_open(conn: Connection) -> bool:
    """Whether a prepared statement may run on ``conn``'s cursor without the ``Connection``
    seeing it: a known driver, a transaction in progress (or AUTOCOMMIT, where each statement
    commits on either path), and nothing that listens to or logs its statements."""
    dialect = conn.dialect
    return (
        _HANDLES_DRIVER_ERRORS
        and dialect.driver in _CURSOR_DRIVERS
        and not conn._echo
        and not (
            (conn._has_events or conn.engine._has_events or dialect._has_events)
            and _statements_listened(conn)
        )
        and conn.in_transaction()
    )


def _statements_listened(conn: Connection) -> bool:
    """Whether a listener would see a statement that ``Connection.exec_driver_sql`` runs:
    the statement and cursor events of the engine (class-level listeners on ``Engine``
    included) and the dialect's execution events; any listener on the ``Connection`` itself
    or its class counts too. Transaction and error listeners — the library's own among them
    (:mod:`flow_sqla._transaction_events`) — see nothing of a statement; driver errors still
    reach ``handle_error`` through the ``Connection``. (The engine's and the dialect's event
    collections are read, not the connection's: a new ``Connection`` builds its joined ones
    on first access, which would cost every transaction.)"""
    if conn._has_events:
        return True
    events = conn.engine.dispatch
    dialect_events = conn.dialect.dispatch
    return bool(
        events.before_execute
        or events.after_execute
        or events.before_cursor_execute
        or events.after_cursor_execute
        or dialect_events.do_execute
        or dialect_events.do_executemany
        or dialect_events.do_execute_no_params
        or dialect_events.do_setinputsizes
    )


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A function taking ``names``' values from a mapping, as a tuple in that order (a
    ``KeyError`` for a missing one, as indexing does)."""
    if not names:
        return lambda values: ()
    if len(names) == 1:
        (name,) = names
        return lambda values: (values[name],)
    return itemgetter(*names)


class PreparedStatement:
    """``stmt`` compiled for ``dialect``; :meth:`execute` binds a dict of values by bind name.

    Only for statements whose binds are all plain named ``bindparam``s supplied at every call
    (no expanding ``IN``, no literal or post-compile parameters); anything else raises
    ``ValueError`` at construction, so a statement that cannot take this path is noticed when
    it is built, not at run time.
    """

    __slots__ = ("_dialect", "_in_order", "_processors", "sql")

    def __init__(
        self,
        stmt: ClauseElement,
        dialect: Dialect,
        schema_translate_map: Mapping[str | None, str | None] | None = None,
    ) -> None:
        # The connection's schema_translate_map (multi-tenant schemas) applies here as in
        # Connection.execute: rendered into the text, which then runs as it is.
        if schema_translate_map:
            compiled = stmt.compile(
                dialect=dialect,
                schema_translate_map=schema_translate_map,
                render_schema_translate=True,
            )
        else:
            compiled = stmt.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise ValueError(f"not a SQL statement: {stmt!r}")
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("statements with post-compile parameters cannot be prepared")
        if compiled.escaped_bind_names:
            raise ValueError("bind names must not need escaping")
        self.sql: str = compiled.string
        self._dialect = dialect
        # Positional parameter styles: the values in the compiler's order, picked in one C call
        # (this runs for every statement of every approval). ``None``: a named style, the dict.
        names = tuple(compiled.positiontup or ()) if compiled.positional else None
        self._in_order: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = (
            None if names is None else _picker(names)
        )
        processors: dict[str, Callable[[Any], Any]] = {
            name: processor
            for name, processor in compiled._bind_processors.items()
            if callable(processor)
        }
        as_text = datetime_bind_processor(dialect)
        if as_text is not None:
            for name, bind in compiled.binds.items():
                if name not in processors and isinstance(bind.type, DateTime):
                    processors[name] = as_text
        self._processors: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(processors.items())

    def bind(self, params: Mapping[str, Any]) -> Any:
        """The driver's parameters for ``params`` (every bind name → its value): processed by
        the columns' bind processors, as a tuple in the compiler's order for positional
        parameter styles, else a dict."""
        in_order = self._in_order
        if not self._processors and in_order is not None:
            return in_order(params)  # nothing to process: no copy to make
        values = dict(params)
        try:
            for name, processor in self._processors:
                values[name] = processor(values[name])
        except Exception as exc:  # as Connection.execute reports a failing bind processor
            raise StatementError(
                f"(in bind processor) {exc}", self.sql, None, exc, ismulti=False
            ) from exc
        return values if in_order is None else in_order(values)

    def execute(
        self,
        conn: Connection,
        params: Mapping[str, Any],
        execution_options: Mapping[str, Any] | None = None,
    ) -> Any:
        """Run on ``conn`` with ``params``; a :class:`DriverResult` or a ``CursorResult``."""
        bound = self.bind(params)
        if driver_path_open(conn):
            return self._on_cursor(conn, bound, many=False)
        return conn.exec_driver_sql(self.sql, bound, execution_options)

    def execute_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run once per row of ``rows`` as one ``executemany`` (MySQLdb and PyMySQL send an
        INSERT's rows as one multi-row statement). One row is a plain ``execute``: the
        drivers' ``executemany`` first parses the statement (MySQLdb and PyMySQL match it
        with a regular expression to build the multi-row form), for nothing."""
        if len(rows) == 1:
            self.execute(conn, rows[0])
            return
        bound = [self.bind(row) for row in rows]
        if driver_path_open(conn):
            self._on_cursor(conn, bound, many=True)
        else:
            conn.exec_driver_sql(self.sql, bound)

    def _on_cursor(self, conn: Connection, bound: Any, *, many: bool) -> DriverResult:
        """Execute on a cursor of ``conn``'s DBAPI connection (see :func:`_on_driver`)."""
        dialect = self._dialect

        def run(cursor: Any) -> DriverResult:
            if many:
                dialect.do_executemany(cursor, self.sql, bound, None)
            else:
                dialect.do_execute(cursor, self.sql, bound, None)
            # Buffered drivers hold the rows already (rows are fetched inside the ``try``).
            rows = cursor.fetchall() if cursor.description is not None else ()
            # PEP 249 makes ``lastrowid`` optional (psycopg has none); only MySQL's is read.
            return DriverResult(rows, cursor.rowcount, getattr(cursor, "lastrowid", None))

        return _on_driver(conn, self.sql, bound, run)


#: The most characters one query sent together carries (statements' text and parameters):
#: each statement fits the server's ``max_allowed_packet`` on its own (a variable document is
#: at most 1 MiB by default, limits.md), several large ones together might not. 64 K
#: characters are at most 256 KiB on the wire (4 bytes a character in utf8mb4; escaping
#: doubles only 1-byte ones), under every MySQL/MariaDB default since 5.5 (1 MiB); an
#: approval's statements are a few kilobytes.
TOGETHER_CHARS = 64 * 1024

#: The parameter types whose length counts towards :data:`TOGETHER_CHARS`.
_TEXT = (str, bytes)


def execute_together(
    conn: Connection,
    statements: Sequence[tuple[PreparedStatement, Mapping[str, Any]]],
    *,
    counted: int = 0,
    on_counted: Callable[[int], None] | None = None,
) -> int:
    """Run ``statements`` (each with its parameters) in order, as few ``;``-separated
    queries as :data:`TOGETHER_CHARS` allows — usually one round trip — and return the row
    count of the ``counted``-th (-1 when there is none); ``on_counted`` gets it once that
    one has run, before a later one's error is raised. Only for a connection that
    :func:`flow_sqla._dialect.sends_statements_together` allows, with the driver-level path
    open (:func:`driver_path_open`), and for statements without result rows: the server runs
    them in order and stops at the first that fails, whose error comes out as from
    ``Connection.execute``. Each is still its own statement to the server (its counters, its
    locks, its triggers); the round trips, cursors and calls are saved."""
    bound: list[tuple[Any, ...]] = []
    sizes: list[int] = []
    for prepared, params in statements:
        values = prepared.bind(params)
        if not isinstance(values, tuple):
            raise ValueError("statements sent together need a positional parameter style")
        bound.append(values)
        text = sum([len(value) for value in values if isinstance(value, _TEXT)])
        sizes.append(len(prepared.sql) + text)
    rowcount = -1
    first = 0
    for last in query_ends(sizes):
        found = _run_together(
            conn, statements[first:last], bound[first:last], counted - first, on_counted
        )
        if found is not None:
            rowcount = found
        first = last
    return rowcount


def query_ends(sizes: Sequence[int]) -> list[int]:
    """Where each query of :func:`execute_together` ends (exclusive indexes), given each
    statement's size in characters: a statement joins the query before it while their sizes
    stay within :data:`TOGETHER_CHARS`; a larger one goes alone."""
    ends: list[int] = []
    total = 0
    for n, size in enumerate(sizes):
        if n and total + size > TOGETHER_CHARS:
            ends.append(n)
            total = 0
        total += size
    if sizes:
        ends.append(len(sizes))
    return ends


def _run_together(
    conn: Connection,
    statements: Sequence[tuple[PreparedStatement, Mapping[str, Any]]],
    bound: Sequence[tuple[Any, ...]],
    counted: int,
    on_counted: Callable[[int], None] | None,
) -> int | None:
    """One query of :func:`execute_together`: the row count of its ``counted``-th statement
    (``None`` when ``counted`` is not among them), handed to ``on_counted`` before the
    results of the statements after it are read."""
    dialect = statements[0][0]._dialect
    sql = ";\n".join(prepared.sql for prepared, _ in statements)
    params = tuple(chain.from_iterable(bound))

    def run(cursor: Any) -> int | None:
        dialect.do_execute(cursor, sql, params, None)
        rowcount = None
        for n in range(len(statements)):
            if n:  # the next statement's result: its error, if it failed, is raised here
                cursor.nextset()
            if n == counted:
                rowcount = cursor.rowcount
                if on_counted is not None:
                    on_counted(rowcount)
        return rowcount

    return _on_driver(conn, sql, params, run)


_T = TypeVar("_T")


def _on_driver(conn: Connection, sql: str, bound: Any, run: Callable[[Any], _T]) -> _T:
    """``run(cursor)`` on a cursor of ``conn``'s DBAPI connection. Driver errors (and
    interrupts, which leave the connection in an unknown state) go through the
    ``Connection``'s own handling — wrapped as ``sqlalchemy.exc.DBAPIError``, a lost
    connection invalidated, the cursor closed; any other exception (a driver refusing a
    value: ``UnicodeEncodeError``, a JSON column that does not decode) comes out unchanged,
    as from ``Connection.execute``."""
    driver_error = conn.dialect.loaded_dbapi.Error
    cursor = None
    try:
        cursor = conn.connection.cursor()
        result = run(cursor)
    except BaseException as exc:
        if isinstance(exc, driver_error) or not isinstance(exc, Exception):
            conn._handle_dbapi_exception(exc, sql, bound, cursor, None)
        _close_quietly(cursor)
        raise
    cursor.close()
    return result


def _close_quietly(cursor: Any) -> None:
    if cursor is not None:
        with suppress(Exception):  # the exception being raised is the one that matters
            cursor.close()


class PreparedStatements:
    """The prepared forms of a component's fixed statements, made on first use for each
    dialect a connection brings (a caller's connection may come from another engine, with
    another driver and parameter style, than the component's own)."""

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: dict[tuple[Any, ...], tuple[ClauseElement, PreparedStatement]] = {}

    def get(self, conn: Connection, stmt: ClauseElement) -> PreparedStatement:
        """``stmt`` prepared for ``conn``'s dialect and ``schema_translate_map`` execution
        option; ``stmt`` must live as long as this."""
        dialect = conn.dialect
        translate = conn.get_execution_options().get("schema_translate_map")
        key: tuple[Any, ...] = (id(stmt), id(dialect))
        if translate:
            key += tuple(sorted(translate.items(), key=repr))
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = (stmt, PreparedStatement(stmt, dialect, translate))
        return found[1]

    def execute(
        self,
        conn: Connection,
        stmt: ClauseElement,
        params: Mapping[str, Any],
        execution_options: Mapping[str, Any] | None = None,
    ) -> Any:
        """Run ``stmt`` on ``conn`` with ``params``."""
        return self.get(conn, stmt).execute(conn, params, execution_options)


__all__ = [
    "TOGETHER_CHARS",
    "DriverResult",
    "PreparedStatement",
    "PreparedStatements",
    "driver_path_open",
    "execute_together",
    "query_ends",
]
