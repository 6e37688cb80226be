"""Every difference between MySQL/MariaDB, PostgreSQL and SQLite, in one place.

:class:`DialectOps` builds the few statements the repository issues on the instance row
(upsert, insert-if-absent, locking read, plain read) and recognizes lock conflicts. The
capabilities are computed once from the engine's dialect, so callers never branch on a
dialect name themselves.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection, CursorResult, Dialect, Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import ExecutableDDLElement
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.compiler import DDLCompiler, TypeCompiler

from flow_sqla.errors import MigrationLockError, RepositoryError

if TYPE_CHECKING:
    from flow_sqla.tables import FlowTables

#: Columns a locking read returns (see DialectOps.locking_read).
LOCK_COLUMNS: tuple[str, ...] = ("states", "vars", "has_graph")

#: The task index's columns of the instance row (read by the locking read when indexing).
INDEX_COLUMNS: tuple[str, ...] = ("graph_id", "status", "finish_time", "open_tasks")

#: Columns a plain read of the instance row returns, in this order.
ROW_COLUMNS: tuple[str, ...] = (
    "id",
    "graph",
    "states",
    "vars",
    "creator",
    "create_time",
    "updater",
    "update_time",
)

# Lock wait timeout (also MariaDB's NOWAIT), deadlock (also Galera's certification failure
# and brute-force abort: a writeset that lost to another node's), MySQL 8's NOWAIT, and
# "record has changed since last read" (MariaDB 11.6+ with innodb_snapshot_isolation).
_MYSQL_LOCK_ERRORS = frozenset({1205, 1213, 3572, 1020})
#: Top-level packages of the DBAPI drivers whose raw exceptions are recognized.
_DRIVER_PACKAGES = frozenset(
    {"pymysql", "MySQLdb", "mariadb", "mysql", "psycopg", "psycopg2", "sqlite3", "_sqlite3"}
)
# deadlock_detected, lock_not_available, serialization_failure
_PG_LOCK_SQLSTATES = frozenset({"40P01", "55P03", "40001"})
_SQLITE_LOCK_MESSAGES = ("database is locked", "database table is locked")

#: Execution options for every write: PostgreSQL reports rowcount -1 for INSERT unless asked
#: to keep it; harmless elsewhere. Rowcounts of an upsert still differ: MySQL/MariaDB (SQLAlchemy
#: always sets CLIENT_FOUND_ROWS) give 1 insert / 2 changed update / 1 unchanged update,
#: PostgreSQL and SQLite 1 in every case, so only "rowcount >= 1" is portable.
WRITE_OPTIONS: Mapping[str, Any] = {"preserve_rowcount": True}

#: How a dialect folds the task index's writes into the instance row's UPDATE (see
#: ``TodoTable.merged``): data-modifying CTEs, or a multi-table UPDATE.
IndexMerge = Literal["cte", "join_update"]


def json_dumps(value: Any) -> str:
    """Serialize a JSON column value compactly, keeping non-ASCII text readable.

    ``allow_nan=False`` because MySQL and PostgreSQL reject ``NaN``/``Infinity`` tokens (SQLite
    would store them and fail on the other dialects later); raises ``ValueError`` for them.
    Pass it as ``create_engine(..., json_serializer=json_dumps)``.
    """
    return _JSON_ENCODER.encode(value)


# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class EncodedJSON(sa.types.TypeDecorator[str]):
    """The type of a bound JSON column value that is JSON text already (from :func:`json_dumps`).

    The value goes to the driver as it is: the column's JSON type would encode the text again,
    as a JSON string. The SQL is the JSON type's own (PostgreSQL still casts ``::JSON``). Used
    for the graph document, the same text for every instance of a graph, encoded once.
    """

    impl = sa.JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None


#: Drivers that render every parameter into the statement text on the client, in Python.
_CLIENT_LITERAL_DRIVERS = frozenset({"mysqldb", "pymysql"})


def datetime_bind_processor(dialect: Dialect) -> Callable[[Any], Any] | None:
    """A bind processor for ``DateTime`` parameters of prepared statements, or ``None``.

    MySQLdb and PyMySQL turn a ``datetime`` into its SQL literal with a Python function per
    value (about 6 µs; 3–4 values per approval, some 4 % of the client's instructions), a
    ``str`` with one C call. A naive ``datetime``'s ``isoformat(" ")`` is the very text they
    would render (``YYYY-MM-DD HH:MM:SS[.ffffff]``, quoted alike), so the server receives the
    same statement. Anything else — an aware time, a date, ``None`` — goes to the driver as
    it is. Drivers that bind parameters on the server (psycopg) keep the typed value.
    """
    if dialect.driver in _CLIENT_LITERAL_DRIVERS:
        return _naive_datetime_text
    return None


def _naive_datetime_text(value: Any) -> Any:
    if type(value) is datetime and value.tzinfo is None:
        return value.isoformat(" ")
    return value


#: Binary, NO PAD collations: ids compare byte for byte, trailing spaces included. MariaDB's
#: ``utf8mb4_bin`` is PAD SPACE (``'inv-7' = 'inv-7 '`` is true, verified on 10.11) and so is
#: MySQL 5.7's; MySQL 8 has ``utf8mb4_0900_bin`` (NO PAD), which MariaDB 10.x does not know.
MARIADB_EXACT_COLLATION = "utf8mb4_nopad_bin"
MYSQL8_EXACT_COLLATION = "utf8mb4_0900_bin"
#: MySQL 5.7 has no binary NO PAD collation for utf8mb4; ``utf8mb4_bin`` still tells case and
#: accents apart but ignores trailing spaces (documented in docs/limits.md).
MYSQL57_EXACT_COLLATION = "utf8mb4_bin"


def exact_collation(dialect: Dialect) -> str | None:
    """The collation that makes an id column compare exactly on ``dialect``, or ``None`` where
    the default already does (PostgreSQL: database default collations are deterministic, ties
    broken byte-wise; SQLite: ``BINARY``).

    A ``mysql+...://`` URL reaching MariaDB yields a ``mysql`` dialect with ``is_mariadb`` set
    once connected; before that (offline SQL) the server is taken to be MySQL 8.
    """
    if dialect.name not in ("mysql", "mariadb"):
        return None
    if getattr(dialect, "is_mariadb", False):
        return MARIADB_EXACT_COLLATION
    version = dialect.server_version_info
    if version is not None and version < (8,):
        return MYSQL57_EXACT_COLLATION
    return MYSQL8_EXACT_COLLATION


class ExactString(sa.String):
    """``VARCHAR(n)`` for ids that must compare exactly: instance, graph, node and assignee
    ids. The table's ``utf8mb4_unicode_ci`` (the reference DDL) would make ``"Ab3xZ"`` and
    ``"ab3xz"``, ``"café-1"`` and ``"cafe-1"``, ``"inv-7"`` and ``"inv-7 "`` one value, merging
    instances. On MySQL/MariaDB the column gets :func:`exact_collation`, chosen when the DDL is
    compiled (so for the server actually connected); elsewhere it is a plain ``VARCHAR``.
    """

    cache_ok = True


@compiles(ExactString, "mysql")
@compiles(ExactString, "mariadb")
def _compile_exact_string(type_: ExactString, compiler: TypeCompiler, **kw: Any) -> str:
    collation = exact_collation(compiler.dialect)
    return f"VARCHAR({type_.length}) COLLATE {collation}"


class ExactlyEqual(sa.sql.expression.ColumnElement[bool]):
    """``column = value``, compared exactly even where the column keeps the table's
    case-insensitive, space-padded collation: the reference table's ``creator`` (shared with
    the Go plugin, so its DDL is left alone). On MySQL/MariaDB it compiles to
    ``column COLLATE <exact collation> = value`` (:func:`exact_collation` of the server
    connected), elsewhere to a plain ``=``. No index is lost: ``creator`` has none."""

    inherit_cache = False  # compiled per dialect; queries using it are not on a hot path
    type = sa.Boolean()
    _is_implicitly_boolean = True  # a comparison: no ``= 1`` appended where it is a filter

    def __init__(self, column: sa.ColumnElement[str], value: str) -> None:
        self.column = column
        self.value = value


@compiles(ExactlyEqual)
def _compile_exactly_equal(element: ExactlyEqual, compiler: Any, **kw: Any) -> str:
    collation = exact_collation(compiler.dialect)
    column: sa.ColumnElement[str] = element.column
    if collation is not None:
        column = sa.collate(column, collation)
    return str(compiler.process(column == element.value, **kw))


class ModifyIdColumns(ExecutableDDLElement):
    """``ALTER TABLE t MODIFY a VARCHAR(n) COLLATE <exact> NOT NULL, MODIFY b ...`` on
    MySQL/MariaDB: one statement, so the table is rebuilt once, not once per column.

    ``exact=False`` restates the plain ``VARCHAR(n) NOT NULL`` (the table's default collation
    again, as the reference DDL has it). Only for MySQL/MariaDB: check :func:`exact_collation`
    first; other dialects raise :class:`RepositoryError` when compiling it. Every column named
    must be ``NOT NULL`` (all id columns are).
    """

    inherit_cache = False

    def __init__(
        self, table: str, columns: Sequence[str], *, length: int, exact: bool, schema: str | None
    ) -> None:
        self.table = table
        self.columns = tuple(columns)
        self.length = length
        self.exact = exact
        self.schema = schema


@compiles(ModifyIdColumns)
def _compile_modify_default(element: ModifyIdColumns, compiler: DDLCompiler, **kw: Any) -> str:
    raise RepositoryError(
        f"MODIFY of id columns is MySQL/MariaDB only, not {compiler.dialect.name}"
    )


@compiles(ModifyIdColumns, "mysql")
@compiles(ModifyIdColumns, "mariadb")
def _compile_modify_mysql(element: ModifyIdColumns, compiler: DDLCompiler, **kw: Any) -> str:
    preparer = compiler.preparer
    table = preparer.quote(element.table)
    if element.schema is not None:
        table = f"{preparer.quote_schema(element.schema)}.{table}"
    type_ = ExactString(element.length) if element.exact else sa.String(element.length)
    type_sql = compiler.dialect.type_compiler_instance.process(type_)
    modify = ", ".join(f"MODIFY {preparer.quote(c)} {type_sql} NOT NULL" for c in element.columns)
    return f"ALTER TABLE {table} {modify}"


#: Seconds ``migrations.upgrade``/``downgrade`` wait for another process's migration of the
#: same table set by default.
MIGRATION_LOCK_TIMEOUT = 600.0
#: The longest wait for that lock one may ask for: 24 days, within every backend's limit.
#: PostgreSQL's ``lock_timeout`` is at most 2147483647 ms (about 24.8 days, an error above),
#: MariaDB's ``GET_LOCK`` gives up at once on a huge timeout (1e12 s and more), SQLite's busy
#: timeout is a 32-bit count of milliseconds. One bound for all, so a value that works in a
#: SQLite test works in production too.
MAX_MIGRATION_LOCK_TIMEOUT = 24 * 86400.0


def _utf8mb4_bytes(text: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """``text`` as its UTF-8 bytes on MySQL/MariaDB: ``CAST(... AS BINARY)`` alone gives the
    bytes of the value's own character set — the column's (``latin1``, say) on one side, the
    connection's on the other — so both are converted to ``utf8mb4`` first."""
    return sa.cast(sa.cast(text, mysql.CHAR(charset="utf8mb4")), sa.LargeBinary)


