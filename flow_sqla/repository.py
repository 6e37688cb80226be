"""The SQL state repository: one ``bpm_flow_repository`` row per instance.

Every executor operation runs in one unit of work: the instance row is read (and locked) once
at its start, every ``state_get``/``vars_get`` is answered from memory, state changes are
buffered and written with one upsert at its end. See ``docs/persistence.md``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RootTransaction, RowMapping, Transaction
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ClauseElement

from flow._graph_memo import GraphMemo
from flow._hooks import check_hooks
from flow.codec import CodecLimits
from flow.context import FlowContext
from flow.errors import SnapshotError
from flow.graph import Graph, Node
from flow.workflow._arguments import check_context, default_auditor, identity_text
from flow.workflow.aggregate import (
    IndexRead,
    InstanceIndex,
    InstanceStatus,
    InstanceSummary,
    OpenTask,
)
from flow.workflow.errors import (
    ConcurrentSubmitError,
    InvalidArgumentTypeError,
    InvalidInstanceIdError,
)
from flow.workflow.repository import state_key
from flow.workflow.states import TaskState
from flow_sqla import _options as options
from flow_sqla._dialect import (
    INDEX_COLUMNS,
    WRITE_OPTIONS,
    DialectOps,
    EncodedJSON,
    is_autocommit,
    json_dumps,
)
from flow_sqla._engine import engine_for
from flow_sqla._held import HELD, HeldKey, innermost_transaction
from flow_sqla._limits import (
    GraphChecks,
    check_id,
    check_instance_id,
    check_readable,
    check_readable_instance_id,
)
from flow_sqla._prepared import PreparedStatements, execute_together
from flow_sqla._reads import (
    TIMES_BY_HAND,
    callers_connection,
    check_same_kind,
    fetch_rows,
    operation_connection,
)
from flow_sqla._rows import (
    BoundedMap,
    StoredRow,
    holds_nothing,
    malformed_index,
    parse_index,
    parse_row,
    parse_states,
    parse_vars,
    stored_status,
    task_doc,
    utc_now,
)
from flow_sqla._todo import GraphCandidateChecks, TodoChanges, TodoTable, check_candidates
from flow_sqla._together import HeldBack, Statement, holding_back, send_now, together_open
from flow_sqla._transaction_events import watch
from flow_sqla._translate import Translating, commit, translating
from flow_sqla._vars import VarsPolicy
from flow_sqla.errors import (
    AutocommitError,
    IdCollationError,
    InvalidArgumentError,
    RepositoryError,
    StaleCacheError,
    UnstorableGraphError,
    UnstorableValueError,
)
from flow_sqla.tables import FlowTables

if TYPE_CHECKING:
    from flow.engine import FlowEngine

CacheMode = Literal["operation", "process"]
Auditor = Callable[[FlowContext], "str | None"]

_INTENT_KEY = "WorkflowIntent"
_BASE_COLUMNS = ("states", "vars", "updater", "update_time")
_UPSERT_COLUMNS = ("instant_id", *_BASE_COLUMNS, "creator", "create_time")
_ABSENT_COLUMNS = ("instant_id", "creator", "create_time", "updater", "update_time")
#: The name the UPDATE binds the instance id under (a column's own name is reserved there).
_ROW_KEY = "row_key"
#: Stored codes to states (unknown codes read as UNKNOWN, like ``TaskState.of``).
_STATES: dict[int, TaskState] = {state.value: state for state in TaskState}
_WAITING = TaskState.WAITING.value
#: Instances remembered to have a row (saves the insert-if-absent statement).
KNOWN_ROWS_CAPACITY = 100_000
#: Graph documents kept for the flush that stores an instance's graph.
GRAPH_DOCS_CAPACITY = 256
#: UTF-8 bytes of the graph document stored with each new instance: under MariaDB/MySQL's
#: default ``max_allowed_packet`` (16 MiB) with room for the rest of the row. A small YAML file
#: whose aliases repeat large parts can expand far beyond its own size.
MAX_GRAPH_DOC_BYTES = 4 << 20
#: Larger documents are encoded again for each new instance instead of being kept.
GRAPH_DOC_KEPT_BYTES = 256 << 10
#: Rows kept across operations in ``cache="process"`` mode.
PROCESS_CACHE_CAPACITY = 10_000


class SnapshotIndexer(Protocol):
    """What :meth:`SqlStateRepository.save_snapshot` needs to keep the task index: a
    ``WorkflowExecutor`` (its ``index_snapshot``) whose repository is this one."""

    @property
    def state_repository(self) -> object: ...

    def index_snapshot(self, graph: Graph, ctx: FlowContext) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """Everything stored for one instance. ``vars`` are decoded (dates, decimals... restored).

    ``graph_json`` is the instance's graph as JSON text: the stored document, or — when the
    row holds only a graph id, as the Go plugin may write — the graph of that id loaded in
    the repository's ``flow_engine``; ``None`` when neither is there. ``graph_id`` is the id of
    the stored graph (from the document, or the bare id), ``None`` when none is stored.
    """

    instance_id: str
    graph_json: str | None
    graph_id: str | None = None
    states: dict[str, TaskState]
    vars: dict[str, Any]
    creator: str | None
    create_time: datetime | None
    updater: str | None
    update_time: datetime | None


class _Operation:
    """The in-memory state of one unit of work on one instance."""

    __slots__ = (
        "base",
        "bookkeeping",
        "cleared",
        "conn",
        "deferred",
        "final",
        "force_graph",
        "graph",
        "held",
        "instance_id",
        "joined",
        "keep_vars",
        "locked",
        "new_index",
        "pending",
        "replace_vars",
        "states",
        "stored_vars",
        "transaction",
    )

    #: What an operation called back on the same instance may change (:meth:`saved`).
    _CHANGEABLE = (
        "bookkeeping",
        "cleared",
        "force_graph",
        "graph",
        "keep_vars",
        "new_index",
        "replace_vars",
        "stored_vars",
    )

    def __init__(self, instance_id: str, conn: Connection, base: StoredRow, locked: bool) -> None:
        self.instance_id = instance_id
        self.conn = conn
        self.base = base
        self.locked = locked
        self.states: dict[str, int] = dict(base.states)
        self.graph: Graph | None = None
        self.force_graph = False
        self.replace_vars = False
        self.stored_vars: dict[str, Any] | None = None
        self.final: StoredRow | None = None
        self.new_index: InstanceIndex | None = None
        self.bookkeeping = False
        self.keep_vars = False
        #: A RESTART cleared the states: with the index on, the row's graph document is
        #: written again (the instance may start over as another graph's).
        self.cleared = False
        #: In the caller's transaction (``ctx.connection``): a claim's write may be deferred.
        self.joined = False
        #: The write an earlier claim on this row deferred (``base`` includes it).
        self.pending: _DeferredClaim | None = None
        #: This operation's write, when it is deferred in its turn.
        self.deferred: _RowWrite | None = None
        #: The statements held back to go out with the write (the history row's INSERT).
        self.held: HeldBack | None = None
        #: The connection's innermost transaction when the operation began (a savepoint, if
        #: it began in one).
        self.transaction: Transaction | None = None

    def saved(self) -> tuple[dict[str, int], tuple[Any, ...]]:
        """What a call back on this instance may change, to put back if it fails: it joined
        this operation, and nothing of a failed call remains (as the in-memory repository's
        journal undoes it)."""
        return dict(self.states), tuple(getattr(self, name) for name in self._CHANGEABLE)

    def restore(self, saved: tuple[dict[str, int], tuple[Any, ...]]) -> None:
        states, values = saved
        self.states = states
        for name, value in zip(self._CHANGEABLE, values, strict=True):
            setattr(self, name, value)

    def only_marks_waiting(self) -> bool:
        """Whether the operation is a claim: it changed states only to WAITING (or added
        them as WAITING) and stores nothing else of its own accord."""
        if (
            self.force_graph
            or self.replace_vars
            or self.keep_vars
            or self.bookkeeping
            or self.cleared
        ):
            return False
        before = self.base.states
        if not before.keys() <= self.states.keys():
            return False
        return all(code == _WAITING or before.get(key) == code for key, code in self.states.items())

    def note_graph(self, ctx: FlowContext, node: Node | None) -> None:
        """The operation's graph: the executor's root graph, else ``node``'s."""
        if self.graph is None:
            root = getattr(ctx.data.get(_INTENT_KEY), "root_graph", None)
            self.graph = root if isinstance(root, Graph) else None if node is None else node.graph


