"""The open-task table: writing an instance's changes to it, and the queries it serves.

One row per (open task, candidate). An operation writes only what changed between the
aggregate it read (with the row lock) and the one it stores: rows of closed tasks are deleted,
rows of opened tasks inserted, a task that only became WAITING gets its ``state`` updated —
each at most one statement (executemany), every row addressed by its full unique key
``(instant_id, node_id, candidate)``, so InnoDB takes record locks only, never the gap locks a
range on ``instant_id`` would take (which would let two instances deadlock at REPEATABLE READ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from flow.workflow.aggregate import (
    IndexedTask,
    InstanceIndex,
    InstanceStatus,
    InstanceSummary,
    OpenTask,
)
from flow.workflow.states import TaskState
from flow_sqla.tables import CANDIDATE_LENGTH, FlowTables

_NAME_LENGTH = 64

_KEY = ("instant_id", "node_id", "candidate")


class TodoTable:
    """Statements on ``tables.todo`` (and the index columns of ``tables.repository``), built
    once with bound parameters."""

    def __init__(self, tables: FlowTables) -> None:
        todo = self._todo = tables.todo
        self._repo = tables.repository
        key = [todo.c[name] == sa.bindparam(f"k_{name}") for name in _KEY]
        self._delete = sa.delete(todo).where(*key)
        self._update = sa.update(todo).where(*key).values(state=sa.bindparam("k_state"))
        self._insert = todo.insert().inline()

    # -- writing -------------------------------------------------------------------------
    def write(
        self,
        conn: Connection,
        instance_id: str,
        before: InstanceIndex | None,
        after: InstanceIndex,
    ) -> None:
        """Bring the instance's rows from ``before`` to ``after`` (at most three statements)."""
        old = {} if before is None else {t.node_id: t for t in before.tasks}
        new = {t.node_id: t for t in after.tasks}
        deleted: list[dict[str, Any]] = []
        updated: list[dict[str, Any]] = []
        inserted: list[dict[str, Any]] = []
        for node_id, task in old.items():
            kept = new.get(node_id)
            if kept is None or not _same_rows(task, kept):
                deleted.extend(_keys(instance_id, task))
            elif kept.state != task.state:
                updated.extend({**k, "k_state": int(kept.state)} for k in _keys(instance_id, task))
        for node_id, task in new.items():
            kept = old.get(node_id)
            if kept is None or not _same_rows(kept, task):
                inserted.extend(_rows(instance_id, after.graph_id, task))
        if deleted:
            conn.execute(self._delete, deleted)
        if updated:
            conn.execute(self._update, updated)
        if inserted:
            conn.execute(self._insert, inserted)

    # -- queries -------------------------------------------------------------------------
    def inbox_statement(
        self, identities: Sequence[str], graph_id: str | None, limit: int, after: int | None
    ) -> sa.Select[Any]:
        """One statement: the oldest row per task among the rows of ``identities``, oldest
        first. Served by the ``(candidate, id)`` index; the ``NOT EXISTS`` (on the unique key)
        keeps a task whose several candidates match once, at its first matching row."""
        t = self._todo
        other = t.alias("other")
        wanted = [c[:CANDIDATE_LENGTH] for c in identities]
        duplicate = (
            sa.select(sa.literal(1))
            .where(
                other.c.instant_id == t.c.instant_id,
                other.c.node_id == t.c.node_id,
                other.c.candidate.in_(wanted),
                other.c.id < t.c.id,
            )
            .exists()
        )

        def page(candidates: Sequence[str]) -> sa.Select[Any]:
            matching = (
                t.c.candidate == candidates[0]
                if len(candidates) == 1
                else t.c.candidate.in_(candidates)
            )
            stmt = sa.select(*_TASK_COLUMNS(t)).where(matching, ~duplicate)
            if graph_id is not None:
                stmt = stmt.where(t.c.graph_id == graph_id)
            if after is not None:
                stmt = stmt.where(t.c.id > after)
            return stmt.order_by(t.c.id).limit(limit)

        if len(wanted) == 1:
            return page(wanted)
        # ``candidate IN (a, b) ORDER BY id`` makes MariaDB and PostgreSQL walk the primary key
        # in id order (a full scan when the identities' tasks are rare): one page per identity,
        # each an ordered range of the (candidate, id) index, merged by id.
        merged = sa.union_all(
            *(sa.select(page([one]).subquery(f"page{n}")) for n, one in enumerate(wanted))
        ).subquery("pages")
        return sa.select(merged).order_by(merged.c.id).limit(limit)

    def inbox(
        self,
        conn: Connection,
        identities: Sequence[str],
        graph_id: str | None,
        limit: int,
        after: int | None,
    ) -> list[OpenTask]:
        rows = conn.execute(self.inbox_statement(identities, graph_id, limit, after)).mappings()
        return [_open_task(row, (row["candidate"],)) for row in rows]

    def open_tasks_statement(self, instance_id: str) -> sa.Select[Any]:
        t = self._todo
        return sa.select(*_TASK_COLUMNS(t)).where(t.c.instant_id == instance_id).order_by(t.c.id)

    def open_tasks(self, conn: Connection, instance_id: str) -> list[OpenTask]:
        """The tasks of one instance, each once with all its candidates, oldest first."""
        rows = conn.execute(self.open_tasks_statement(instance_id)).mappings().all()
        candidates: dict[str, list[str]] = {}
        first: dict[str, RowMapping] = {}
        for row in rows:
            candidates.setdefault(row["node_id"], []).append(row["candidate"])
            first.setdefault(row["node_id"], row)
        return [_open_task(row, tuple(candidates[node])) for node, row in first.items()]

    def status_statement(self, instance_id: str) -> sa.Select[Any]:
        r = self._repo
        return sa.select(r.c.status).where(r.c.instant_id == instance_id)

    def instances_statement(
        self,
        status: InstanceStatus | None,
        graph_id: str | None,
        creator: str | None,
        limit: int,
        after: int | None,
    ) -> sa.Select[Any]:
        """Newest first, keyset paging on ``id``; served by ``(status, graph_id, id)``."""
        r = self._repo
        stmt = sa.select(
            r.c.id,
            r.c.instant_id,
            r.c.graph_id,
            r.c.status,
            r.c.creator,
            r.c.create_time,
            r.c.update_time,
            r.c.finish_time,
        )
        stmt = stmt.where(r.c.status.is_not(None) if status is None else r.c.status == int(status))
        if graph_id is not None:
            stmt = stmt.where(r.c.graph_id == graph_id)
        if creator is not None:
            stmt = stmt.where(r.c.creator == creator)
        if after is not None:
            stmt = stmt.where(r.c.id < after)
        return stmt.order_by(r.c.id.desc()).limit(limit)

    def instances(
        self,
        conn: Connection,
        status: InstanceStatus | None,
        graph_id: str | None,
        creator: str | None,
        limit: int,
        after: int | None,
    ) -> list[InstanceSummary]:
        stmt = self.instances_statement(status, graph_id, creator, limit, after)
        return [
            InstanceSummary(
                instance_id=row["instant_id"],
                graph_id=row["graph_id"],
                status=InstanceStatus(row["status"]),
                creator=row["creator"],
                created_at=row["create_time"],
                updated_at=row["update_time"],
                finished_at=row["finish_time"],
                cursor=row["id"],
            )
            for row in conn.execute(stmt).mappings()
        ]


