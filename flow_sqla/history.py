"""Task history: one ``bpm_flow_task`` row per successful submit, and typed queries over it.

Queries page by keyset on ``id`` and read the ``variables`` and ``create_time`` columns as
text, decoding them row by row: a row whose JSON, text or time is corrupt comes back marked
(``HistoryEntry.problem``) instead of failing the whole page.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from flow.codec import CodecLimits
from flow.context import FlowContext
from flow.errors import SnapshotError
from flow.workflow._arguments import default_auditor
from flow.workflow.aggregate import MAX_CURSOR
from flow.workflow.records import TaskRecord
from flow.workflow.states import TaskAction, TaskState
from flow_sqla import _options as options
from flow_sqla._dialect import DialectOps, time_text, undecoded_text
from flow_sqla._engine import engine_for
from flow_sqla._limits import (
    GraphChecks,
    check_id,
    check_message,
    check_readable,
    check_readable_instance_id,
    display_text,
)
from flow_sqla._prepared import PreparedStatements
from flow_sqla._reads import (
    callers_connection,
    fetch_rows,
    operation_connection,
    read_time,
)
from flow_sqla._together import hold_back
from flow_sqla._translate import Translating, commit, translating
from flow_sqla._vars import VarsPolicy
from flow_sqla.errors import InvalidArgumentError
from flow_sqla.tables import FlowTables

_NAME_LENGTH = 64
#: Stored action codes to actions (an unknown code reads as ``None``).
_ACTIONS: dict[int, TaskAction] = {int(action): action for action in TaskAction}
#: The columns of an entry, in the order :meth:`TaskHistoryRecorder._entry` takes them
#: (``create_time`` and ``variables`` follow, read as text).
_ENTRY_COLUMNS = (
    "id",
    "flow_ins_id",
    "proc_def_id",
    "task_id",
    "source_node_code",
    "source_node_name",
    "source_node_type",
    "target_node_code",
    "target_node_name",
    "target_node_type",
    "assignee",
    "status",
    "form_id",
    "message",
    "creator",
)


@dataclass(frozen=True, kw_only=True)
class HistoryEntry:
    """One row of the history: who moved the instance from which node to which, and how.

    Node types are the stored ``NodeType`` names (``"ACTIVITY"``); node names are ``""`` for
    nodes without a title (what the Go plugin writes); ``status`` is the action's target
    state; ``action`` the ``TaskAction`` that wrote the row (BACK and BACK_JUMP both end
    WAITING or UNKNOWN), ``None`` for rows written without it (the Go plugin, ``index=False``,
    before revision ``flow0004``) and when the recorder does not write it either;
    ``variables`` are decoded; ``created_at`` is naive UTC. ``problem`` is ``None`` for
    a sound row; for a row whose ``variables`` cannot be decoded (not UTF-8 text, not JSON,
    nested deeper than Python decodes, not an object) it says why, and ``variables`` is then
    empty (a tag object the codec does not read comes back as the plain object it is); for
    a ``create_time`` that is no time (PostgreSQL's ``'infinity'``, other text on SQLite) it
    says so too, and ``created_at`` is ``None`` — the
    other columns are as stored.
    """

    id: int
    instance_id: str
    graph_id: str
    task_id: str
    source_node_id: str
    source_node_name: str | None
    source_node_type: str
    target_node_id: str
    target_node_name: str
    target_node_type: str
    assignee: str
    status: TaskState
    form_id: int | None
    variables: dict[str, Any]
    message: str | None
    creator: str | None
    created_at: datetime | None
    problem: str | None = None
    action: TaskAction | None = None


class TaskHistoryRecorder:
    """A :class:`~flow.workflow.TaskRecorder` appending to ``bpm_flow_task``.

    ``record`` issues one ``INSERT`` on ``ctx.connection`` when it is a SQLAlchemy
    ``Connection`` (the executor's unit of work puts its transaction there), else in its own
    ``engine.begin()``; no generated key is fetched back. ``bind`` is an ``Engine`` or a URL;
    ``plain_json``, ``limits`` and ``vars_filter`` (the context keys never stored; default
    ``actor``, ``auditor``, ``creator``) encode ``variables`` as :class:`SqlStateRepository`
    does — :func:`~flow_sqla.sql_workflow` gives both the same.
    """

    def __init__(
        self,
        bind: Engine | str,
        tables: FlowTables | None = None,
        *,
        plain_json: bool = False,
        limits: CodecLimits | None = None,
        index: bool = False,
        vars_filter: Iterable[str] | None = None,
    ) -> None:
        self.engine: Engine = engine_for(bind)
        self.tables = options.optional("tables", tables, FlowTables) or FlowTables()
        self._table = self.tables.task
        #: ``index=True`` also writes the ``action`` column (revision ``flow0004``).
        self.writes_action = options.flag("index", index)
        self._dialect = DialectOps(self.engine.dialect, self.tables)
        # Filtered like the repository's vars (the same keys: sql_workflow passes them), as
        # the Go plugin filters them.
        self._vars = VarsPolicy(vars_filter, limits=limits, plain_json=plain_json)
        # ``inline()``: no RETURNING / generated-key fetch after the insert.
        self._insert = self._table.insert().inline()
        self._inserts: dict[tuple[str, ...], sa.Insert] = {}
        self._prepared = PreparedStatements()
        self._graphs = GraphChecks()
        t = self._table
        # ``create_time`` and ``variables`` as text (bytes on SQLite, which keeps any), decoded
        # per row (see _entry): one corrupt row must not fail the page — no driver reads a
        # time of 'infinity', nor sqlite3 text that is not UTF-8.
        dialect = self.engine.dialect.name
        self._columns = [
            *(t.c[name] for name in _ENTRY_COLUMNS),
            time_text(dialect, t.c.create_time).label("create_time"),
            undecoded_text(dialect, t.c.variables).label("variables"),
            # Only tables at flow0004 or later have it; a recorder that writes it reads it.
            *((t.c.action,) if self.writes_action else ()),
        ]

    def record(self, ctx: FlowContext, record: TaskRecord) -> None:
        """Append ``record``. Raises :class:`~flow_sqla.errors.RepositoryError` on database
        errors, :class:`~flow.workflow.ConcurrentSubmitError` on a lock conflict and
        :class:`~flow.errors.SnapshotError` for a variable that cannot be stored."""
        row = self._row(ctx, record)
        insert = self._insert_of(tuple(row))
        conn = operation_connection(ctx, self.engine)
        if conn is not None:
            with self._translating(record.instance_id):
                prepared = self._prepared.get(conn, insert)
                # Inside the instance's unit of work, the INSERT may go out with its write.
                if not hold_back(conn, record.instance_id, (prepared, row)):
                    prepared.execute(conn, row)
            return
        guard = Translating(self._dialect, record.instance_id)
        with guard, self.engine.connect() as conn, conn.begin() as trans:
            self._prepared.execute(conn, insert, row)
            guard.committing = True  # a connection lost from here on: outcome unknown
            commit(conn, trans)

    def _insert_of(self, columns: tuple[str, ...]) -> sa.Insert:
        """The INSERT binding exactly ``columns`` by name, built once per column list so that
        it compiles once per dialect (see :mod:`flow_sqla._prepared`)."""
        insert = self._inserts.get(columns)
        if insert is None:
            table = self._table
            binds = {name: sa.bindparam(name, type_=table.c[name].type) for name in columns}
            insert = self._inserts[columns] = self._insert.values(binds)
        return insert

    def history(
        self,
        instance_id: str,
        *,
        limit: int | None = None,
        after_id: int | None = None,
        connection: Connection | None = None,
    ) -> list[HistoryEntry]:
        """Entries of one instance, oldest first: all of them, or at most ``limit``; pass the
        last ``id`` of a page as ``after_id`` for the next one (keyset paging on ``id``, as
        fast on page 100 as on page 1). ``connection``: your transaction's, to read there (it
        sees your uncommitted steps — at REPEATABLE READ from your transaction's snapshot —
        and a request already holding a pooled connection does not wait for a second one);
        else one of the recorder's engine. Raises :class:`InvalidArgumentError` for a
        ``limit`` that is not an integer from 1 to 2**63 - 1, an ``after_id`` that is not a
        64-bit integer, or a ``connection`` that is not a SQLAlchemy ``Connection``."""
        check_readable_instance_id(instance_id)
        t = self._table
        stmt = sa.select(*self._columns).where(self._dialect.exactly(t.c.flow_ins_id, instance_id))
        if after_id is not None:
            stmt = stmt.where(t.c.id > _page_key(after_id, "after_id"))
        stmt = stmt.order_by(t.c.id)
        if limit is not None:
            stmt = stmt.limit(_page_size(limit))
        return self._query(stmt, instance_id, connection)

    def by_assignee(
        self,
        assignee: str,
        *,
        limit: int = 50,
        before_id: int | None = None,
        connection: Connection | None = None,
    ) -> list[HistoryEntry]:
        """Entries submitted by ``assignee``, newest first; pass the last ``id`` of a page as
        ``before_id`` to get the next page (keyset paging). ``connection``: as for
        :meth:`history`."""
        check_readable(assignee, "assignee")
        t = self._table
        stmt = sa.select(*self._columns).where(self._dialect.exactly(t.c.assignee, assignee))
        if before_id is not None:
            stmt = stmt.where(t.c.id < _page_key(before_id, "before_id"))
        stmt = stmt.order_by(t.c.id.desc()).limit(_page_size(limit))
        return self._query(stmt, None, connection)

    def _query(
        self, stmt: sa.Select[Any], instance_id: str | None, connection: Connection | None
    ) -> list[HistoryEntry]:
        caller = callers_connection(connection, self.engine, instance_id)
        with self._translating(instance_id):
            if caller is None:
                with self.engine.connect() as conn:
                    rows = self._fetch(conn, stmt)
            else:
                rows = self._fetch(caller, stmt)
        return [self._entry(*row) for row in rows]

    def _fetch(self, conn: Connection, stmt: sa.Select[Any]) -> Sequence[Any]:
        remedy = "the recorder writes only times there: correct the row by hand"
        return fetch_rows(conn, stmt, self._table.fullname, remedy)

    def _row(self, ctx: FlowContext, record: TaskRecord) -> dict[str, Any]:
        """The row of ``record``; every value is checked against its column first
        (:class:`UnstorableValueError`, :class:`UnstorableGraphError`), never clipped."""
        source, target = record.source, record.target
        instance_id = record.instance_id
        check_id(instance_id, "instance id")
        self._graphs.check(source.graph)
        if target.graph is not source.graph:
            self._graphs.check(target.graph)
        check_id(record.graph_id, "graph id", instance_id=instance_id)
        check_id(record.task_id, "task id", instance_id=instance_id)
        assignee = check_id(record.assignee, "assignee (actor)", instance_id=instance_id)
        creator = check_id(_creator(ctx, record), "auditor", instance_id=instance_id)
        created = record.created_at
        if created.tzinfo is not None and created.tzinfo is not UTC:
            created = created.astimezone(UTC)
        row = {
            "flow_ins_id": record.instance_id,
            "proc_def_id": record.graph_id,
            "task_id": record.task_id,
            "source_node_code": source.id,
            "source_node_name": display_text(source.title, _NAME_LENGTH),
            "source_node_type": source.type.name,
            "target_node_code": target.id,
            "target_node_name": display_text(target.title, _NAME_LENGTH),
            "target_node_type": target.type.name,
            "assignee": assignee,
            "status": int(record.state),
            "form_id": record.form_id,
            "variables": self._vars.encode(record.instance_id, record.variables),
            "message": _message(check_message(record.message, instance_id)),
            "creator": creator,
            "create_time": created.replace(tzinfo=None, microsecond=0),
        }
        if self.writes_action:
            row["action"] = int(record.action)
        return row

    def _entry(
        self,
        row_id: int,
        instance_id: str,
        graph_id: str,
        task_id: str,
        source_id: str,
        source_name: str | None,
        source_type: str,
        target_id: str,
        target_name: str,
        target_type: str,
        assignee: str,
        status: int | None,
        form_id: int | None,
        message: str | None,
        creator: str | None,
        created_text: Any,  # text (a number where SQLite holds one)
        variables_text: str | bytes | None,
        action_code: int | None = None,
    ) -> HistoryEntry:
        """One entry from a row of ``self._columns`` (positional: 10k rows per page are
        common, and name lookups per field would dominate)."""
        variables, problem = self._variables(instance_id, row_id, variables_text)
        created_at = read_time(created_text)
        if created_at is None and created_text is not None:
            unreadable = f"history row {row_id}: create_time unreadable ({created_text!r})"
            problem = unreadable if problem is None else f"{problem}; {unreadable}"
        return HistoryEntry(
            id=row_id,
            instance_id=instance_id,
            graph_id=graph_id,
            task_id=task_id,
            source_node_id=source_id,
            source_node_name=source_name,
            source_node_type=source_type,
            target_node_id=target_id,
            target_node_name=target_name,
            target_node_type=target_type,
            assignee=assignee,
            status=TaskState.of(status),
            form_id=form_id,
            variables=variables,
            message=message,
            creator=creator,
            created_at=created_at,
            problem=problem,
            action=_ACTIONS.get(action_code) if action_code is not None else None,
        )

    def _variables(
        self, instance_id: str, row_id: int, stored: str | bytes | None
    ) -> tuple[dict[str, Any], str | None]:
        """The decoded ``variables`` of one row (text, or SQLite's bytes), or ``{}`` and why
        they could not be."""
        if stored is None:
            return {}, None
        try:
            # UnicodeDecodeError (a ValueError): SQLite bytes that are no UTF-8 text
            text = stored.decode("utf-8") if isinstance(stored, bytes) else stored
            raw = json.loads(text)
            if '"$' not in text and isinstance(raw, dict):
                # No codec tag can be in it: plain JSON values, only the usual filtering.
                excluded = self._vars.excluded
                return {k: v for k, v in raw.items() if k not in excluded and v is not None}, None
            return self._vars.decode(instance_id, raw), None
        except (ValueError, RecursionError, SnapshotError) as exc:
            # ValueError: not text or not JSON; RecursionError: nested deeper than Python decodes.
            return {}, f"history row {row_id}: variables unreadable ({type(exc).__name__}: {exc})"

    def _translating(self, instance_id: str | None) -> AbstractContextManager[None]:
        return translating(self._dialect, instance_id)

    def __repr__(self) -> str:
        return f"TaskHistoryRecorder(table={self._table.name!r})"


def _page_size(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_CURSOR:
        raise InvalidArgumentError(
            "limit", limit, "a page size must be an integer from 1 to 2**63 - 1"
        )
    return limit


def _page_key(value: object, name: str) -> int:
    """A history id: a 64-bit integer, as the column holds (a bigger one would overflow the
    driver rather than match nothing)."""
    if not isinstance(value, int) or isinstance(value, bool) or abs(value) > MAX_CURSOR:
        raise InvalidArgumentError(name, value, "a history id must be a 64-bit integer")
    return value


def _message(message: str | None) -> str | None:
    """The submit's message, ``None`` (SQL NULL) when blank — what the Go plugin stores."""
    return message if message is not None and message.strip() else None


def _creator(ctx: FlowContext, record: TaskRecord) -> str:
    """Who wrote the row: the repository's default auditor, else the assignee."""
    who = default_auditor(ctx)
    return record.assignee if who is None else who


__all__ = ["HistoryEntry", "TaskHistoryRecorder"]
