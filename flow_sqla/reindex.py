"""Rebuilding the task index for rows written without it (the Go plugin, ``index=False``, or
before revision ``flow0004``), in batches: one transaction per batch, resumable.

A batch is a window of the instance table in ``id`` order, found by a primary-key range (the
next ``batch_size`` ids): each row is read once per pass however many rows are left, where
``WHERE status IS NULL ORDER BY id`` would make the server sort every remaining unindexed
row for every batch — quadratic on the millions of rows a Go-plugin database may hold.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from flow.context import FlowContext
from flow.errors import FlowError, GraphDefinitionError, GraphNotFoundError, SnapshotError
from flow.graph import Graph
from flow.workflow._root_graph import states_elsewhere
from flow.workflow.aggregate import MAX_CURSOR, InstanceStatus
from flow.workflow.errors import ConcurrentSubmitError, GraphMismatchError
from flow_sqla._dialect import DialectOps, as_text
from flow_sqla._engine import engine_for
from flow_sqla._options import callable_or_none, flag, whole_number
from flow_sqla._reads import read_time
from flow_sqla._rows import holds_nothing, parse_index, parse_states
from flow_sqla._todo import TodoTable
from flow_sqla.errors import InvalidArgumentError, RepositoryError
from flow_sqla.retry import run_in_transaction
from flow_sqla.tables import FlowTables
from flow_sqla.wiring import sql_workflow

if TYPE_CHECKING:
    from flow.engine import FlowEngine
    from flow.workflow.controllers import StateController
    from flow.workflow.executor import WorkflowExecutor

#: Instances per transaction.
BATCH_SIZE = 500
#: The most instances one transaction may take (its rows are all held in memory and locked).
MAX_BATCH_SIZE = 100_000
#: How many times a batch is run when the database rolls it back for a lock conflict.
BATCH_ATTEMPTS = 5


def reindex(
    bind: Engine | str,
    engine: FlowEngine,
    *,
    state_controller: StateController,
    tables: FlowTables | None = None,
    batch_size: int = BATCH_SIZE,
    everything: bool = False,
    progress: Callable[[int, int], None] | None = None,
    after: int = 0,
    checkpoint: Callable[[int], None] | None = None,
    on_bad_row: Callable[[str, FlowError], None] | None = None,
) -> int:
    """Compute status and open tasks of every instance whose row has none (NULL ``status``),
    ``batch_size`` rows per transaction, in ``id`` order; returns how many were indexed.

    Interrupted, it simply continues next time: indexed rows are no longer NULL. With
    ``everything=True`` every row is recomputed (after running with ``index=False`` or the Go
    plugin on the same tables), and an instance's todo rows that are not exactly those of its
    stored index (edited by hand) are rewritten; such a pass resumes with ``after`` = the last
    id passed to ``checkpoint``, which is called after each committed batch. ``progress(rows_seen,
    indexed)`` is called after each batch.

    Only the task index is written: ``updater``/``update_time`` keep the last real change,
    and a closed instance's ``finish_time`` and its open tasks' opening time are taken from
    that ``update_time`` (the row holds no better clock; lineages start empty).

    The graph of a row is the engine's graph with the stored graph's id (else the one in its
    state keys; of a sub-graph's keys, the loaded graph calling it), else the stored graph
    itself — unless the states are only another loaded graph's (the graph column keeps the
    first graph; the instance restarted as another): then that graph. (A graph column of only
    the id of a graph the engine lacks is ``GraphNotFoundError`` whatever the states: whether
    that graph calls theirs as a sub-graph cannot be told.) A row that cannot be
    indexed — no graph (``GraphNotFoundError``), a malformed row (``SnapshotError``), a stored
    graph that does not load (``GraphDefinitionError``), states of a graph the engine does not
    have only (``GraphMismatchError``), a walk that fails — raises its typed error
    naming the instance; its batch is rolled back and the batches before it stay indexed. With
    ``on_bad_row(instance_id, error)`` such a row is reported instead and left unindexed
    (each row is then indexed inside a savepoint, which a bad row rolls back), and the batch
    goes on; it is reported once its batch committed. Such a row's index is cleared when its
    own states, locked, contradict it (they do not read, or are only of graphs outside the
    indexed graph's call tree; a WITHDRAWN status is kept), and the error gets a note saying
    so: kept, it listed tasks in inboxes that the states no longer hold. A lock conflict
    (``ConcurrentSubmitError``) or a database error (``RepositoryError``) is never a bad row:
    it rolls the batch back — a lock conflict then runs the batch again, up to
    ``BATCH_ATTEMPTS`` times in all, before it is raised.

    Before any batch: :class:`~flow.errors.InvalidArgumentTypeError` (a ``TypeError``) naming
    an argument of the wrong type (``batch_size`` or ``after`` not an ``int``, ``everything``
    not a ``bool``, a hook that is not callable), :class:`InvalidArgumentError` (a
    ``ValueError``) for ``batch_size`` or ``after`` out of range.
    """
    if not 1 <= whole_number("batch_size", batch_size) <= MAX_BATCH_SIZE:
        raise InvalidArgumentError("batch_size", batch_size, f"must be from 1 to {MAX_BATCH_SIZE}")
    if not 0 <= whole_number("after", after) <= MAX_CURSOR:
        raise InvalidArgumentError("after", after, f"must be a row id (0 to {MAX_CURSOR})")
    # Checked before the first batch commits: a wrong hook would fail only after it.
    flag("everything", everything)
    for name, hook in (
        ("progress", progress),
        ("checkpoint", checkpoint),
        ("on_bad_row", on_bad_row),
    ):
        callable_or_none(name, hook)
    db = engine_for(bind)
    tables = tables or FlowTables()
    executor = sql_workflow(db, engine, state_controller=state_controller, tables=tables)
    ops = DialectOps(db.dialect, tables)
    batch = _Batch(executor, engine, tables, everything, on_bad_row is not None, ops)
    maintenance = _for_maintenance(db, ops)
    last, seen, indexed = after, 0, 0
    while True:
        # One transaction per batch, run again after a lock conflict: a deadlock with the
        # application's live transactions beside a reindex of millions of rows is to be
        # expected, and a batch is safe to repeat (it recomputes what it writes from the rows
        # as they are then). Its statements and its COMMIT fail as the library's errors.
        run = functools.partial(batch.run, last=last, size=batch_size)
        window, wanted, done, bad = run_in_transaction(maintenance, run, attempts=BATCH_ATTEMPTS)
        if on_bad_row is not None:
            for instance_id, error in bad:
                on_bad_row(instance_id, error)
        if not window:
            return indexed
        last = window[-1]
        seen += wanted
        indexed += done
        if checkpoint is not None:
            checkpoint(last)
        if progress is not None:
            progress(seen, indexed)


def _for_maintenance(db: Engine, ops: DialectOps) -> Engine:
    """``db`` at the isolation a batch reads the latest commits at without range locks
    (READ COMMITTED on MySQL/MariaDB; each connection is reset when it goes back to the
    pool)."""
    if ops.maintenance_isolation is None:
        return db
    return db.execution_options(isolation_level=ops.maintenance_isolation)


class _Batch:
    """One window of rows indexed inside the caller's transaction."""

    def __init__(
        self,
        executor: WorkflowExecutor,
        engine: FlowEngine,
        tables: FlowTables,
        all_rows: bool,
        report_bad_rows: bool,
        dialect: DialectOps,
    ) -> None:
        self.executor = executor
        self.engine = engine
        self.all_rows = all_rows
        self.report_bad_rows = report_bad_rows
        #: The bad rows of the window being indexed (reported once its batch committed).
        self.bad: list[tuple[str, FlowError]] = []
        self._dialect = dialect
        r = tables.repository
        self._ids = sa.select(r.c.id, r.c.status).order_by(r.c.id)
        # The JSON columns as text on every dialect (cast, so that psycopg does not decode
        # them while fetching): a row that does not decode — bad JSON, or JSON too big or too
        # deep for Python's decoder — is reported by its id below, not as a driver error (or a
        # raw ValueError/RecursionError) that hides which row of the batch it was.
        # The times as text too: one that no driver can read (PostgreSQL's 'infinity', text
        # on SQLite) must not fail the whole window's fetch.
        self._rows = sa.select(
            r.c.id,
            r.c.instant_id,
            r.c.status,
            r.c.graph_id,
            as_text(dialect.name, r.c.graph).label("graph"),
            as_text(dialect.name, r.c.states).label("states"),
            as_text(dialect.name, r.c.open_tasks).label("open_tasks"),
            dialect.time_text(r.c.finish_time).label("finish_time"),
            dialect.time_text(r.c.update_time).label("update_time"),
            r.c.vars.is_(None).label("no_vars"),
            # Whether todo rows exist for it (served by the todo table's unique key): an
            # unindexed row's are stale and must go before its rebuild inserts (see _index).
            sa.exists().where(tables.todo.c.instant_id == r.c.instant_id).label("has_todo"),
        ).order_by(r.c.id)
        # A stored index that does not read is derived data: cleared, then rebuilt.
        self._clear_index = (
            sa.update(r)
            .where(r.c.instant_id == sa.bindparam("instance_id"))
            .values(status=None, graph_id=None, finish_time=None, open_tasks=None)
        )
        todo = tables.todo
        self._clear_todo = sa.delete(todo).where(todo.c.instant_id == sa.bindparam("instance_id"))
        # The status under the row's lock: a live operation may have indexed the row (and
        # written its todo rows) since the window was read; those rows are not stale.
        self._status_locked = (
            sa.select(r.c.status)
            .where(r.c.instant_id == sa.bindparam("instance_id"))
            .with_for_update()
        )
        # The row's index and states under its lock, to judge a bad row's index by (see
        # _clear_contradicted_index).
        self._locked_index = (
            sa.select(r.c.status, r.c.graph_id, as_text(dialect.name, r.c.states).label("states"))
            .where(r.c.instant_id == sa.bindparam("instance_id"))
            .with_for_update()
        )
        self._r = r
        # The row as the executor just locked and wrote it (the batch runs at READ COMMITTED
        # on MySQL/MariaDB, whose REPEATABLE READ would read the batch's first snapshot).
        self._index_of = (
            sa.select(r.c.status, r.c.graph_id, r.c.finish_time, r.c.open_tasks)
            .where(r.c.instant_id == sa.bindparam("id"))
            .with_for_update()
        )
        self._todo = TodoTable(
            tables, keys_through_join=dialect.keys_through_join, sentinel=dialect.todo_sentinel
        )

    def run(
        self, conn: Connection, last: int, size: int
    ) -> tuple[list[int], int, int, list[tuple[str, FlowError]]]:
        """Index the rows of the next window after ``last``: the window's ids, how many of
        its rows were to be indexed, how many instances were, and the bad rows left out."""
        r = self._r
        self.bad = []
        window = conn.execute(self._ids.where(r.c.id > last).limit(size)).all()
        ids = [row.id for row in window]
        wanted = sum(1 for row in window if self._wanted(row))
        if not wanted:
            return ids, 0, 0, self.bad
        # The window's rows by primary-key range (no status predicate, which a planner might
        # serve from the status index instead); rows indexed meanwhile are skipped here.
        rows = conn.execute(self._rows.where(r.c.id > last, r.c.id <= ids[-1]))
        done = 0
        for row in rows.all():
            if self._wanted(row):
                done += self._index_or_report(conn, row)
        return ids, wanted, done, self.bad

    def _wanted(self, row: Any) -> bool:
        """Whether this pass indexes ``row``: every row, or those without a status."""
        return self.all_rows or row.status is None

    def _index_or_report(self, conn: Connection, row: Any) -> bool:
        """Index one row; with ``on_bad_row``, inside a savepoint, so that a row failing
        part-way (a value its write refuses after the row's UPDATE) leaves nothing behind."""
        if not self.report_bad_rows:
            try:
                return self._index(conn, row)
            except FlowError as exc:  # stops the pass: it must say at which row
                _name_instance(exc, row.instant_id)
                raise
        self._dialect.open_for_savepoints(conn)
        try:
            with conn.begin_nested():
                return self._index(conn, row)
        except (ConcurrentSubmitError, RepositoryError):
            raise  # the database's trouble, not the row's
        except FlowError as exc:
            if self._clear_contradicted_index(conn, row.instant_id):
                exc.add_note(_CLEARED)
            self.bad.append((row.instant_id, exc))
            return False

    def _index(self, conn: Connection, row: Any) -> bool:
        instance_id = row.instant_id
        if _never_started(row):
            return False
        graph = _graph_of(self.engine, instance_id, row.graph, row.states)
        params = {"instance_id": instance_id}
        if _index_unreadable(instance_id, row):
            # Its todo rows are unknown too: all of them go, the rebuild inserts the right ones.
            # (A WITHDRAWN status that no longer reads is not known to have been one.)
            conn.execute(self._clear_todo, params)
            conn.execute(self._clear_index, params)
        elif row.status is None and row.has_todo:
            self._clear_stale_todo(conn, params)
        # The executor evaluates the graph with the variables of the row it locks.
        ctx = FlowContext.of(instance_id, connection=conn)
        # A row another process (a second reindex, a live operation) indexed since the window
        # was read is not indexed again, nor counted.
        as_of, unindexed_only = read_time(row.update_time), not self.all_rows
        try:
            indexed = self.executor.reindex(graph, ctx, as_of=as_of, unindexed_only=unindexed_only)
        except GraphMismatchError as exc:
            # The graph column keeps the first graph (the Go plugin writes it once); the states
            # are another's only (the instance restarted as it): index it as that graph's.
            running = self.engine.get_graph(exc.stored_graph_id or "")
            if running is None or running is graph:
                raise
            indexed = self.executor.reindex(
                running, ctx, as_of=as_of, unindexed_only=unindexed_only
            )
        if indexed and self.all_rows:
            # The executor writes the todo rows that differ from the row's stored index; a
            # full pass also checks the rows themselves against it (hand edits, stray rows).
            stored = parse_index(
                instance_id, conn.execute(self._index_of, {"id": instance_id}).one()._mapping
            )
            if stored is not None:
                self._todo.repair(conn, instance_id, stored)
        return indexed

    def _clear_contradicted_index(self, conn: Connection, instance_id: str) -> bool:
        """After a bad row's savepoint rolled back: clear the row's index when its own states
        contradict it, judged on the row as locked now (a live operation may have written it
        since the window was read); whether it did.

        Reported and left as it was, such an index kept the row's old tasks in inboxes —
        tasks whose states a Go service or an ``index=False`` writer has since replaced —
        and let operations naming the indexed graph run on another graph's states. An index
        is contradicted when the states no longer read, or when they are only states of
        graphs outside the indexed graph's call tree (the engine holding that whole tree: a
        missing sub-graph's own calls are unknown). Left alone: a WITHDRAWN status (an
        application's decision the states do not hold), and an index the states may still
        agree with (the row failed for another reason: a condition, a graph not loaded).
        Only a full pass judges an index (a plain one finds a row indexed since it read the
        window indexed by a live operation, from these very states). The todo rows of a row
        with no index are stale whatever its states (see :meth:`_clear_stale_todo`); they go
        in either pass."""
        params = {"instance_id": instance_id}
        locked = conn.execute(self._locked_index, params).one_or_none()
        if locked is None:
            return False
        if locked.status is None:
            conn.execute(self._clear_todo, params)
            return False
        if not self.all_rows:
            return False
        if locked.status == InstanceStatus.WITHDRAWN or not _contradicts(
            self.engine, instance_id, locked
        ):
            return False
        conn.execute(self._clear_todo, params)
        conn.execute(self._clear_index, params)
        return True

    def _clear_stale_todo(self, conn: Connection, params: dict[str, Any]) -> None:
        """Delete the todo rows of an instance whose row has no index (its status cleared by
        hand, or by a writer that dropped the index): no index says which tasks they are, and
        the rebuild inserts every row of the instance's open tasks — one left behind with the
        same key failed its insert (a UNIQUE violation) on every pass, so the pass never got
        past the instance. Only while the row, locked, is still unindexed."""
        if conn.execute(self._status_locked, params).scalar() is None:
            conn.execute(self._clear_todo, params)


#: The note a bad row's error gets when the pass cleared the row's index (on_bad_row).
_CLEARED = (
    "its task index, which its states contradict, was cleared: no inbox lists its tasks "
    "until the row is corrected and indexed again"
)


def _name_instance(exc: FlowError, instance_id: str) -> None:
    """Make ``exc`` name the instance of the row it was raised for, keeping its type: a
    condition failing on the row's stored variables, or a stored graph whose ids the SQL
    storage refuses, is raised by code that does not know the instance — and a reindex over
    millions of rows that stops must say at which one."""
    if getattr(exc, "instance_id", None) is None:
        with contextlib.suppress(AttributeError):
            exc.instance_id = instance_id  # type: ignore[attr-defined]
    if repr(instance_id) in str(exc):
        return
    if len(exc.args) == 1 and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} (instance {instance_id!r})",)
    else:
        exc.add_note(f"instance {instance_id!r}")