def migration_lock_key(connection: sa.Connection, schema: str | None, version_table: str) -> str:
    """The name of the migration lock of a table set: where its tables are, however the
    caller spelled it (``schema=None`` or the default schema's name, a URL's database or a
    ``?dbname=``). MySQL/MariaDB's ``GET_LOCK`` is server-wide: the schema — a database
    there; the connected one when none is given — names the set. PostgreSQL's advisory locks
    are per database already: the schema names it. No statement is sent for it: one sent
    before the migration's own transaction would begin that transaction instead."""
    schema = schema or connection.dialect.default_schema_name
    if connection.dialect.name in ("mysql", "mariadb"):
        database = schema or connection.engine.url.database or ""
        return f"{database}|{database}|{version_table}"
    return f"|{schema or ''}|{version_table}"


@contextmanager
def migration_lock(connection: sa.Connection, key: str, *, timeout: float) -> Iterator[None]:
    """Hold a database-wide lock named after ``key`` (the table set) while the block runs, so
    replicas migrating at once run one after the other; the later ones then find the schema
    at head and do nothing. Enter it before anything is read.

    When ``connection`` has no transaction yet, the lock's statement begins one, the block
    runs in it (Alembic sees a caller's transaction and leaves it open) and it is committed
    at the end, rolled back on an error. In a caller's transaction nothing is committed.

    MySQL/MariaDB: ``GET_LOCK`` (session-level, released at the end or when the connection
    drops; node-local on Galera). PostgreSQL: ``pg_advisory_xact_lock``, released when the
    transaction ends. SQLite: ``BEGIN IMMEDIATE`` (the database's write lock, waiting up to
    ``timeout`` as busy timeout; not taken inside a caller's transaction that has begun).
    Raises :class:`MigrationLockError` when the lock is not obtained in ``timeout`` seconds.
    """
    external = connection.in_transaction()
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    release: Callable[[], None] | None = None
    name = connection.dialect.name
    if name in ("mysql", "mariadb"):
        release = _mysql_lock(connection, f"flow_sqla.migrate.{digest.hex()[:40]}", timeout, key)
    elif name == "postgresql":
        _pg_lock(connection, int.from_bytes(digest[:8], "big", signed=True), timeout, key)
    elif name == "sqlite" and not external:
        _sqlite_lock(connection, timeout, key)
    try:
        yield
    except BaseException:
        if not external and connection.in_transaction():
            connection.rollback()
        raise
    else:
        if not external and connection.in_transaction():
            connection.commit()
    finally:
        if release is not None:
            release()
            if not external and connection.in_transaction():
                connection.rollback()  # only the release's own statement is in it