@dataclass(frozen=True, slots=True)
class _RowWrite:
    """One write of an instance row: the column ``values`` (``states``, ``vars``, ``updater``,
    ``update_time``; ``graph`` and the index columns when they change), whether it is
    ``audited`` (a reindex's bookkeeping leaves the first four alone), and the task index
    before (``stored``, as the database holds it) and after (``aggregate``; ``None``: the
    index columns are not written)."""

    instance_id: str
    values: dict[str, Any]
    audited: bool
    stored: InstanceIndex | None
    aggregate: InstanceIndex | None

    @property
    def with_graph(self) -> bool:
        return "graph" in self.values

    @property
    def with_index(self) -> bool:
        return self.aggregate is not None

    def then(self, later: _RowWrite) -> _RowWrite:
        """This write and a ``later`` one of the same row as one: ``later``'s values over
        this one's, the todo rows from what the database holds to what ``later`` leaves."""
        return _RowWrite(
            instance_id=self.instance_id,
            values={**self.values, **later.values},
            audited=self.audited and later.audited,
            stored=self.stored,
            aggregate=later.aggregate if later.aggregate is not None else self.aggregate,
        )


class _DeferredClaim:
    """A claim's write in the caller's transaction, kept for the submit that usually
    follows (one ``UPDATE`` for both) or else sent before the ``COMMIT``
    (:class:`flow_sqla._held.DeferredWrite`)."""

    __slots__ = ("key", "owner", "resolved_schema", "schema", "sent", "thread", "write")

    def __init__(
        self,
        owner: SqlStateRepository,
        key: HeldKey,
        schema: str | None,
        write: _RowWrite,
        conn: Connection,
    ) -> None:
        self.owner = owner
        self.key = key
        self.schema = schema
        #: The schema the row is in, by name (``None``: the server's default was unknown).
        self.resolved_schema = schema if schema is not None else conn.dialect.default_schema_name
        self.write = write
        self.thread = threading.get_ident()
        #: Sent alone (:meth:`run`): the row holds it, and the operation that took it up to
        #: fold it — whose task code or interceptor made the connection send it — must not.
        self.sent = False

    def run(self, conn: Connection) -> None:
        """Send the write alone — never to another schema than the claim's (it is settled
        before the connection's options change; a connection that changed them anyway drops
        it). A row the caller's own SQL deleted meanwhile is recreated, as for any write in
        the caller's transaction: ``evict(instance_id)`` before such SQL drops the claim
        (persistence.md §3)."""
        owner = self.owner
        if owner._held_schema(conn) != self.schema:
            return
        with owner._translating(self.write.instance_id):
            owner._write(conn, self.write)
        self.sent = True


class _ThreadOperations(threading.local):
    """The operations of one repository running in the current thread, by instance id."""

    def __init__(self) -> None:
        self.ops: dict[str, _Operation] = {}


#: An instance row as :class:`_RowsInUse` names it: the connection an operation runs on — or
#: its engine's URL (password left out) —, the table's full name and the instance id.
RowKey = tuple[Connection | str, str, str]


class _RowsInUse(threading.local):
    """Every repository's operations running in the current thread, by instance row, each
    under two keys. Another repository's operation joining the connection of one of them on
    its row would read the row as it was and write over it when the first one flushes (keyed
    by the connection, however its URL is spelled); one on a connection of its own would wait
    for the row lock its own thread holds (keyed by the URL: a URL spelled otherwise still
    waits, until the lock wait ends). Rows of another table (a schema named in
    ``FlowTables``) or another database are other rows."""

    def __init__(self) -> None:
        self.by_row: dict[RowKey, SqlStateRepository] = {}


_ROWS_IN_USE = _RowsInUse()