def _contradicts(engine: FlowEngine, instance_id: str, locked: Any) -> bool:
    """Whether the locked row's states contradict its stored index: they do not read, or
    they are all of graphs outside the call tree of the indexed graph (which the engine
    has whole). Blank text reads as no JSON here, as the repository reads it (the pass
    itself takes it for no states)."""
    if isinstance(locked.states, str | bytes) and not locked.states.strip():
        return True
    try:
        states = parse_states(instance_id, _decoded(instance_id, "states", locked.states))
    except SnapshotError:
        return True
    indexed = engine.get_graph(locked.graph_id) if isinstance(locked.graph_id, str) else None
    return indexed is not None and states_elsewhere(engine, indexed, states)


def _never_started(row: Any) -> bool:
    """Whether ``row`` holds no instance: no graph, no states, no variables — what an
    operation on an unknown id that stored nothing left behind before such rows were removed
    (a find by someone who may not operate the first task, with ``index=False``). Nothing to
    index; a live operation that starts the instance indexes it."""
    return holds_nothing(row.states, row.no_vars, row.graph) and row.status is None


def _index_unreadable(instance_id: str, row: Any) -> bool:
    """Whether the row's stored task index (status, open tasks, finish time) does not read —
    a status no instance has, open tasks of the wrong shape, an unreadable time."""
    if row.status is None:
        return False
    if row.finish_time is not None and read_time(row.finish_time) is None:
        return True
    try:
        parse_index(
            instance_id,
            {
                "status": row.status,
                "graph_id": row.graph_id,
                "finish_time": None,
                "open_tasks": _decoded(instance_id, "open_tasks", row.open_tasks),
            },
        )
    except SnapshotError:
        return True
    return False