def _mysql_lock(
    connection: sa.Connection, lock: str, timeout: float, key: str
) -> Callable[[], None]:
    got = connection.execute(sa.select(sa.func.get_lock(lock, timeout))).scalar()
    if got != 1:
        raise MigrationLockError(key, timeout)

    def release() -> None:
        connection.execute(sa.select(sa.func.release_lock(lock)))

    return release


def _pg_lock(connection: sa.Connection, number: int, timeout: float, key: str) -> None:
    """``pg_advisory_xact_lock`` under a ``lock_timeout`` of ``timeout`` for this statement
    only: the setting is put back right after, so the migration's DDL keeps the server's."""
    previous = connection.execute(sa.select(sa.func.current_setting("lock_timeout"))).scalar()
    wait = f"{max(1, int(timeout * 1000))}ms"  # 0 would mean "wait forever"
    connection.execute(sa.select(sa.func.set_config("lock_timeout", wait, True)))
    try:
        connection.execute(
            sa.select(sa.func.pg_advisory_xact_lock(sa.cast(sa.literal(number), sa.BigInteger)))
        )
    except sa.exc.DBAPIError as exc:
        if exc.orig is not None and _pg_lock_conflict(exc.orig):
            raise MigrationLockError(key, timeout) from exc
        raise
    connection.execute(sa.select(sa.func.set_config("lock_timeout", previous, True)))


def _sqlite_lock(connection: sa.Connection, timeout: float, key: str) -> None:
    """``BEGIN IMMEDIATE`` with a busy timeout of ``timeout`` (put back once it is taken)."""
    raw: Any = connection.connection.dbapi_connection
    if raw is None:
        return
    previous = connection.exec_driver_sql("PRAGMA busy_timeout").scalar()
    if raw.in_transaction:
        # That first statement began the Connection's transaction, and a ``begin`` event
        # sent BEGIN itself (SQLAlchemy's pysqlite SAVEPOINT recipe): a transaction is open,
        # as in a caller's, so no BEGIN IMMEDIATE (the first DDL takes the write lock).
        return
    connection.exec_driver_sql(f"PRAGMA busy_timeout = {max(0, int(timeout * 1000))}")
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    except sa.exc.OperationalError as exc:
        if exc.orig is not None and _sqlite_lock_conflict(exc.orig):
            raise MigrationLockError(key, timeout) from exc
        raise
    finally:
        connection.exec_driver_sql(f"PRAGMA busy_timeout = {int(previous or 0)}")