class SqlStateRepository:
    """A :class:`~flow.workflow.StateRepository` with ``unit_of_work``, on SQLAlchemy Core.

    ``bind`` is an ``Engine`` or a URL (an engine is created once, with a compact JSON
    serializer). ``cache="operation"`` (default) reads the row with its lock at the start of
    every operation — safe with many processes; ``cache="process"`` keeps rows in a bounded LRU
    across operations (zero statements for a warm claim) and is meant for a single process.
    ``auditor(ctx)`` names who writes (default: the ``auditor``, else ``creator``, else
    ``actor`` variable); ``vars_filter`` lists the identity keys never stored (default
    ``actor``, ``auditor``, ``creator``). ``flow_engine`` resolves a graph stored only as
    its id (see :class:`Snapshot`); :func:`~flow_sqla.sql_workflow` passes its engine.
    ``plain_json=True`` stores dates, times, decimals and UUIDs as plain JSON strings (for Go
    services; they read back as ``str``); ``limits`` bounds the stored variables
    (:class:`flow.codec.CodecLimits`). ``index=True`` keeps the task index (instance status
    and open tasks, revision ``flow0004``) in the same transaction as the states — the
    executor then offers inbox, withdraw and send-back. Raises :class:`RepositoryError` for
    an unsupported dialect and ``ValueError`` for an unknown cache mode.
    """

    def __init__(
        self,
        bind: Engine | str,
        tables: FlowTables | None = None,
        *,
        cache: CacheMode = "operation",
        auditor: Auditor | None = None,
        vars_filter: Iterable[str] | None = None,
        flow_engine: FlowEngine | None = None,
        plain_json: bool = False,
        limits: CodecLimits | None = None,
        index: bool = False,
    ) -> None:
        if cache not in ("operation", "process"):
            raise InvalidArgumentError("cache", cache, "must be 'operation' or 'process'")
        self.engine: Engine = engine_for(bind)
        if is_autocommit(self.engine):
            raise AutocommitError("The repository's engine")
        self.tables = options.optional("tables", tables, FlowTables) or FlowTables()
        self.cache_mode: CacheMode = cache
        #: Whether this repository keeps the task index (the executor checks it).
        self.keeps_task_index = options.flag("index", index)
        self._dialect = DialectOps(self.engine.dialect, self.tables, index=self.keeps_task_index)
        self._todo = TodoTable(
            self.tables,
            keys_through_join=self._dialect.keys_through_join,
            sentinel=self._dialect.todo_sentinel,
        )
        self._auditor: Auditor = options.callable_or_none("auditor", auditor) or default_auditor
        self._vars = VarsPolicy(vars_filter, limits=limits, plain_json=plain_json)
        if flow_engine is not None:  # used only for a graph stored as its bare id: check now
            check_hooks("flow_engine", flow_engine, ("get_graph",), "a FlowEngine or None")
        self.flow_engine = flow_engine
        self._known: BoundedMap[bool] = BoundedMap(KNOWN_ROWS_CAPACITY)
        self._cache: BoundedMap[StoredRow] | None = (
            BoundedMap(PROCESS_CACHE_CAPACITY) if cache == "process" else None
        )
        self._local = _ThreadOperations()
        self._table_name = self.tables.repository.fullname  # see _RowsInUse
        self._database = self.engine.url.render_as_string(hide_password=True)
        self._locking_reads: dict[bool, list[Executable]] = {}
        self._upserts: dict[tuple[bool, bool], Executable] = {}
        self._updates: dict[tuple[bool, bool, bool], Executable] = {}
        self._graph_docs: GraphMemo[str] = GraphMemo(GRAPH_DOCS_CAPACITY)
        self._prepared = PreparedStatements()
        self._graphs = GraphChecks()
        self._candidates = GraphCandidateChecks()
        self._indexer: SnapshotIndexer | None = None

    # -- unit of work ------------------------------------------------------------------
    @contextmanager
    def unit_of_work(self, ctx: FlowContext, *, lock: bool = True) -> Iterator[None]:
        """One operation on ``ctx.instance_id``: joins ``ctx.connection`` when it is a
        SQLAlchemy ``Connection`` (never committing or rolling it back), else runs in its own
        ``engine.begin()`` which it also puts into ``ctx.connection`` for the block, so the
        history recorder and the caller's task code share the transaction. Re-entrant.

        Raises :class:`ConcurrentSubmitError` on a lock timeout, deadlock, serialization or
        (Galera) certification failure, :class:`RepositoryError` for any other database error,
        :class:`SnapshotError` for a malformed row or a variable that cannot be stored — in
        every case nothing is kept — and, for its own transaction only,
        :class:`CommitOutcomeUnknownError` when the connection was lost during ``COMMIT``
        (the unit may have committed).
        """
        outer = self._local.ops.get(ctx.instance_id)
        if outer is not None:
            yield from self._nested(ctx, outer, lock)
            return
        check_instance_id(ctx.instance_id)
        conn = operation_connection(ctx, self.engine)
        if conn is not None:
            self._check_row_not_in_use(conn, ctx.instance_id)
            yield from self._joined(ctx, conn)
        else:
            self._check_row_not_in_use(self._database, ctx.instance_id)
            yield from self._owned(ctx, lock)

    def _check_row_not_in_use(self, where: Connection | str, instance_id: str) -> None:
        """Refuse an operation on a row another repository's operation is changing in this
        thread (task code or an interceptor calling another executor on the same tables):
        it would read the row as it was, and the first operation's write, decided before,
        would land over its own — a terminated task open again. Nothing is written."""
        user = _ROWS_IN_USE.by_row.get((where, self._table_name, instance_id))
        if user is not None and user is not self:
            raise RepositoryError(
                "An operation on this instance is already running in this thread through "
                "another executor or repository on the same table (task code or an "
                "interceptor calling it back): call back the executor whose operation runs",
                instance_id=instance_id,
            )

    def serializes(self, ctx: FlowContext) -> bool:
        """Whether :meth:`unit_of_work` alone serializes an operation on ``ctx`` against every
        other thread and process: true for the caller's own transaction (``ctx.connection``),
        where each operation starts with the row lock — in ``cache="process"`` mode too, the
        cache is not used there — and the transaction keeps it. The executor then takes no
        process lock (see ``WorkflowExecutor._operation``: with one, two threads whose
        transactions each span a claim and a submit would deadlock on the process lock and the
        row lock). True as well for a call back into the executor on an instance this thread
        has an operation open on (:meth:`_nested`): it joins that operation, which the row lock
        (or this thread's process lock) already serializes — a process lock taken for it would
        wait behind another thread that holds that lock and waits for the row."""
        return isinstance(ctx.connection, Connection) or ctx.instance_id in self._local.ops

    def _owned(self, ctx: FlowContext, lock: bool) -> Iterator[None]:
        instance_id = ctx.instance_id
        saved = ctx.connection
        op: _Operation | None = None
        guard = Translating(self._dialect, instance_id)
        # Taken before the row is read: an operation in a caller's transaction (which takes
        # no process lock) may change the row and drop the entry after this one's COMMIT and
        # before it caches its row, which is then older than the database's.
        stamp = self._cache.stamp(instance_id) if self._cache is not None else 0
        try:
            # connect() + begin() is engine.begin() without its generator context manager; the
            # explicit commit lets a connection lost during COMMIT be told from one lost before.
            with guard, self.engine.connect() as conn, conn.begin() as trans:
                if self._dialect.commits_each_statement(conn):
                    raise AutocommitError("The repository's connection", instance_id=instance_id)
                ctx.connection = conn
                op = self._start(ctx, conn, lock)
                yield from self._run(ctx, op)
                guard.committing = True
                commit(conn, trans)
        except BaseException:
            if self._cache is not None:
                self._cache.pop(instance_id)
            raise
        finally:
            ctx.connection = saved
        self._remember(op, cache=True, stamp=stamp)

    def _nested(self, ctx: FlowContext, outer: _Operation, lock: bool) -> Iterator[None]:
        """An operation on an instance this thread already has one open on — task code or an
        interceptor calling the executor back, often with a context of its own: it joins the
        open one. Its states, variables and history row go into that transaction and commit
        or roll back with it, so ``ctx`` carries that connection for the block (a context
        carrying none would have its history row committed on its own — left behind by a
        failing outer operation, or, on SQLite, waiting for the outer's write lock). A
        context carrying another ``Connection`` is refused (:class:`RepositoryError`,
        nothing written): its states would go into one transaction, its history into the
        other."""
        given = ctx.connection
        if isinstance(given, Connection) and given is not outer.conn:
            raise RepositoryError(
                "An operation on this instance is already running in this thread on another "
                "connection (task code or an interceptor calling the executor back): call it "
                "with that operation's context, or a context carrying its ctx.connection",
                instance_id=ctx.instance_id,
            )
        if lock and not outer.locked:
            self._relock(ctx, outer)
        if innermost_transaction(outer.conn) is not outer.transaction:
            raise RepositoryError(
                "An operation on this instance is already running in this thread outside the "
                "savepoint this call back is in: rolling the savepoint back would undo the "
                "call's history row but not its state changes — call the executor back "
                "outside the savepoint",
                instance_id=ctx.instance_id,
            )
        saved, held = outer.saved(), outer.held
        mark = 0
        if held is not None:
            mark = held.mark()
            held.calls_back += 1
        ctx.connection = outer.conn
        try:
            yield
        except BaseException:
            # Nothing of a failed call back remains: neither its state changes nor the
            # history rows it (or a call back inside it) held back.
            outer.restore(saved)
            if held is not None:
                held.drop_after(mark)
            raise
        finally:
            ctx.connection = given
            if held is not None:
                held.calls_back -= 1

    def _joined(self, ctx: FlowContext, conn: Connection) -> Iterator[None]:
        instance_id = ctx.instance_id
        # A closed or invalidated connection fails already here (ResourceClosedError,
        # PendingRollbackError): a RepositoryError too.
        with self._translating(instance_id):
            autocommits = self._dialect.commits_each_statement(conn)
        if autocommits:
            HELD.forget(conn)
            raise AutocommitError("ctx.connection", instance_id=instance_id)
        schema, key = self._held_schema(conn), self._held_key(instance_id)
        held = HELD.get(conn, schema, key, self)
        pending = HELD.deferred(conn, schema, key, self) if held is not None else None
        assert pending is None or isinstance(pending, _DeferredClaim)
        op: _Operation | None = None
        try:
            if pending is None:
                HELD.settle(conn)  # another row's deferred write goes first
            with self._translating(instance_id):
                if held is not None:
                    op = _Operation(instance_id, conn, held, locked=True)
                    op.pending = pending
                else:
                    # Always from the locked row, never the process cache: the row lock alone
                    # serializes operations in a caller's transaction (see serializes()).
                    op = _Operation(instance_id, conn, self._locking_read(ctx, conn), locked=True)
                op.joined = True
                yield from self._run(ctx, op)
                self._remember(op, cache=False)
                self._hold(conn, op)
                if op.deferred is not None:
                    self._defer(op, schema, key, op.deferred)
        except BaseException as exc:
            HELD.release(conn)
            if op is not None and isinstance(op.base, _BlankRow):
                self._unlock_blank_row(op, exc)
            raise
        finally:
            # The caller commits or rolls back later; we cannot see which.
            if self._cache is not None:
                self._cache.pop(instance_id)

    def _unlock_blank_row(self, op: _Operation, exc: BaseException) -> None:
        """After an error raised by the operation's own code (a value that cannot be stored,
        a failing condition) in the caller's transaction, delete the row its locking read
        inserted for an unknown id — if it still holds nothing: a caller who commits anyway
        then keeps no half-made instance. Not after a database error, which may have ended or
        aborted the transaction (the caller's rollback removes the row)."""
        conn = op.conn
        if not isinstance(exc, Exception) or _from_database(exc, conn.dialect.loaded_dbapi.Error):
            return
        table = self.tables.repository
        blank = sa.delete(table).where(
            table.c.instant_id == op.instance_id,
            table.c.states.is_(None),
            table.c.vars.is_(None),
            table.c.graph.is_(None),
        )
        # In a savepoint: a DELETE the server refuses (a foreign key of the caller's, a
        # trigger, a statement timeout) must not abort the caller's transaction (PostgreSQL).
        # The operation's own error is the one to report.
        with suppress(Exception), conn.begin_nested():
            conn.execute(blank)
        self._known.pop(op.instance_id)

    def _defer(self, op: _Operation, schema: str | None, key: HeldKey, write: _RowWrite) -> None:
        """Keep a claim's ``write`` (which includes any write it was folded from) for the
        submit that usually follows in the caller's transaction, or — when it cannot be
        kept — send it now."""
        # The COMMIT must send it: _hold, which ran before, watches the engine already.
        waiting = HELD.pending(op.conn)
        if waiting is not None and waiting is not op.pending:
            # Deferred while this claim ran, by an operation on another instance that its
            # interceptor or task code ran on the connection: one write is kept per
            # connection, so that one goes first.
            HELD.settle(op.conn)
        if not HELD.defer(op.conn, _DeferredClaim(self, key, schema, write, op.conn)):
            conn, pending = op.conn, op.pending
            done = None if pending is None else (lambda: HELD.done(conn, pending))
            self._write(conn, write, row_sent=done, held=op.held)

    def _hold(self, conn: Connection, op: _Operation) -> None:
        """Keep the row the operation leaves locked for the next operation on it in the
        caller's transaction. The engine is watched from the first row held on it, not from
        the first claim deferred: a deadlock of the caller's own statement ends the
        transaction and its row locks, and only the ``handle_error`` listener tells — a held
        row trusted after it (a claim that found its task already WAITING defers nothing)
        would let a submit approve over another transaction's approval."""
        if op.locked and op.final is not None:
            watch(conn.engine)
            key = self._held_key(op.instance_id)
            HELD.put(conn, self._held_schema(conn), key, self, op.final)

    def _held_key(self, instance_id: str) -> HeldKey:
        return (self.tables.repository.name, instance_id)

    def _held_schema(self, conn: Connection) -> str | None:
        """The schema ``conn`` sends the instance table to (its ``schema_translate_map``)."""
        schema = self.tables.repository.schema
        translate = conn.get_execution_options().get("schema_translate_map")
        return translate.get(schema, schema) if translate else schema

    def _run(self, ctx: FlowContext, op: _Operation) -> Iterator[None]:
        ops = self._local.ops
        ops[op.instance_id] = op
        op.transaction = innermost_transaction(op.conn)
        rows = _ROWS_IN_USE.by_row
        by_connection = (op.conn, self._table_name, op.instance_id)
        by_database = (self._database, self._table_name, op.instance_id)
        rows[by_connection] = rows[by_database] = self
        try:
            with holding_back(op.conn, op.instance_id) as held:
                op.held = held
                yield
                self._flush(ctx, op)
                held.send(op.conn)  # what no write of the unit took along
        finally:
            ops.pop(op.instance_id, None)
            rows.pop(by_connection, None)
            rows.pop(by_database, None)

    def _start(self, ctx: FlowContext, conn: Connection, lock: bool) -> _Operation:
        if self._cache is not None and not lock:
            cached = self._cache.get(ctx.instance_id)
            if cached is not None:
                return _Operation(ctx.instance_id, conn, cached, locked=False)
        return _Operation(ctx.instance_id, conn, self._locking_read(ctx, conn), locked=True)

    def _relock(self, ctx: FlowContext, op: _Operation) -> None:
        """Lock the row of an operation that started from the process cache. A row changed
        by another process meanwhile is adopted while the operation has changed nothing;
        changes decided on the old row raise :class:`StaleCacheError`."""
        fresh = self._locking_read(ctx, op.conn)
        op.locked = True
        if fresh == op.base:
            return
        if op.states != op.base.states:
            raise StaleCacheError(op.instance_id)
        op.base = fresh
        op.states = dict(fresh.states)
        op.stored_vars = None

    def _remember(self, op: _Operation | None, *, cache: bool, stamp: int = 0) -> None:
        if op is None or op.final is None:
            return
        self._known.put(op.instance_id, True)
        if cache and self._cache is not None:
            self._cache.put_unless_popped(op.instance_id, op.final, stamp)

    # -- reading and writing the row ----------------------------------------------------
    def _locking_read(self, ctx: FlowContext, conn: Connection) -> StoredRow:
        instance_id = ctx.instance_id
        if self._dialect.row_locks and instance_id in self._known:
            # Only the SELECT runs: it binds the id alone.
            (select,) = self._locking_statements(True)
            stored = self._fetch_locked(conn, select, instance_id, {"instant_id": instance_id})
            if stored is not None:
                return stored
            self._known.pop(instance_id)
        now, who = utc_now(), self._who(ctx)
        params = {
            "instant_id": instance_id,
            "creator": who,
            "create_time": now,
            "updater": who,
            "update_time": now,
        }
        *ensure, read = self._locking_statements(False)
        for stmt in ensure:
            result = self._execute(conn, stmt, params, WRITE_OPTIONS)
            if self._dialect.created_row(result):
                # Inserted just now: empty, and locked by this transaction until it ends.
                return _BlankRow(states={}, vars={}, has_graph=False)
        stored = self._fetch_locked(conn, read, instance_id, params)
        if stored is None:
            raise RepositoryError("The instance row could not be read", instance_id=instance_id)
        return stored

    def _locking_statements(self, known: bool) -> list[Executable]:
        """Built once per flag with bound parameters, so each operation only binds values."""
        stmts = self._locking_reads.get(known)
        if stmts is None:
            absent = {name: self._bind(name) for name in _ABSENT_COLUMNS}
            key: Any = self._bind("instant_id")
            stmts = self._locking_reads[known] = self._dialect.locking_read(
                key, absent, row_known=known
            )
        return stmts

    def _upsert_statement(self, with_graph: bool, with_index: bool = False) -> Executable:
        stmt = self._upserts.get((with_graph, with_index))
        if stmt is None:
            extra = _extra_columns(with_graph, with_index)
            row = {name: self._bind(name) for name in (*_UPSERT_COLUMNS, *extra)}
            stmt = self._dialect.upsert(row, (*_BASE_COLUMNS, *extra))
            if isinstance(stmt, sa.Insert):
                stmt = stmt.inline()  # no implicit RETURNING of the id: nothing reads it
            self._upserts[(with_graph, with_index)] = stmt
        return stmt

    def _update_statement(
        self, with_graph: bool, with_index: bool = False, audited: bool = True
    ) -> Executable:
        """The flush of a row this operation holds locked: a plain UPDATE by ``row_key`` —
        of the index columns only when ``audited`` is false."""
        shape = (with_graph, with_index, audited)
        stmt = self._updates.get(shape)
        if stmt is None:
            base = _BASE_COLUMNS if audited else ()
            columns = (*base, *_extra_columns(with_graph, with_index))
            key = sa.bindparam(_ROW_KEY, type_=self.tables.repository.c.instant_id.type)
            values = {name: self._bind(name) for name in columns}
            stmt = self._updates[shape] = self._dialect.update_row(key, values)
        return stmt

    def _bind(self, name: str) -> sa.BindParameter[Any]:
        if name == "graph":  # bound as the JSON text _graph_doc encoded once per graph
            return sa.bindparam(name, type_=EncodedJSON())
        if name == "open_tasks":  # the column's own JSON type, on every dialect
            return sa.bindparam(name, type_=self.tables.repository.c.open_tasks.type)
        return sa.bindparam(name, type_=self.tables.repository.c[name].type)

    def _fetch(
        self,
        conn: Connection,
        stmt: Executable,
        instance_id: str,
        params: Mapping[str, Any] | None = None,
    ) -> RowMapping | None:
        result = conn.execute(stmt, params)
        try:
            row = result.first()
        # Bad JSON, nesting too deep to parse; on SQLite, a JSON number kept as a number
        # (the column's JSON type then decodes an int), or a time column holding other text.
        except (ValueError, TypeError, RecursionError) as exc:
            raise self._unreadable_row(conn, instance_id, exc) from exc
        return None if row is None else row._mapping

    def _unreadable_row(
        self, conn: Connection, instance_id: str, exc: BaseException
    ) -> SnapshotError:
        """The error for a row whose fetch failed decoding it: the time column that holds no
        time, when one does (named by :func:`~flow_sqla._reads.fetch_rows`, which reads the
        columns again as text), else :func:`_not_json`. Only SQLite keeps other text in a
        time column; the other servers never need the extra statement (on PostgreSQL one
        that failed would abort the caller's transaction)."""
        if conn.dialect.name != "sqlite":
            return _not_json(instance_id, exc)
        table = self.tables.repository
        times = [column for column in table.c if isinstance(column.type, sa.DateTime)]
        stmt = sa.select(table.c.instant_id, *times).where(table.c.instant_id == instance_id)
        try:
            fetch_rows(conn, stmt, table.fullname, TIMES_BY_HAND)
        except SnapshotError as found:
            return found
        except Exception:  # the row's own error is the one to report
            pass
        return _not_json(instance_id, exc)

    def _fetch_locked(
        self, conn: Connection, stmt: Executable, instance_id: str, params: Mapping[str, Any]
    ) -> StoredRow | None:
        """The locking read's row through the prepared path, its JSON columns decoded here."""
        try:
            row = self._execute(conn, stmt, params).first()
        except (ValueError, RecursionError) as exc:  # a driver decoding JSON (psycopg)
            raise _not_json(instance_id, exc) from exc
        if row is None:
            return None
        if self._dialect.reads_back_id and row[-1] != instance_id:
            raise IdCollationError(instance_id, str(row[-1]), self.tables.repository.fullname)
        states, variables, graph = row[:3]
        blank = holds_nothing(states, variables is None, graph)
        if self._dialect.json_as_text:
            states = _json_value(instance_id, states)
            variables = _json_value(instance_id, variables)
        parsed = parse_states(instance_id, states)
        aggregate = self._aggregate(instance_id, row) if self.keeps_task_index else None
        unknown_graph = self.keeps_task_index and aggregate is None and not parsed
        return (_BlankRow if blank else StoredRow)(
            states=parsed,
            vars=parse_vars(instance_id, variables),
            has_graph=bool(graph),
            aggregate=aggregate,
            graph_id=self._stored_graph_id(conn, instance_id, graph) if unknown_graph else None,
        )

    def _stored_graph_id(self, conn: Connection, instance_id: str, graph: Any) -> str | None:
        """The id of the graph stored with a row the locking read found, for the rare row
        whose graph nothing else tells (not indexed, no states). ``graph`` is what that read
        returned: the graph itself on SQLite, elsewhere a flag that one is stored — the
        document is not fetched on every read — and then the row is read again."""
        if not graph:
            return None
        if not self._dialect.row_locks:
            return _graph_text(graph)[1]
        row = self._fetch(conn, self._dialect.plain_read(instance_id), instance_id)
        return None if row is None else _graph_text(row["graph"])[1]

    def _aggregate(self, instance_id: str, row: Any) -> InstanceIndex | None:
        """The task index's columns of a locking read's row (raw driver values)."""
        graph_id, status, finish_time, open_tasks = row[3:7]
        if self._dialect.json_as_text:
            open_tasks = _json_value(instance_id, open_tasks)
        if isinstance(finish_time, str):  # SQLite hands DATETIME back as its text
            try:
                finish_time = datetime.fromisoformat(finish_time)
            except ValueError as exc:
                raise malformed_index(instance_id, exc) from exc
        values = {
            "graph_id": graph_id,
            "status": status,
            "finish_time": finish_time,
            "open_tasks": open_tasks,
        }
        return parse_index(instance_id, values)

    def _execute(
        self,
        conn: Connection,
        stmt: Executable,
        params: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
    ) -> Any:
        """Run one of the repository's fixed statements, compiled once per dialect."""
        assert isinstance(stmt, ClauseElement)
        return self._prepared.execute(conn, stmt, params, options)

    def _flush(self, ctx: FlowContext, op: _Operation) -> None:
        """Write the operation's changes with one statement — or nothing when nothing changed.

        The row is held locked, so it exists: a plain UPDATE (the upsert only when the
        caller's own code deleted it in this transaction). An operation served from the
        process cache locks and re-reads the row first and writes only if it is unchanged.
        In the caller's transaction a claim's write is deferred (:meth:`_defer`), and the
        next operation on the row sends it inside its own.
        """
        base = op.base
        base_vars, new_vars = self._vars_change(ctx, op)
        new_index = op.new_index
        with_index = new_index is not None and not _same_index(new_index, base.aggregate)
        changed = op.states != base.states or new_vars != base_vars or op.force_graph or with_index
        if not changed or self._creates_stateless_row(op, with_index):
            op.final = base
            # A row no write filled goes again; with the index, any empty row found there
            # too (it would be an instance with no status).
            blank = isinstance(base, _BlankRow)
            if _empty(base) and op.locked and (blank or self.keeps_task_index):
                self._drop_empty_row(op)
            return
        if not op.locked:
            # Started from the process cache: write only if the row is still the one cached.
            self._revalidate(ctx, op)
        # With the index, a RESTART may start the instance over as another graph's: the
        # row's graph document follows, since a reindex reads the graph from it.
        write_graph = op.graph is not None and (
            op.force_graph or not base.has_graph or (op.cleared and self.keeps_task_index)
        )
        states = dict(op.states)
        row: dict[str, Any] = {
            "states": states,
            "vars": new_vars,
            "updater": self._who(ctx),
            "update_time": utc_now(),
        }
        # A reindex that changed no state: the UPDATE leaves states, vars, updater and update
        # time as the instance's last step left them.
        audited = not (op.bookkeeping and op.states == base.states)
        if write_graph and op.graph is not None:
            row["graph"] = self._graph_doc(op.graph)
        if with_index and new_index is not None:
            row["graph_id"] = new_index.graph_id
            row["status"] = int(new_index.status)
            row["finish_time"] = new_index.finished_at
            row["open_tasks"] = [task_doc(t) for t in new_index.tasks]
        write = _RowWrite(
            instance_id=op.instance_id,
            values=row,
            audited=audited,
            stored=base.aggregate,
            aggregate=new_index if with_index else None,
        )
        self._send(op, write)
        op.final = StoredRow(
            states=states,
            vars=new_vars if audited else base.vars,
            has_graph=base.has_graph or write_graph,
            aggregate=new_index if with_index else base.aggregate,
            graph_id=op.graph.id if write_graph and op.graph is not None else base.graph_id,
        )

    def _send(self, op: _Operation, write: _RowWrite) -> None:
        """Send ``write`` — with the deferred claim it follows folded in — or, for a claim in
        the caller's transaction outside any savepoint, leave it to :meth:`_defer`."""
        pending = op.pending
        if pending is not None and pending.sent:
            # Sent while this operation ran (its task code began a savepoint, or ran another
            # statement of the library's on the connection): folded again, its todo rows
            # would be computed from the index before the claim, and the claim's stay.
            op.pending = pending = None
        if pending is not None:
            if write.audited:
                write = pending.write.then(write)
            else:  # a reindex's bookkeeping after a claim: the claim's write first, alone
                HELD.settle(op.conn)
                op.pending = pending = None
        if op.joined and op.only_marks_waiting() and _plain_transaction(op.conn):
            op.deferred = write
            return
        if pending is None:
            self._write(op.conn, write, held=op.held)
            return
        conn = op.conn
        # Done once the row's statement carrying it went out, before any todo statement: a
        # todo write that fails then must not leave the claim to be sent again at the COMMIT.
        self._write(conn, write, row_sent=lambda: HELD.done(conn, pending), held=op.held)

    def _write(
        self,
        conn: Connection,
        write: _RowWrite,
        *,
        row_sent: Callable[[], None] | None = None,
        held: HeldBack | None = None,
    ) -> None:
        """The row's UPDATE and its todo rows' changes — one statement where the dialect
        merges them (:meth:`_merged_update`), else one round trip where the connection sends
        statements together (:meth:`_sent_together`) — after the statements ``held`` back
        for it. A row the caller's own SQL deleted in this transaction is recreated (the
        operation decided on it under its lock). ``row_sent`` is called once the row's own
        statement has gone out."""
        todo = None
        if write.aggregate is not None:
            todo = self._todo.changes(write.instance_id, write.stored, write.aggregate)
        before = [] if held is None else held.take()
        if todo and self._merged_update(conn, write, todo, before, row_sent):
            return
        if (todo or before) and self._sent_together(conn, write, todo, before, row_sent):
            return
        send_now(conn, before)
        if not self._update(conn, write):
            self._upsert(conn, write)
        if row_sent is not None:
            row_sent()
        if todo:
            self._todo.write(conn, todo)

    def _revalidate(self, ctx: FlowContext, op: _Operation) -> None:
        """Lock the row of an operation served from the process cache before its write, and
        raise :class:`StaleCacheError` (nothing written) if another process changed the row
        since it was cached: a write decided on an old row must never replace a newer one
        (e.g. bring a task completed elsewhere back to WAITING)."""
        fresh = self._locking_read(ctx, op.conn)
        op.locked = True
        # ``graph_id`` is read from the graph column on some rows only: not a change.
        if fresh is None or fresh._replace(graph_id=None) != op.base._replace(graph_id=None):
            raise StaleCacheError(op.instance_id)

    def _vars_change(
        self, ctx: FlowContext, op: _Operation
    ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """``(stored vars as compared, vars to store)`` for the operation's context.

        The context's variables are stored with a state change, by a submit that acted
        (:meth:`keep_variables`) or by :meth:`save_snapshot`: an operation that decides
        nothing — a find, a claim of a task already waiting, a submit or send-back that
        returns False, anything on an unknown id that finds no task — writes nothing,
        whatever its context holds."""
        base_vars, excluded = op.base.vars, self._vars.excluded
        if not excluded.isdisjoint(base_vars):
            # Rows written by the Go plugin may carry identity keys (actor, instanceId...):
            # never written back, so the row loses them with its next change.
            base_vars = {k: v for k, v in base_vars.items() if k not in excluded}
        if op.replace_vars:
            return base_vars, self._vars.encode(op.instance_id, ctx.data)
        if op.states == op.base.states and not op.keep_vars:
            return base_vars, base_vars
        return base_vars, {**base_vars, **self._vars.encode(op.instance_id, ctx.data)}

    def _creates_stateless_row(self, op: _Operation, with_index: bool) -> bool:
        """Whether, with the index on, the write would create an instance for its variables
        alone: no state before or after (a BACK or RESTART submitted on an unknown id). Such
        a row would have no status — in no inbox, ``status()`` None — yet a withdraw would
        take it for a running instance; the in-memory repository keeps nothing either. The
        submit's history record is still written. ``save_snapshot`` still stores what it is
        given."""
        return (
            self.keeps_task_index
            and not op.states
            and _empty(op.base)
            and not (with_index or op.force_graph or op.replace_vars)
        )

    def _drop_empty_row(self, op: _Operation) -> None:
        """An operation that stored nothing leaves no row behind (the locking read created
        it, e.g. a find on an unknown id): delete it, by its unique key."""
        table = self.tables.repository
        op.conn.execute(sa.delete(table).where(table.c.instant_id == op.instance_id))
        op.final = None
        self._known.pop(op.instance_id)

    def _merged_update(
        self,
        conn: Connection,
        write: _RowWrite,
        todo: TodoChanges,
        before: list[Statement],
        row_sent: Callable[[], None] | None,
    ) -> bool:
        """The row's UPDATE and the todo changes as one statement, where the dialect can
        (:meth:`TodoTable.merged`), sent with the statements ``before`` it (which it then
        empties); false when it cannot, or when MySQL's multi-table UPDATE did not find every
        row — it then changed nothing or only rows that the separate statements, which the
        caller runs next, set to the same values again."""
        how = self._dialect.index_merge
        if how is None:
            return False
        update = self._update_statement(write.with_graph, True, write.audited)
        assert isinstance(update, sa.Update)
        stmt = self._todo.merged(update, todo, how)
        if stmt is None:
            return False
        params = {
            **_updated(write.values, write.audited),
            _ROW_KEY: write.instance_id,
            **todo.params(),
        }
        if before and together_open(conn):
            merged = self._prepared.get(conn, stmt)
            matched = execute_together(conn, [*before, (merged, params)], counted=len(before))
            before.clear()
        else:
            send_now(conn, before)
            before.clear()
            matched = self._execute(conn, stmt, params).rowcount
        if how == "join_update":
            if matched != todo.joined_rowcount():
                return False
        elif not matched:  # the todo CTEs ran; the row itself is gone (the caller's own SQL)
            self._upsert(conn, write)
        if row_sent is not None:
            row_sent()
        return True

    def _sent_together(
        self,
        conn: Connection,
        write: _RowWrite,
        todo: TodoChanges | None,
        before: list[Statement],
        row_sent: Callable[[], None] | None,
    ) -> bool:
        """The statements ``before`` it, the row's UPDATE and the todo statements in one
        round trip, where the connection sends several statements at once (MySQL/MariaDB,
        where no statement deletes or inserts in one table while updating another); false
        when it does not. Each is still its own statement. A todo change of more rows than
        one statement carries follows on its own. A row the caller's own SQL deleted is
        recreated, and the todo statements run again after it (the DELETE and UPDATE by key
        join the row)."""
        if not together_open(conn):
            return False
        after = [] if not todo else self._todo.statements(conn, todo)
        stmt, params = self._row_update(write)
        assert isinstance(stmt, ClauseElement)
        statements = [*before, (self._prepared.get(conn, stmt), params), *(after or ())]

        def counted(matched: int) -> None:
            if matched and row_sent is not None:
                row_sent()

        matched = execute_together(conn, statements, counted=len(before), on_counted=counted)
        before.clear()
        if not matched:
            self._upsert(conn, write)
            if row_sent is not None:
                row_sent()
        if todo and (after is None or not matched):
            self._todo.write(conn, todo)
        return True

    def _upsert(self, conn: Connection, write: _RowWrite) -> None:
        """Recreate the row (the caller's own SQL deleted it in this transaction)."""
        row = dict(write.values)
        row["instant_id"] = write.instance_id
        row["creator"] = row["updater"]
        row["create_time"] = row["update_time"]
        stmt = self._upsert_statement(write.with_graph, write.with_index)
        self._execute(conn, stmt, row)

    def _update(self, conn: Connection, write: _RowWrite) -> bool:
        """UPDATE the locked row; false when no row matched (deleted inside this very
        transaction by the caller's own code), so the upsert recreates it."""
        stmt, params = self._row_update(write)
        return bool(self._execute(conn, stmt, params).rowcount)

    def _row_update(self, write: _RowWrite) -> tuple[Executable, dict[str, Any]]:
        """The locked row's UPDATE for ``write`` and its parameters."""
        params = {**_updated(write.values, write.audited), _ROW_KEY: write.instance_id}
        return self._update_statement(write.with_graph, write.with_index, write.audited), params

    def _graph_doc(self, graph: Graph) -> str:
        """``graph.to_dict()`` as JSON text, encoded once per graph object (graphs are
        immutable): every new instance stores it, and encoding it costs more than the rest
        of the operation's JSON together."""
        cached = self._graph_docs.get(graph)
        if cached is not None:
            return cached
        try:
            doc = json_dumps(graph.to_dict())
        except (TypeError, ValueError) as exc:
            # YAML's own types (!!timestamp, !!binary, !!set) kept in a node's meta.
            problem = f"its meta holds a value JSON has no form for ({exc})"
            raise UnstorableGraphError(graph.id, [problem]) from exc
        # Only a document that might be too long is encoded to count its bytes.
        if len(doc) * 4 > MAX_GRAPH_DOC_BYTES and (size := len(doc.encode())) > MAX_GRAPH_DOC_BYTES:
            problem = (
                f"its document is {size} bytes of JSON, more than "
                f"flow_sqla.repository.MAX_GRAPH_DOC_BYTES ({MAX_GRAPH_DOC_BYTES})"
            )
            raise UnstorableGraphError(graph.id, [problem])
        if len(doc) <= GRAPH_DOC_KEPT_BYTES:
            self._graph_docs.put(graph, doc)
        return doc

    def _who(self, ctx: FlowContext) -> str:
        """The auditor, ``''`` when it names nobody: the Go plugin writes ``auditor(ctx)``,
        a Go string, so its readers may scan these columns into non-nullable strings."""
        who = self._auditor(ctx)
        if who is None:
            return ""
        # What the default auditor takes (a number as its digits, a UUID as its text);
        # anything else would be some object's repr (b"bob" stored as "b'bob'").
        try:
            text = identity_text(who, "auditor", ctx.instance_id)
        except InvalidArgumentTypeError as exc:
            raise UnstorableValueError(
                "auditor",
                f"the auditor hook returned {type(who).__name__}, not a string or None",
                instance_id=ctx.instance_id,
            ) from exc
        return check_id(text, "auditor", instance_id=ctx.instance_id)

    def _stored_graph(self, raw: Any) -> tuple[str | None, str | None]:
        """``(graph_json, graph_id)`` of a stored ``graph`` value (see :class:`Snapshot`)."""
        text, graph_id = _graph_text(raw)
        if text is None and graph_id is not None and self.flow_engine is not None:
            graph = self.flow_engine.get_graph(graph_id)
            if graph is not None:
                text = self._graph_doc(graph)
        return text, graph_id

    def _translating(self, instance_id: str | None) -> AbstractContextManager[None]:
        return translating(self._dialect, instance_id)

    # -- StateRepository ---------------------------------------------------------------
    def vars_get(self, ctx: FlowContext, node: Node) -> Mapping[str, Any] | None:
        """The stored variables the context does not hold yet (context values win over
        stored ones), decoded. Raises :class:`SnapshotError` for undecodable vars."""
        op = self._local.ops.get(ctx.instance_id)
        stored: dict[str, Any] | None
        if op is None:
            stored = self._vars.decode(ctx.instance_id, self._read_row(ctx).vars)
        else:
            if op.graph is None:
                self._note_graph(ctx, op, node)
            stored = op.stored_vars
            if stored is None:
                stored = op.stored_vars = self._vars.decode(op.instance_id, op.base.vars)
        if not stored:
            return None
        data = ctx.data
        if data.keys() >= stored.keys():  # the usual case after the first node of a walk
            return None
        return {key: value for key, value in stored.items() if key not in data}

    def state_get(self, ctx: FlowContext, node: Node) -> TaskState:
        op = self._local.ops.get(ctx.instance_id)
        if op is None:
            code = self._read_row(ctx).states.get(state_key(node))
        else:
            if op.graph is None:
                self._note_graph(ctx, op, node)
            code = op.states.get(state_key(node))
        return TaskState.UNKNOWN if code is None else _STATES.get(code, TaskState.UNKNOWN)

    def state_put(self, ctx: FlowContext, node: Node, state: TaskState) -> None:
        op = self._local.ops.get(ctx.instance_id)
        if op is None:
            with self.unit_of_work(ctx, lock=True):
                self.state_put(ctx, node, state)
            return
        self._note_graph(ctx, op, node)
        self._vars.check(op.instance_id, ctx.data)
        op.states[state_key(node)] = int(state)

    def state_remove(self, ctx: FlowContext, node: Node) -> None:
        op = self._local.ops.get(ctx.instance_id)
        if op is None:
            with self.unit_of_work(ctx, lock=True):
                self.state_remove(ctx, node)
            return
        self._note_graph(ctx, op, node)
        self._vars.check(op.instance_id, ctx.data)
        op.states.pop(state_key(node), None)

    def state_clear(self, ctx: FlowContext) -> None:
        op = self._local.ops.get(ctx.instance_id)
        if op is None:
            with self.unit_of_work(ctx, lock=True):
                self.state_clear(ctx)
            return
        self._vars.check(op.instance_id, ctx.data)
        op.states.clear()
        op.cleared = True
        self._note_graph(ctx, op, None)  # the submit's graph, for the graph document (_flush)

    def _note_graph(self, ctx: FlowContext, op: _Operation, node: Node | None) -> None:
        """Remember the operation's graph; the first time a graph is used, check that the
        history table can hold its ids (:class:`UnstorableGraphError` before any write)."""
        if op.graph is None:
            op.note_graph(ctx, node)
            if op.graph is not None:
                self._graphs.check(op.graph)
        if node is not None and node.graph is not op.graph:  # a node of a called sub-graph
            self._graphs.check(node.graph)

    # -- the task index (SupportsTaskIndex; used when ``index=True``) -------------------
    def index_read(self, ctx: FlowContext) -> IndexRead:
        """The states and stored aggregate as this operation's locking read found them."""
        op = self._op(ctx)
        stored = op.new_index if op.new_index is not None else op.base.aggregate
        return IndexRead(
            states=dict(op.states),
            stored=stored,
            stored_before=not _empty(op.base),
            stored_graph_id=op.base.graph_id,
        )

    def index_check_graph(
        self, graph: Graph, controller: object, instance_id: str | None = None
    ) -> None:
        """Refuse ``graph`` when the todo table cannot hold its tasks: its ids
        (:class:`UnstorableGraphError`) or a candidate ``controller`` names for a node
        (:class:`UnstorableValueError`, naming the node, the graph and the instance it was
        about to run for). The executor asks before a claim, submit or reindex, for the graph
        named and each sub-graph it calls (whose tasks are open tasks too)."""
        self._graphs.check(graph)
        self._candidates.check(graph, controller, instance_id)

    def index_changes(self, ctx: FlowContext) -> tuple[Mapping[str, int], bool]:
        op = self._op(ctx)
        base_vars, new_vars = self._vars_change(ctx, op)
        return dict(op.states), new_vars != base_vars

    def stored_variables(self, ctx: FlowContext) -> dict[str, Any]:
        """The variables of the row this operation holds locked, decoded — what its states
        were decided with (a plain read could return an older snapshot of the row)."""
        return self._vars.decode(ctx.instance_id, self._op(ctx).base.vars)

    def keep_variables(self, ctx: FlowContext) -> None:
        """Store the context's variables with this operation even if it changes no state
        (the executor calls it for a submit that acted; reads and refusals store none)."""
        op = self._local.ops.get(ctx.instance_id)
        if op is not None:
            op.keep_vars = True

    def index_write(
        self, ctx: FlowContext, index: InstanceIndex, *, bookkeeping: bool = False
    ) -> None:
        """Buffer ``index``; the operation's flush writes it with the states — and, for
        ``bookkeeping`` (a reindex) with no state changed, writes nothing else. A candidate
        no row can hold raises :class:`UnstorableValueError` here, before the executor
        records the submit: nothing is written, in a caller's transaction too."""
        op = self._op(ctx)
        check_candidates(op.instance_id, op.base.aggregate, index)
        op.new_index = index
        op.bookkeeping = bookkeeping

    def index_inbox(
        self,
        identities: Sequence[str],
        *,
        graph_id: str | None,
        limit: int,
        after: int | None,
        connection: object = None,
    ) -> list[OpenTask]:
        for identity in identities:
            check_readable(identity, "identity")
        _check_filters(graph_id=graph_id)
        with self._query(connection=connection) as conn:
            return self._todo.inbox(conn, identities, graph_id, limit, after)

    def index_open_tasks(self, instance_id: str, *, connection: object = None) -> list[OpenTask]:
        check_readable_instance_id(instance_id)
        with self._query(instance_id, connection=connection) as conn:
            return self._todo.open_tasks(conn, instance_id)

    def index_status(self, instance_id: str, *, connection: object = None) -> InstanceStatus | None:
        check_readable_instance_id(instance_id)
        with self._query(instance_id, connection=connection) as conn:
            code = conn.execute(self._todo.status_statement(instance_id)).scalar()
        return None if code is None else stored_status(instance_id, code)

    def index_instances(
        self,
        *,
        status: InstanceStatus | None,
        graph_id: str | None,
        creator: str | None,
        limit: int,
        after: int | None,
        connection: object = None,
    ) -> list[InstanceSummary]:
        _check_filters(graph_id=graph_id, creator=creator)
        with self._query(connection=connection) as conn:
            return self._todo.instances(conn, status, graph_id, creator, limit, after)

    def _op(self, ctx: FlowContext) -> _Operation:
        op = self._local.ops.get(ctx.instance_id)
        if op is None or not self.keeps_task_index:
            raise RepositoryError(
                "The task index is read and written inside an executor operation of a "
                "repository built with index=True",
                instance_id=ctx.instance_id,
            )
        return op

    @contextmanager
    def _query(
        self, instance_id: str | None = None, *, connection: object = None
    ) -> Iterator[Connection]:
        """A connection for a query: the caller's ``Connection`` when given (it then sees
        the caller's uncommitted work; anything else is refused, see
        :func:`~flow_sqla._reads.callers_connection`), else one of the repository's engine."""
        if not self.keeps_task_index:
            raise RepositoryError(
                f"{self!r} keeps no task index: build it with index=True "
                "(sql_workflow(..., index=True)) after migrating to revision flow0004"
            )
        caller = callers_connection(connection, self.engine, instance_id)
        with self._translating(instance_id):
            if caller is not None:
                HELD.settle(caller)  # a claim's deferred write is part of what it sees
                yield caller
                return
            with self.engine.connect() as conn:
                yield conn

    # -- snapshots and inspection ------------------------------------------------------
    def save_snapshot(self, ctx: FlowContext, graph: Graph) -> None:
        """Write ``graph``, the current states and the context's storable variables (which
        replace the stored ones whole). Raises like :meth:`unit_of_work`, and
        :class:`UnstorableGraphError` for a graph whose ids do not fit the history table;
        :class:`InvalidArgumentTypeError` for a ``ctx`` that is not a ``FlowContext`` or a
        ``graph`` that is not a ``Graph`` (a graph id included: load it from the engine),
        before anything is read — they failed with a bare ``AttributeError``."""
        check_context(ctx)
        if not isinstance(graph, Graph):
            raise InvalidArgumentTypeError(
                "graph",
                graph,
                "a Graph (engine.get_graph_or_throw(id))",
                instance_id=ctx.instance_id,
            )
        self._graphs.check(graph)
        with self.unit_of_work(ctx, lock=True):
            op = self._local.ops[ctx.instance_id]
            op.graph = graph
            op.force_graph = True
            op.replace_vars = True
            indexer = self._snapshot_indexer()
            if indexer is not None:
                indexer.index_snapshot(graph, ctx)

    def index_snapshots_with(self, executor: SnapshotIndexer) -> None:
        """Let :meth:`save_snapshot` keep the task index: the variables it replaces route the
        instance's open tasks, which only an executor's walk (graph, state controller) can
        compute. Every ``WorkflowExecutor`` built with this repository calls it (the last
        one built wins; it is held as long as the repository). One given the repository
        later, by assignment, does not: ``save_snapshot`` then leaves the index as it was,
        and ``workflow.reindex(graph, ctx)`` after it brings it up to date."""
        self._indexer = executor

    def _snapshot_indexer(self) -> SnapshotIndexer | None:
        indexer = self._indexer if self.keeps_task_index else None
        # An executor that has since been given another repository indexes that one's rows.
        if indexer is None or getattr(indexer, "state_repository", None) is not self:
            return None
        return indexer

    def load_snapshot(self, instance_id: str) -> Snapshot | None:
        """Everything stored for ``instance_id``, or ``None`` when it has no row. Raises
        :class:`SnapshotError` for a malformed row, :class:`RepositoryError` on database errors."""
        row = self._plain_row(instance_id, None)
        if row is None:
            return None
        states = parse_states(instance_id, row["states"])
        graph_json, graph_id = self._stored_graph(row["graph"])
        return Snapshot(
            instance_id=instance_id,
            graph_json=graph_json,
            graph_id=graph_id,
            states={key: TaskState.of(code) for key, code in states.items()},
            vars=self._vars.decode(instance_id, row["vars"]),
            creator=row["creator"],
            create_time=row["create_time"],
            updater=row["updater"],
            update_time=row["update_time"],
        )

    def restore_context(self, instance_id: str, *, connection: Any = None) -> FlowContext:
        """A new context for ``instance_id`` holding its stored variables (trace empty), to
        resume the instance in another process. Raises :class:`SnapshotError` when the
        instance has no row or the row is malformed; :class:`InvalidArgumentError` for a
        ``connection`` that is neither ``None`` nor a SQLAlchemy ``Connection`` (an ``Engine``
        or a ``Session`` was read around, outside your transaction, and then attached to the
        context, where operations ignore it)."""
        connection = callers_connection(connection, self.engine, instance_id)
        row = self._plain_row(instance_id, connection)
        if row is None:
            raise SnapshotError("No stored instance to restore", instance_id=instance_id)
        parse_states(instance_id, row["states"])
        variables = self._vars.decode(instance_id, row["vars"])
        return FlowContext.of(instance_id, variables, connection=connection)

    def states(self, instance_id: str) -> dict[str, TaskState]:
        """The stored states of one instance (read from the database; empty when none)."""
        row = self._plain_row(instance_id, None)
        if row is None:
            return {}
        codes = parse_states(instance_id, row["states"])
        return {key: TaskState.of(code) for key, code in codes.items()}

    def evict(self, instance_id: str, *, connection: Any = None) -> None:
        """Forget what this process remembers about ``instance_id`` (cached row, row known to
        exist, rows held in callers' transactions), e.g. before or after the row is changed
        or deleted behind the library's back. A claim of that instance whose write is still
        deferred in a caller's transaction (persistence.md §3) by this thread — by this
        repository, or by another one whose table is in the same schema — is dropped
        unsent; pass that transaction's ``connection`` to send it first instead. (Claims
        other threads deferred stay: without the connection, another transaction's, which
        holds the row lock, cannot be told from one of yours run on a pool thread — an async
        app passes ``connection``.)

        Raises :class:`InvalidInstanceIdError` for an ``instance_id`` that is not a string and
        :class:`InvalidArgumentError` for a ``connection`` that is neither ``None`` nor a
        SQLAlchemy ``Connection`` (an ``Engine`` or a ``Session`` would drop the deferred
        claim unsent, as if none had been given)."""
        if not isinstance(instance_id, str):
            raise InvalidInstanceIdError(instance_id)
        connection = callers_connection(connection, self.engine, instance_id)
        thread: int | None = threading.get_ident()
        if isinstance(connection, Connection):
            with self._translating(instance_id):
                HELD.settle(connection)
            thread = None
        self._known.pop(instance_id)
        if self._cache is not None:
            self._cache.pop(instance_id)
        HELD.drop(
            self._held_key(instance_id),
            owner=self,
            resolved_schema=self._schema_without_connection(),
            pending_of_thread=thread,
        )

    def _schema_without_connection(self) -> str | None:
        """The schema this repository's table is in, as its engine's ``schema_translate_map``
        and the server's default schema name it (``None`` when unknown: no connection yet)."""
        schema = self.tables.repository.schema
        translate = self.engine.get_execution_options().get("schema_translate_map")
        if translate:
            schema = translate.get(schema, schema)
        return schema if schema is not None else self.engine.dialect.default_schema_name

    # -- one-off reads -----------------------------------------------------------------
    def _read_row(self, ctx: FlowContext) -> StoredRow:
        if self._cache is not None:
            cached = self._cache.get(ctx.instance_id)
            if cached is not None:
                return cached
        row = self._plain_row(ctx.instance_id, ctx.connection)
        if row is None:
            return StoredRow(states={}, vars={}, has_graph=False)
        return parse_row(ctx.instance_id, row)

    def _plain_row(self, instance_id: str, connection: Any) -> RowMapping | None:
        check_readable_instance_id(instance_id)
        stmt = self._dialect.plain_read(instance_id)
        with self._translating(instance_id):
            if isinstance(connection, Connection):
                check_same_kind(connection, self.engine, instance_id)
                HELD.settle(connection)  # a claim's deferred write is part of what it reads
                return self._fetch(connection, stmt, instance_id)
            with self.engine.connect() as conn:
                return self._fetch(conn, stmt, instance_id)

    def __repr__(self) -> str:
        return (
            f"SqlStateRepository({self.engine.url.render_as_string()!r}, "
            f"table={self.tables.repository.name!r}, cache={self.cache_mode!r})"
        )


def _check_filters(**filters: str | None) -> None:
    """Query filters must be storable text (no lone surrogate, no NUL): the same
    :class:`UnstorableValueError` on every dialect, where drivers would differ."""
    for name, value in filters.items():
        if value is not None:
            check_readable(value, name)


def _json_value(instance_id: str, raw: Any) -> Any:
    """A JSON column's text decoded (``None`` stays ``None``); :class:`SnapshotError` when it
    is not JSON.

    SQLite keeps the text of a JSON number written into a column declared ``JSON`` as a
    number (the column's numeric affinity), and hands that number back: it is the JSON value
    it was written as (a row of the wrong shape, which the caller reports)."""
    if raw is None:
        return None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return raw
    if not isinstance(raw, str | bytes | bytearray):
        raise SnapshotError(
            f"The stored row holds a {type(raw).__name__} where JSON text was expected",
            instance_id=instance_id,
        )
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON, nesting too deep to parse
        raise _not_json(instance_id, exc) from exc


def _not_json(instance_id: str, exc: BaseException) -> SnapshotError:
    """The error for a stored column that does not decode (raise it ``from exc``)."""
    return SnapshotError(
        f"The stored row is not valid JSON: {type(exc).__name__}: {exc}", instance_id=instance_id
    )


def _graph_text(raw: Any) -> tuple[str | None, str | None]:
    """``(document as JSON text, graph id)`` of a stored ``graph`` value, read as its text.

    A JSON object is the graph document. A JSON string is either a document encoded twice
    (text that parses to an object) or the graph's id, quoted; any other text that is no JSON
    array or literal — ``1001``, ``leave`` — is the id stored bare, as the Go plugin may
    store it (the design allows "only the graph id"). For an id the text is ``None`` and the
    caller resolves the id. Neither for anything else (an array, ``null``, a broken document).
    """
    if raw is None:
        return None, None
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str):  # a driver that decoded the JSON anyway
        raw = json_dumps(raw)
    text = raw.strip()
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None, None
        if not isinstance(value, str):
            return None, None
        text = value.strip()
    if text.startswith("{"):
        doc = _object_or_none(text)
        return (text, _id_of(doc)) if doc is not None else (None, None)
    if not text or text.startswith("[") or text in ("null", "true", "false"):
        return None, None
    return None, text