def _graph_of(engine: FlowEngine, instance_id: str, graph_value: Any, states_text: Any) -> Graph:
    doc = _graph_doc(instance_id, graph_value)
    states = _decoded(instance_id, "states", states_text)
    graph_id = doc.get("id") if isinstance(doc, dict) else None
    if graph_id is None and isinstance(states, dict) and states:
        graph_id = str(next(iter(states))).split(":", 1)[0]
    loaded = engine.get_graph(graph_id) if isinstance(graph_id, str) else None
    if loaded is not None:
        return loaded
    if isinstance(doc, dict) and ("layout" in doc or "nodes" in doc):
        try:
            return Graph.from_dict(doc)
        except GraphDefinitionError as exc:
            raise GraphDefinitionError(
                f"The stored graph of instance {instance_id!r} does not load: {exc}",
                graph_id=exc.graph_id,
                problems=exc.problems,
            ) from exc
    if not isinstance(graph_id, str):
        raise SnapshotError(
            "The row names no graph: neither its graph column nor its states hold a graph id",
            instance_id=instance_id,
        )
    raise GraphNotFoundError(graph_id, instance_id=instance_id)


def _graph_doc(instance_id: str, value: Any) -> dict[str, Any] | None:
    """The stored ``graph`` as a document: a JSON object; a JSON string holding one (encoded
    twice); or — as the Go plugin may store it, quoted or bare — only the graph's id."""
    for _ in range(2):
        if not isinstance(value, str | bytes):
            break
        text = value.decode() if isinstance(value, bytes) else value
        text = text.strip()
        if text == "null":  # JSON null: no graph stored (the states name it)
            return None
        if not text.startswith(("{", '"', "[")):
            return {"id": text} if text else None
        value = _decoded(instance_id, "graph", text)
    return value if isinstance(value, dict) else None


def _decoded(instance_id: str, column: str, text: Any) -> Any:
    """A JSON column's value, decoded from the text the batch read (``None`` as is). JSON that
    Python's decoder refuses — malformed, a number of more than 4,300 digits, nesting deeper
    than the recursion limit — is the row's ``SnapshotError``, never the decoder's error."""
    if not isinstance(text, str | bytes):
        return text
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SnapshotError(
            f"Column {column!r} is not JSON: {exc}", instance_id=instance_id
        ) from exc


__all__ = ["BATCH_SIZE", "MAX_BATCH_SIZE", "reindex"]