def _TASK_COLUMNS(t: sa.Table) -> list[sa.Column[Any]]:
    return [
        t.c.id,
        t.c.instant_id,
        t.c.graph_id,
        t.c.node_id,
        t.c.node_name,
        t.c.state,
        t.c.candidate,
        t.c.lineage,
        t.c.create_time,
    ]


def _same_rows(a: IndexedTask, b: IndexedTask) -> bool:
    """Whether ``b``'s rows are ``a``'s with at most another state (then an UPDATE does)."""
    return (a.candidates, a.lineage, a.opened_at, a.node_title) == (
        b.candidates,
        b.lineage,
        b.opened_at,
        b.node_title,
    )


def _keys(instance_id: str, task: IndexedTask) -> list[dict[str, Any]]:
    return [
        {"k_instant_id": instance_id, "k_node_id": task.node_id, "k_candidate": c}
        for c in _clipped(task.candidates)
    ]


def _rows(instance_id: str, graph_id: str, task: IndexedTask) -> list[dict[str, Any]]:
    return [
        {
            "instant_id": instance_id,
            "graph_id": graph_id,
            "node_id": task.node_id,
            "node_name": task.node_title[:_NAME_LENGTH] or None,
            "state": int(task.state),
            "candidate": candidate,
            "lineage": list(task.lineage),
            "create_time": task.opened_at,
        }
        for candidate in _clipped(task.candidates)
    ]


def _clipped(candidates: Sequence[str]) -> list[str]:
    """Candidates as stored: clipped to the column, each once (order kept)."""
    return list(dict.fromkeys(c[:CANDIDATE_LENGTH] for c in candidates))


def _open_task(row: RowMapping, candidates: tuple[str, ...]) -> OpenTask:
    lineage = row["lineage"]
    return OpenTask(
        instance_id=row["instant_id"],
        graph_id=row["graph_id"],
        node_id=row["node_id"],
        node_title=row["node_name"] or row["node_id"],
        state=TaskState.of(row["state"]),
        candidates=candidates,
        lineage=tuple(lineage) if isinstance(lineage, list) else (),
        opened_at=row["create_time"],
        cursor=row["id"],
    )


__all__ = ["TodoTable"]