def _object_or_none(text: str) -> dict[str, Any] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _id_of(doc: Mapping[str, Any]) -> str | None:
    graph_id = doc.get("id")
    return graph_id if isinstance(graph_id, str) and graph_id else None


def _plain_transaction(conn: Connection) -> bool:
    """Whether ``conn`` is in a plain transaction, outside any savepoint: where a claim's
    write may wait (a savepoint may be rolled back alone; a two-phase transaction ends through
    events the library does not follow)."""
    transaction = conn.get_transaction()
    return type(transaction) is RootTransaction and conn.get_nested_transaction() is None


def _updated(row: dict[str, Any], audited: bool) -> dict[str, Any]:
    """The values an UPDATE of ``row`` binds: without the audited columns when it leaves them."""
    if audited:
        return row
    return {name: value for name, value in row.items() if name not in _BASE_COLUMNS}


def _extra_columns(with_graph: bool, with_index: bool) -> tuple[str, ...]:
    return (*(("graph",) if with_graph else ()), *(INDEX_COLUMNS if with_index else ()))


def _same_index(new: InstanceIndex, old: InstanceIndex | None) -> bool:
    return new.same_as(old) and old is not None and new.finished_at == old.finished_at


class _BlankRow(StoredRow):
    """A row no write ever filled: inserted just now by a locking read (empty, locked until
    the transaction ends), or left behind by one (``states``, ``vars`` and ``graph`` all
    NULL). An operation that stores nothing removes it — without the index too, where a row
    another writer left empty (``{}`` states, as a restart writes) is kept as it is."""

    __slots__ = ()


def _from_database(exc: BaseException, driver_error: type[BaseException]) -> bool:
    """Whether ``exc`` reports a database error, or was raised because of one (a task that
    wraps a deadlock in its own exception): anywhere in its chain of causes and contexts, a
    translated error, a SQLAlchemy error or the driver's own. After one the transaction may
    be rolled back already (InnoDB after a deadlock) or aborted (PostgreSQL)."""
    database_errors = (RepositoryError, ConcurrentSubmitError, sa.exc.SQLAlchemyError, driver_error)
    seen: set[int] = set()
    chain: list[BaseException | None] = [exc]
    while chain:
        current = chain.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, database_errors):
            return True
        seen.add(id(current))
        chain += (current.__cause__, current.__context__)
    return False


def _empty(row: StoredRow) -> bool:
    return not row.states and not row.vars and not row.has_graph and row.aggregate is None


__all__ = ["Auditor", "CacheMode", "Snapshot", "SqlStateRepository"]