def time_text(dialect: str, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A time column as ISO 8601 text whatever the session's settings — PostgreSQL's text
    follows its ``DateStyle`` (``02/01/2024 03:04:05`` under ``SQL, DMY``), so ``to_char``
    there, and its own text for an infinite or BC time, which no driver reads as a ``datetime``;
    MySQL/MariaDB's ``CAST AS CHAR`` is ISO; SQLite's the stored text."""
    if dialect == "postgresql":
        iso = sa.func.to_char(column, 'YYYY-MM-DD"T"HH24:MI:SS.US')
        # to_char's YYYY drops the era: a BC time must keep its own text (no driver reads it)
        readable = sa.and_(sa.func.isfinite(column), sa.extract("year", column) >= 1)
        return sa.case((readable, iso), else_=sa.cast(column, sa.Text()))
    return as_text(dialect, column)


def stored_text(dialect: str, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A column read as the text it holds: :func:`time_text` for a time, else :func:`as_text`."""
    reader = time_text if isinstance(column.type, sa.DateTime) else as_text
    return reader(dialect, column).label(column.key)


def insert_overwriting(
    table: sa.Table,
    values: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    columns: Sequence[str],
) -> sa.Insert:
    """MySQL/MariaDB: INSERT ``values`` (one row, or several in one statement) into
    ``table``; a row already under one of its unique keys takes ``columns`` from them
    (``ON DUPLICATE KEY UPDATE``, ``AS new`` on MySQL 8.0.20+). For the todo rows, whose
    sentinel may already be there."""
    rows = dict(values) if isinstance(values, Mapping) else [dict(row) for row in values]
    my = mysql.insert(table).values(rows)
    return my.on_duplicate_key_update({c: my.inserted[c] for c in columns}).inline()


def as_text(dialect: str, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """Any column read as its text: SQLite hands back what it stores; the others cast."""
    if dialect == "sqlite":
        return sa.type_coerce(column, sa.Text())
    return sa.cast(column, sa.Text())


def undecoded_text(dialect: str, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A text column read so that no stored value can fail the fetch: SQLite keeps bytes that
    are not UTF-8 in a text column (a hand edit such as ``X'FFFE'``) and sqlite3 fails the
    whole fetch decoding them, so there the bytes come back (``CAST AS BLOB``) for the caller
    to decode row by row; the other servers keep only valid text (:func:`as_text`)."""
    if dialect == "sqlite":
        return sa.cast(column, sa.LargeBinary())
    return as_text(dialect, column)


class DialectOps:
    """Statements on the instance row for one dialect, built against ``tables.repository``.

    Supported dialect names: ``mysql``, ``mariadb``, ``postgresql``, ``sqlite``; any other
    raises :class:`RepositoryError` at construction.
    """

    def __init__(self, dialect: Dialect, tables: FlowTables, *, index: bool = False) -> None:
        self.name: str = dialect.name
        if self.name not in ("mysql", "mariadb", "postgresql", "sqlite"):
            raise RepositoryError(f"Unsupported database dialect {self.name!r}")
        self._table = tables.repository
        self._mysql_family = self.name in ("mysql", "mariadb")
        # SQLite has no row locks: the transaction's write lock is taken by a write, so the
        # locking read must itself be a write (see locking_read).
        self.row_locks: bool = self.name != "sqlite"
        # The graph column is read as the text it holds: the Go plugin may store only the
        # graph's id there, quoted or bare (SQLite keeps any text), which no JSON decoder
        # reads as an id (see flow_sqla.repository._graph_text).
        self._columns = [
            as_text(self.name, self._table.c.graph).label("graph")
            if name == "graph"
            else self._table.c[name]
            for name in ROW_COLUMNS
        ]
        # An operation needs only states, vars and whether a graph is stored: the graph
        # document (~1 KB) is not fetched and decoded on every locking read. SQLite returns
        # the graph itself: its RETURNING evaluates ``graph IS NOT NULL`` wrongly (3.40).
        table = self._table
        graph_flag = (
            table.c.graph.is_not(None).label("has_graph") if self.row_locks else table.c.graph
        )
        self._lock_columns = [table.c.states, table.c.vars, graph_flag]
        # What a driver returns for a JSON column when no result processor runs (prepared
        # statements): text on MySQL/MariaDB and SQLite, already decoded by psycopg.
        self.json_as_text: bool = self.name != "postgresql"
        if index:  # the task index's columns come with the row lock (no extra statement)
            self._lock_columns += [table.c[name] for name in INDEX_COLUMNS]
        #: Whether the locking read also returns the row's own id, last: on MySQL/MariaDB a
        #: table the migrations never made exact (created by the Go plugin, say) compares ids
        #: by a case-insensitive, space-padded collation, and ``WHERE instant_id = 'inv-7 '``
        #: locks and returns the row of ``'Inv-7'`` — another instance (``IdCollationError``,
        #: raised by ``SqlStateRepository._fetch_locked``).
        self.reads_back_id: bool = self._mysql_family
        #: The isolation a maintenance pass (a full reindex) runs at, so that its plain reads
        #: see the latest commit without locking ranges: REPEATABLE READ (MySQL/MariaDB's
        #: default) would read the pass's first snapshot, and a locking read of an instance's
        #: todo rows locks the gap after them — new tasks of neighbouring instances would wait
        #: for the whole batch. PostgreSQL's default is already READ COMMITTED; SQLite has one.
        self.maintenance_isolation: str | None = "READ COMMITTED" if self._mysql_family else None
        if self.reads_back_id:
            self._lock_columns.append(table.c.instant_id)
        # How the task index's writes fold into the instance row's UPDATE (one round trip
        # instead of up to four): see TodoTable.merged. SQLite has no round trips to save.
        self.index_merge: IndexMerge | None = {
            "mysql": "join_update",
            "mariadb": "join_update",
            "postgresql": "cte",
            "sqlite": None,
        }[self.name]
        # MySQL/MariaDB cost a single-table DELETE/UPDATE with the range optimizer: on a
        # churning todo table (delete-marked entries, young statistics) it may prefer the
        # (candidate, id) index to the unique key and lock every row of the candidate —
        # deadlocks between unrelated instances. Joined with the instance row, the same
        # statement goes through the join optimizer, which reads a table whose unique key is
        # bound to constants as a const table, always through that key (TodoTable).
        self.keys_through_join: bool = self._mysql_family
        #: Whether each instance gets a sentinel todo row (``flow_sqla._todo.SENTINEL_NODE``):
        #: InnoDB's next-key and duplicate-check locks of the todo writes then stay in the
        #: instance's own range of the unique index (REPEATABLE READ).
        self.todo_sentinel: bool = self._mysql_family
        self._is_lock_conflict: Callable[[BaseException], bool] = {
            "mysql": _mysql_lock_conflict,
            "mariadb": _mysql_lock_conflict,
            "postgresql": _pg_lock_conflict,
            "sqlite": _sqlite_lock_conflict,
        }[self.name]

    def commits_each_statement(self, conn: Connection) -> bool:
        """Whether ``conn`` commits every statement on its own: SQLAlchemy's AUTOCOMMIT
        isolation level (:func:`is_autocommit`), or its driver connection in autocommit mode
        — set below SQLAlchemy (``connect_args={"autocommit": True}``, ``?autocommit=true``,
        ``SET autocommit=1``, sqlite3's ``isolation_level=None``), where SQLAlchemy's own
        ``isolation_level`` option says nothing. Read from the driver's state, no round
        trip: mysqlclient and PyMySQL report the server's autocommit flag of the last reply,
        psycopg its ``autocommit`` attribute. sqlite3 is judged once SQLAlchemy has begun the
        transaction (a ``begin`` event may have sent ``BEGIN`` itself, the documented recipe for
        SAVEPOINT support). Other drivers: ``False`` (not known)."""
        probe = _AUTOCOMMIT_PROBES.get(conn.dialect.driver)
        return is_autocommit(conn) or (probe is not None and probe(conn))

    def open_for_savepoints(self, conn: Connection) -> None:
        """Make the driver's transaction real before a ``SAVEPOINT``: sqlite3 begins one only
        before a data change, so a ``SAVEPOINT`` sent first would open the transaction itself
        and its ``RELEASE`` commit everything before it (SQLAlchemy's documented pysqlite
        caveat). Sends ``BEGIN`` then; other drivers need nothing."""
        if conn.dialect.driver != "pysqlite":
            return
        dbapi_conn: Any = conn.connection.dbapi_connection
        if not dbapi_conn.in_transaction:
            conn.exec_driver_sql("BEGIN")

    def upsert(self, row: Mapping[str, Any], update_columns: Sequence[str]) -> Executable:
        """INSERT ``row``; on an ``instant_id`` conflict UPDATE ``update_columns`` from it.

        MySQL/MariaDB use ``ON DUPLICATE KEY UPDATE col = VALUES(col)`` (or ``AS new ...
        new.col`` when the connected server is MySQL >= 8.0.20; SQLAlchemy picks the form at
        compile time, MariaDB rejects the alias form). That clause fires on *any* unique key,
        so ``id`` must never be part of the row. PostgreSQL and SQLite use
        ``ON CONFLICT (instant_id) DO UPDATE SET col = excluded.col``. Raises
        :class:`RepositoryError` if ``id`` or an unknown column is given.
        """
        self._check_columns(row, update_columns)
        if self._mysql_family:
            my = mysql.insert(self._table).values(dict(row))
            return my.on_duplicate_key_update({c: my.inserted[c] for c in update_columns})
        ins = self._conflict_insert().values(dict(row))
        return ins.on_conflict_do_update(
            index_elements=["instant_id"], set_={c: ins.excluded[c] for c in update_columns}
        )

    def update_row(self, key: Any, values: Mapping[str, Any]) -> Executable:
        """UPDATE ``values`` of the row whose ``instant_id`` is ``key`` (a literal or a bound
        parameter not named after a column). Plain SQL on every dialect; the repository uses it
        for a row it holds locked, where it is cheaper than the upsert (no duplicate-key path).
        Raises :class:`RepositoryError` if ``id``, ``instant_id`` or an unknown column is given.
        """
        self._check_columns({"instant_id": key, **values}, ())
        if "instant_id" in values:
            raise RepositoryError("The instant_id of a row is never updated")
        table = self._table
        return sa.update(table).where(table.c.instant_id == key).values(dict(values))

    def ensure_row(self, row: Mapping[str, Any]) -> Executable:
        """INSERT ``row`` unless a row with its ``instant_id`` exists; never changes one.

        Needed before the first locking read of an instance: at MySQL/MariaDB's default
        REPEATABLE READ, ``SELECT ... FOR UPDATE`` of a missing row takes a gap lock, and two
        workers starting different new instances then block each other's inserts (deadlock
        1213). MySQL/MariaDB: ``ON DUPLICATE KEY UPDATE instant_id = instant_id`` (a no-op
        update; ``INSERT IGNORE`` would also hide unrelated errors). PostgreSQL/SQLite:
        ``ON CONFLICT (instant_id) DO NOTHING``. Inline: no generated key is fetched back
        (:meth:`created_row` tells whether the row was inserted). Execute it with
        :data:`WRITE_OPTIONS`.
        """
        self._check_columns(row, ())
        if self._mysql_family:
            my = mysql.insert(self._table).values(dict(row))
            return my.on_duplicate_key_update({"instant_id": self._table.c.instant_id}).inline()
        ins = self._conflict_insert().values(dict(row))
        return ins.on_conflict_do_nothing(index_elements=["instant_id"]).inline()

    def created_row(self, result: CursorResult[Any]) -> bool:
        """True when the :meth:`ensure_row` that gave ``result`` inserted the row.

        The row is then empty and this transaction holds its lock (an uncommitted insert is
        locked until commit; a concurrent insert of the same ``instant_id`` waits), so reading
        it back is unnecessary. MySQL/MariaDB report 1 affected row either way (SQLAlchemy sets
        CLIENT_FOUND_ROWS), but an auto-increment value only for an insert: the no-op
        ``ON DUPLICATE KEY UPDATE`` leaves ``lastrowid`` 0. PostgreSQL and SQLite report the
        ``DO NOTHING`` case as 0 rows.
        """
        if self._mysql_family:
            return bool(result.lastrowid)
        return result.rowcount == 1

    def locking_read(
        self, instance_id: str, row_if_absent: Mapping[str, Any], *, row_known: bool
    ) -> list[Executable]:
        """Statements that lock the instance row and read it; the last one returns the row.

        The row has the columns :data:`LOCK_COLUMNS` (``states``, ``vars`` and ``has_graph``;
        ``graph`` itself instead of the flag on SQLite). MySQL/MariaDB/PostgreSQL:
        ``[ensure_row(row_if_absent), SELECT ... FOR UPDATE]``, or only the SELECT when the
        caller already saw the row exist in this process (``row_known``), saving a statement
        and, on MySQL, an AUTO_INCREMENT value burnt by each duplicate insert. When
        :meth:`created_row` says the insert created the row, the caller may skip the SELECT:
        the row is known to be empty and locked.

        SQLite has no row locks and upgrades a read transaction to a write lock only at the
        first write; two processes that both read first then fail with SQLITE_BUSY at the
        upgrade. So SQLite gets one ``INSERT ... ON CONFLICT (instant_id) DO UPDATE SET
        instant_id = excluded.instant_id RETURNING ...`` that creates the row if needed and
        takes the write lock at once, making the second process wait instead.
        """
        if not self.row_locks:
            self._check_columns(row_if_absent, ())
            ins = self._conflict_insert().values(dict(row_if_absent))
            return [
                ins.on_conflict_do_update(
                    index_elements=["instant_id"],
                    set_={"instant_id": ins.excluded.instant_id},
                ).returning(*self._lock_columns)
            ]
        select = (
            sa.select(*self._lock_columns)
            .where(self._table.c.instant_id == instance_id)
            .with_for_update()
        )
        if row_known:
            return [select]
        return [self.ensure_row(row_if_absent), select]

    def time_text(self, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
        """See :func:`time_text`."""
        return time_text(self.name, column)

    def plain_read(self, instance_id: str) -> Executable:
        """``SELECT`` of the instance row without a lock (cold cache reads, snapshots)."""
        return self._select(instance_id)

    def is_lock_conflict(self, exc: BaseException) -> bool:
        """True when ``exc`` (a SQLAlchemy ``DBAPIError`` or a raw driver error) is retryable.

        Lock wait timeout, deadlock or NOWAIT failure: MySQL/MariaDB errors 1205, 1213, 3572
        (MariaDB reports NOWAIT as 1205); PostgreSQL SQLSTATE 40P01, 55P03, 40001; SQLite
        "database is locked" / "database table is locked" (busy timeout expired).
        """
        orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
        return orig is not None and self._is_lock_conflict(orig)

    def _select(self, instance_id: str) -> sa.Select[Any]:
        return sa.select(*self._columns).where(self.exactly(self._table.c.instant_id, instance_id))

    def exactly(self, column: sa.ColumnElement[Any], value: str) -> sa.ColumnElement[bool]:
        """``column = value``, the text compared exactly (case, accents, trailing spaces).

        MySQL/MariaDB compare by the column's collation: in a table the migrations never
        made exact (the Go plugin's DDL, ``utf8mb4_unicode_ci``; revision ``flow0003``)
        ``'leave-1'`` finds the rows of ``'Leave-1 '`` — another instance's, or another
        person's. There the bytes must match too; the plain comparison stays, so the
        column's index still finds the rows (:class:`ExactlyEqual` gives the column another
        collation instead, which no index serves: it is for ``creator``, which has none)."""
        equal = column == value
        if not self._mysql_family:
            return equal
        return sa.and_(equal, _utf8mb4_bytes(column) == _utf8mb4_bytes(sa.literal(value)))

    def _conflict_insert(self) -> postgresql.Insert | sqlite.Insert:
        if self.name == "postgresql":
            return postgresql.insert(self._table)
        return sqlite.insert(self._table)

    def _check_columns(self, row: Mapping[str, Any], update_columns: Sequence[str]) -> None:
        names = set(row) | set(update_columns)
        bad = sorted(n for n in names if n == "id" or n not in self._table.c)
        if bad:
            raise RepositoryError(
                f"Columns {bad} cannot be written to {self._table.name!r} "
                "(id is never written; only columns of the table are allowed)"
            )
        if "instant_id" not in row:
            raise RepositoryError(f"A row for {self._table.name!r} needs an instant_id")


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a DBAPI driver's own exception (not wrapped by SQLAlchemy)."""
    return type(exc).__module__.partition(".")[0] in _DRIVER_PACKAGES


def is_conflict(orig: BaseException) -> bool:
    """Whether the driver exception ``orig`` is a transient conflict (lock wait timeout,
    deadlock, serialization or certification failure) of any supported dialect: a re-run of
    the whole transaction can succeed.

    Recognized by shape, without knowing the dialect: PostgreSQL drivers carry a SQLSTATE
    (``sqlstate`` in psycopg 3, ``pgcode`` in psycopg2); MySQL drivers an error number
    (``args[0]`` in mysqlclient and PyMySQL, ``errno`` in MariaDB Connector/Python and
    mysql-connector); SQLite only a message.
    """
    if isinstance(orig, sqlite3.OperationalError):
        return _sqlite_lock_conflict(orig)
    code = _sqlstate(orig)
    if code is not None:
        return code in _PG_LOCK_SQLSTATES
    return _mysql_lock_conflict(orig)


#: "No such table/column": SQLite's messages, PostgreSQL's SQLSTATEs, MySQL/MariaDB's numbers.
_SQLITE_MISSING_MESSAGES = ("no such table", "no such column")
_PG_MISSING_SQLSTATES = frozenset({"42P01", "42703"})
_MYSQL_MISSING_ERRORS = frozenset({1146, 1054})


def is_missing_schema(orig: BaseException) -> bool:
    """Whether the driver exception ``orig`` says a table or column does not exist — most
    often tables never migrated, or older than the library (recognized by shape, as
    :func:`is_conflict`)."""
    if isinstance(orig, sqlite3.OperationalError):
        return str(orig).startswith(_SQLITE_MISSING_MESSAGES)
    code = _sqlstate(orig)
    if code is not None:
        return code in _PG_MISSING_SQLSTATES
    return _mysql_errno(orig) in _MYSQL_MISSING_ERRORS


#: MySQL/MariaDB errors after which InnoDB has rolled back the whole transaction: a deadlock
#: (Galera reports a certification failure as one) and MariaDB's snapshot-isolation conflict.
#: A lock wait timeout (1205; 3572 for ``NOWAIT``) rolls back its statement only, unless the
#: server runs with ``innodb_rollback_on_timeout``.
_MYSQL_TRANSACTION_ENDING = frozenset({1213, 1020})


def ends_transaction(orig: BaseException) -> bool:
    """Whether the driver error ``orig`` ended the whole transaction on the server while the
    ``Connection`` still calls it active: any error on PostgreSQL (it refuses everything until
    the rollback), a deadlock on MySQL/MariaDB. On SQLite a failed statement leaves the
    transaction as it was (``INSERT OR ROLLBACK`` aside, which sqlite3 shows)."""
    if isinstance(orig, sqlite3.Error):
        return False
    if _sqlstate(orig) is not None:
        return True
    return _mysql_errno(orig) in _MYSQL_TRANSACTION_ENDING


#: A lock wait timeout, and ``NOWAIT`` finding the row locked (MySQL 8; MariaDB reports 1205).
_MYSQL_LOCK_TIMEOUTS = frozenset({1205, 3572})


def is_lock_timeout(orig: BaseException) -> bool:
    """Whether the MySQL/MariaDB driver error ``orig`` is a lock wait timeout (or ``NOWAIT``):
    it ends the whole transaction only on a server run with ``innodb_rollback_on_timeout``
    (:func:`rolls_back_on_lock_timeout`)."""
    if isinstance(orig, sqlite3.Error) or _sqlstate(orig) is not None:
        return False
    return _mysql_errno(orig) in _MYSQL_LOCK_TIMEOUTS


def rolls_back_on_lock_timeout(dialect: Dialect, dbapi_connection: Any) -> bool:
    """Whether the MySQL/MariaDB server rolls back the whole transaction on a lock wait
    timeout (``innodb_rollback_on_timeout``, a startup option), asked on the driver's
    connection — which an error handler may still use, where the ``Connection`` is busy
    reporting the error. ``True`` when it cannot be read: the safe answer."""
    stmt: sa.Select[Any] = sa.select(sa.literal_column("@@innodb_rollback_on_timeout"))
    try:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(str(stmt.compile(dialect=dialect)))
            row = cursor.fetchone()
        finally:
            cursor.close()
        return bool(int(row[0]))
    except Exception:
        return True


def _sqlstate(orig: BaseException) -> str | None:
    """A PostgreSQL driver error's SQLSTATE: ``sqlstate`` in psycopg 3, ``pgcode`` in psycopg2.
    ``None`` for a MySQL driver's error, which its number identifies: PyMySQL 1.1+ carries the
    server's SQLSTATE too (``HY000`` for a lock wait timeout, ``42S02`` for a missing table),
    which read as PostgreSQL's would hide what the number says."""
    if isinstance(_mysql_errno(orig), int):
        return None
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


def _mysql_errno(orig: BaseException) -> Any:
    """A MySQL driver error's number: ``errno`` in MariaDB Connector/Python and
    mysql-connector, ``args[0]`` in mysqlclient and PyMySQL."""
    errno = getattr(orig, "errno", None)
    if isinstance(errno, int) and not isinstance(errno, bool):
        return errno
    args: tuple[Any, ...] = getattr(orig, "args", ())
    return args[0] if args else None


def _mysql_lock_conflict(orig: BaseException) -> bool:
    return _mysql_errno(orig) in _MYSQL_LOCK_ERRORS


def _pg_lock_conflict(orig: BaseException) -> bool:
    return _sqlstate(orig) in _PG_LOCK_SQLSTATES


def _sqlite_lock_conflict(orig: BaseException) -> bool:
    if not isinstance(orig, sqlite3.OperationalError):
        return False
    message = str(orig)
    return any(text in message for text in _SQLITE_LOCK_MESSAGES)


def is_autocommit(bind: Engine | Connection) -> bool:
    """Whether ``bind`` runs in ``AUTOCOMMIT`` mode: its own ``isolation_level`` execution
    option, else the level its engine sets on every new connection (``create_engine(...,
    isolation_level=...)``, kept by the dialect). No SQL is sent."""
    level = bind.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(bind.dialect, "_on_connect_isolation_level", None)
    return isinstance(level, str) and level.upper() == "AUTOCOMMIT"


def _mysql_autocommit(conn: Connection) -> bool:
    """The server's autocommit flag of the last reply (mysqlclient, PyMySQL)."""
    dbapi_conn: Any = conn.connection.dbapi_connection
    return bool(dbapi_conn.get_autocommit())


def _psycopg_autocommit(conn: Connection) -> bool:
    dbapi_conn: Any = conn.connection.dbapi_connection
    return bool(dbapi_conn.autocommit)


def _sqlite_autocommit(conn: Connection) -> bool:
    """Once SQLAlchemy has begun the transaction, none is open in sqlite3 while it runs
    without implicit ones (``isolation_level=None``, or Python 3.12's ``autocommit=True``)."""
    if not conn.in_transaction():
        return False
    dbapi_conn: Any = conn.connection.dbapi_connection
    implicit_off = (
        dbapi_conn.isolation_level is None or getattr(dbapi_conn, "autocommit", -1) is True
    )
    return bool(implicit_off and not dbapi_conn.in_transaction)


_AUTOCOMMIT_PROBES: dict[str, Callable[[Connection], bool]] = {
    "mysqldb": _mysql_autocommit,
    "pymysql": _mysql_autocommit,
    "psycopg": _psycopg_autocommit,
    "psycopg2": _psycopg_autocommit,
    "pysqlite": _sqlite_autocommit,
}


#: MySQL's client capability flag for several ``;``-separated statements in one query.
_CLIENT_MULTI_STATEMENTS = 1 << 16
#: The MySQL drivers that send a query's text as it is and read its results one by one
#: (``cursor.nextset()``), with the capability flags they connected with in ``client_flag``
#: (PyMySQL's parameters are named, see below).
_MULTI_STATEMENT_DRIVERS = frozenset({"mysqldb", "pymysql"})


def sends_statements_together(conn: Connection) -> bool:
    """Whether ``conn`` may send several statements in one round trip: a MySQL/MariaDB
    connection of mysqlclient, which connects with multi-statements on unless told
    ``multi_statements=False``. Read from the driver connection's flags, no round trip. The
    statements' parameters are joined in order, so the parameter style must be positional:
    SQLAlchemy binds PyMySQL's by name, and PyMySQL sends each statement alone even when its
    ``client_flag`` allows several. PostgreSQL folds the same writes into one statement
    instead (``DialectOps.index_merge``); SQLite has no round trips to save."""
    dialect = conn.dialect
    if (
        dialect.name not in ("mysql", "mariadb")
        or dialect.driver not in _MULTI_STATEMENT_DRIVERS
        or not dialect.positional
    ):
        return False
    flags = getattr(conn.connection.dbapi_connection, "client_flag", 0)
    return isinstance(flags, int) and bool(flags & _CLIENT_MULTI_STATEMENTS)


def transaction_still_open(conn: Connection) -> bool:
    """Whether the driver still shows a transaction open on ``conn``'s server session, from
    its own state (no round trip): ``False`` right after the server ended it behind the
    ``Connection``'s back — the caller's raw ``COMMIT``/``ROLLBACK``, SQLite's ``INSERT OR
    ROLLBACK``, an error that aborted a PostgreSQL transaction. ``True`` where the driver
    cannot tell, or once any later statement has begun a new transaction (which is why this
    only narrows, and cannot close, the caller's ways to end a transaction unseen).

    sqlite3 and psycopg (3 and 2) keep this state. The MySQL drivers do not: PyMySQL's
    status flag comes only with some replies (a transaction that has only read shows none,
    and a deadlock's error reply carries none), mysqlclient exposes none."""
    probe = _TRANSACTION_PROBES.get(conn.dialect.driver)
    if probe is None:
        return True
    try:
        return probe(conn.connection.dbapi_connection)
    except (AttributeError, TypeError):  # an adapted connection without the driver's state
        return True


#: libpq's PQTRANS_INTRANS: idle inside a transaction block (psycopg 3 and psycopg2 alike).
_PG_IN_TRANSACTION = 2

_TRANSACTION_PROBES: dict[str, Callable[[Any], bool]] = {
    "psycopg": lambda dbapi_conn: int(dbapi_conn.info.transaction_status) == _PG_IN_TRANSACTION,
    "psycopg2": lambda dbapi_conn: int(dbapi_conn.info.transaction_status) == _PG_IN_TRANSACTION,
    "pysqlite": lambda dbapi_conn: dbapi_conn.in_transaction is True,
}


__all__ = [
    "INDEX_COLUMNS",
    "LOCK_COLUMNS",
    "MAX_MIGRATION_LOCK_TIMEOUT",
    "MIGRATION_LOCK_TIMEOUT",
    "ROW_COLUMNS",
    "WRITE_OPTIONS",
    "DialectOps",
    "EncodedJSON",
    "ExactString",
    "ExactlyEqual",
    "IndexMerge",
    "ModifyIdColumns",
    "as_text",
    "ends_transaction",
    "exact_collation",
    "is_autocommit",
    "is_conflict",
    "is_driver_error",
    "is_lock_timeout",
    "json_dumps",
    "migration_lock",
    "migration_lock_key",
    "rolls_back_on_lock_timeout",
    "sends_statements_together",
    "stored_text",
    "time_text",
    "transaction_still_open",
    "undecoded_text",
]
