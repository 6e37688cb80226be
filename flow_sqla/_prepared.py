"""Core statements compiled once per dialect and executed on the driver-level path.

Every ``conn.execute(stmt, params)`` of a Core construct computes the statement's cache key,
looks the compiled form up, builds the parameters and processes the result — about a third of
the client CPU of an approval. The repository's hot statements never change after they are
built, so :class:`PreparedStatement` compiles each once for the engine's dialect and runs it
with ``Connection.exec_driver_sql``: the SQL text, the dialect's parameter style and the
columns' bind processors (JSON encoding, SQLite's date strings) are the compiler's own, so the
``Table`` objects and constructs stay the single source of the SQL, and the compiled-SQL
snapshot tests keep guarding it. Events (``before_cursor_execute``), transactions and error
wrapping are the connection's, as for any statement.

Rows come back as the driver returns them: no result processing (see
``DialectOps.decode_json`` for the JSON columns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.engine import Connection, CursorResult, Dialect
from sqlalchemy.exc import StatementError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement


class PreparedStatement:
    """``stmt`` compiled for ``dialect``; :meth:`execute` binds a dict of values by bind name.

    Only for statements whose binds are all plain named ``bindparam``s supplied at every call
    (no expanding ``IN``, no literal or post-compile parameters); anything else raises
    ``ValueError`` at construction, so a statement that cannot take this path is noticed when
    it is built, not at run time.
    """

    __slots__ = ("_names", "_positional", "_processors", "sql")

    def __init__(self, stmt: ClauseElement, dialect: Dialect) -> None:
        compiled = stmt.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise ValueError(f"not a SQL statement: {stmt!r}")
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("statements with post-compile parameters cannot be prepared")
        if compiled.escaped_bind_names:
            raise ValueError("bind names must not need escaping")
        self.sql: str = compiled.string
        self._positional: bool = bool(compiled.positional)
        self._names: tuple[str, ...] = tuple(compiled.positiontup or ())
        self._processors: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
            (name, processor)
            for name, processor in compiled._bind_processors.items()
            if callable(processor)
        )

    def execute(
        self,
        conn: Connection,
        params: Mapping[str, Any],
        execution_options: Mapping[str, Any] | None = None,
    ) -> CursorResult[Any]:
        """Run on ``conn`` with ``params`` (every bind name → its value)."""
        values = dict(params)
        try:
            for name, processor in self._processors:
                values[name] = processor(values[name])
        except Exception as exc:  # as Connection.execute reports a failing bind processor
            raise StatementError(
                f"(in bind processor) {exc}", self.sql, None, exc, ismulti=False
            ) from exc
        bound: Any = tuple(values[name] for name in self._names) if self._positional else values
        return conn.exec_driver_sql(self.sql, bound, execution_options)


class PreparedStatements:
    """The prepared forms of a component's fixed statements, made on first use for each
    dialect a connection brings (a caller's connection may come from another engine, with
    another driver and parameter style, than the component's own)."""

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: dict[tuple[int, int], tuple[ClauseElement, PreparedStatement]] = {}

    def execute(
        self,
        conn: Connection,
        stmt: ClauseElement,
        params: Mapping[str, Any],
        execution_options: Mapping[str, Any] | None = None,
    ) -> CursorResult[Any]:
        """Run ``stmt`` on ``conn`` with ``params``; ``stmt`` must live as long as this."""
        dialect = conn.dialect
        key = (id(stmt), id(dialect))
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = (stmt, PreparedStatement(stmt, dialect))
        return found[1].execute(conn, params, execution_options)


__all__ = ["PreparedStatement", "PreparedStatements"]
