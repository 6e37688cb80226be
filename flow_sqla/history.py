"""Task history: one ``bpm_flow_task`` row per successful submit, and typed queries over it."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from flow.codec import CodecLimits
from flow.context import FlowContext
from flow.workflow.records import TaskRecord
from flow.workflow.states import TaskState
from flow_sqla._dialect import DialectOps
from flow_sqla._engine import engine_for
from flow_sqla._prepared import PreparedStatements
from flow_sqla._translate import Translating, commit, translating
from flow_sqla._vars import VarsPolicy, default_auditor
from flow_sqla.tables import FlowTables

_NAME_LENGTH = 64


@dataclass(frozen=True, kw_only=True)
class HistoryEntry:
    """One row of the history: who moved the instance from which node to which, and how.

    Node types are the stored ``NodeType`` names (``"ACTIVITY"``); node names are ``""`` for
    nodes without a title (what the Go plugin writes); ``status`` is the action's
    target state; ``variables`` are decoded; ``created_at`` is naive UTC.
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


class TaskHistoryRecorder:
    """A :class:`~flow.workflow.TaskRecorder` appending to ``bpm_flow_task``.

    ``record`` issues one ``INSERT`` on ``ctx.connection`` when it is a SQLAlchemy
    ``Connection`` (the executor's unit of work puts its transaction there), else in its own
    ``engine.begin()``; no generated key is fetched back. ``bind`` is an ``Engine`` or a URL;
    ``plain_json`` and ``limits`` encode ``variables`` as :class:`SqlStateRepository` does.
    """

    def __init__(
        self,
        bind: Engine | str,
        tables: FlowTables | None = None,
        *,
        plain_json: bool = False,
        limits: CodecLimits | None = None,
    ) -> None:
        self.engine: Engine = engine_for(bind)
        self.tables = tables or FlowTables()
        self._table = self.tables.task
        self._dialect = DialectOps(self.engine.dialect, self.tables)
        # Filtered like the repository's vars, as the Go plugin filters them.
        self._vars = VarsPolicy(limits=limits, plain_json=plain_json)
        # ``inline()``: no RETURNING / generated-key fetch after the insert.
        self._insert = self._table.insert().inline()
        self._inserts: dict[tuple[str, ...], sa.Insert] = {}
        self._prepared = PreparedStatements()

    def record(self, ctx: FlowContext, record: TaskRecord) -> None:
        """Append ``record``. Raises :class:`~flow_sqla.errors.RepositoryError` on database
        errors, :class:`~flow.workflow.ConcurrentSubmitError` on a lock conflict and
        :class:`~flow.errors.SnapshotError` for a variable that cannot be stored."""
        row = self._row(ctx, record)
        insert = self._insert_of(tuple(row))
        if isinstance(ctx.connection, Connection):
            with self._translating(record.instance_id):
                self._prepared.execute(ctx.connection, insert, row)
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

    def history(self, instance_id: str) -> list[HistoryEntry]:
        """Every entry of one instance, oldest first."""
        t = self._table
        stmt = sa.select(t).where(t.c.flow_ins_id == instance_id).order_by(t.c.id)
        return self._query(stmt, instance_id)

    def by_assignee(
        self, assignee: str, *, limit: int = 50, before_id: int | None = None
    ) -> list[HistoryEntry]:
        """Entries submitted by ``assignee``, newest first; pass the last ``id`` of a page as
        ``before_id`` to get the next page (keyset paging)."""
        t = self._table
        stmt = sa.select(t).where(t.c.assignee == assignee)
        if before_id is not None:
            stmt = stmt.where(t.c.id < before_id)
        return self._query(stmt.order_by(t.c.id.desc()).limit(limit), None)

    def _query(self, stmt: sa.Select[Any], instance_id: str | None) -> list[HistoryEntry]:
        with self._translating(instance_id), self.engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [self._entry(row) for row in rows]

    def _row(self, ctx: FlowContext, record: TaskRecord) -> dict[str, Any]:
        source, target = record.source, record.target
        created = record.created_at
        if created.tzinfo is not None and created.tzinfo is not UTC:
            created = created.astimezone(UTC)
        return {
            "flow_ins_id": record.instance_id,
            "proc_def_id": record.graph_id,
            "task_id": record.task_id,
            "source_node_code": source.id,
            "source_node_name": _clip(source.title),
            "source_node_type": source.type.name,
            "target_node_code": target.id,
            "target_node_name": _clip(target.title),
            "target_node_type": target.type.name,
            "assignee": _clip(record.assignee),
            "status": int(record.state),
            "form_id": record.form_id,
            "variables": self._vars.encode(record.instance_id, record.variables),
            "message": _message(record.message),
            "creator": _clip(_creator(ctx, record)),
            "create_time": created.replace(tzinfo=None, microsecond=0),
        }

    def _entry(self, row: RowMapping) -> HistoryEntry:
        instance_id = row["flow_ins_id"]
        return HistoryEntry(
            id=row["id"],
            instance_id=instance_id,
            graph_id=row["proc_def_id"],
            task_id=row["task_id"],
            source_node_id=row["source_node_code"],
            source_node_name=row["source_node_name"],
            source_node_type=row["source_node_type"],
            target_node_id=row["target_node_code"],
            target_node_name=row["target_node_name"],
            target_node_type=row["target_node_type"],
            assignee=row["assignee"],
            status=TaskState.of(row["status"]),
            form_id=row["form_id"],
            variables=self._vars.decode(instance_id, row["variables"]),
            message=row["message"],
            creator=row["creator"],
            created_at=row["create_time"],
        )

    def _translating(self, instance_id: str | None) -> AbstractContextManager[None]:
        return translating(self._dialect, instance_id)

    def __repr__(self) -> str:
        return f"TaskHistoryRecorder(table={self._table.name!r})"


def _clip(text: str | None) -> str:
    return (text or "")[:_NAME_LENGTH]


def _message(message: str | None) -> str | None:
    """The submit's message, ``None`` (SQL NULL) when blank — what the Go plugin stores."""
    return message if message is not None and message.strip() else None


def _creator(ctx: FlowContext, record: TaskRecord) -> str:
    """Who wrote the row: the repository's default auditor, else the assignee."""
    who = default_auditor(ctx)
    return record.assignee if who is None else who


__all__ = ["HistoryEntry", "TaskHistoryRecorder"]
