"""The open-task table: writing an instance's changes to it, and the queries it serves.

One row per (open task, candidate). An operation writes only what changed between the
aggregate it read (with the row lock) and the one it stores: rows of closed tasks are deleted,
rows of opened tasks inserted, a task that only became WAITING gets its ``state`` updated —
each at most one statement (executemany, compiled once per dialect: :mod:`flow_sqla._prepared`),
every row addressed by its full unique key ``(instant_id, node_id, candidate)``, never by a
range on ``instant_id`` (whose gap locks would let neighbouring instances deadlock at
REPEATABLE READ on every write). The locks InnoDB still takes beyond the key — a delete
through that unique secondary key takes the gap before it, an insert meeting a delete-marked
duplicate the next key — stay in the instance's range thanks to its sentinel row
(:data:`SENTINEL_NODE`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from flow.errors import SnapshotError
from flow.graph import Graph
from flow.workflow.aggregate import (
    IndexedTask,
    InstanceIndex,
    InstanceStatus,
    InstanceSummary,
    OpenTask,
)
from flow.workflow.controllers import candidates_of
from flow.workflow.states import TaskState
from flow_sqla._dialect import ExactlyEqual, IndexMerge, insert_overwriting, stored_text
from flow_sqla._limits import CheckedGraphs, check_id, display_text
from flow_sqla._prepared import PreparedStatement, PreparedStatements
from flow_sqla._reads import TIMES_BY_HAND, decoded, fetch_rows
from flow_sqla._rows import stored_status
from flow_sqla.errors import UnstorableValueError
from flow_sqla.tables import CANDIDATE_LENGTH, FlowTables

_NAME_LENGTH = 64

_Shape = tuple[int, int, int]

#: The most todo rows one merged statement carries (see :meth:`TodoChanges.shape`).
MERGE_ROWS = 16

_KEY = ("instant_id", "node_id", "candidate")
#: The columns a todo INSERT that meets an existing row of its key writes over (MySQL/MariaDB).
_OVERWRITTEN = ("graph_id", "node_name", "state", "lineage", "create_time")

#: The node id of an instance's *sentinel* todo row on MySQL/MariaDB: the greatest key of the
#: instance's range of the ``(instant_id, node_id, candidate)`` index (64 U+FFFF: after every
#: node id of the Basic Multilingual Plane, and sent as utf8mb3 too), with the candidate ``""``
#: — the mark that tells the row apart, which no task has and no identity matches. InnoDB
#: deletes a row found through that unique index with a next-key lock (the key and the gap
#: before it), and checks the key after a re-inserted one with a shared lock: without the
#: sentinel the gap before an instance's first key and the key after its last one were its
#: neighbours', so operations on neighbouring instances waited for each other and deadlocked
#: at REPEATABLE READ. With it, each instance's locks stay in its own range (node ids beyond
#: the BMP sort after it: their instances' locks may reach the neighbour's gap, as before).
#: Written with the instance's first task rows (in the same INSERT), kept while the instance
#: lives — one row per instance; never listed, never counted.
SENTINEL_NODE = "\uffff" * 64

#: What to do about a todo row that does not read: the rows are derived from the states.
_REBUILD_TODO = (
    "the task table is rebuilt from the states by flow_sqla.reindex(..., everything=True) "
    "('flow reindex --all')"
)
_ROW_COLUMNS = (
    "instant_id",
    "graph_id",
    "node_id",
    "node_name",
    "state",
    "candidate",
    "lineage",
    "create_time",
)


@dataclass
class TodoChanges:
    """What an operation changes in the todo table: rows to delete and to re-state (by full
    unique key, ``k_`` parameters) and rows to insert (column parameters)."""

    deleted: list[dict[str, Any]] = field(default_factory=list)
    updated: list[dict[str, Any]] = field(default_factory=list)
    inserted: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.deleted or self.updated or self.inserted)

    def shape(self, how: IndexMerge) -> _Shape | None:
        """Row counts ``(deleted, updated, inserted)`` when ``how`` can carry the changes.

        At most :data:`MERGE_ROWS` rows in all: a task with hundreds of candidates would
        make one statement of thousands of parameters (PostgreSQL allows 65,535), and every
        shape is a statement compiled and kept once; such writes take the separate
        statements, which batch any number of rows."""
        rows = len(self.deleted) + len(self.updated) + len(self.inserted)
        if not self or rows > MERGE_ROWS or len({row["k_state"] for row in self.updated}) > 1:
            return None
        if how == "join_update" and (self.deleted or self.inserted):
            return None
        if how == "cte":
            gone = {(row["k_node_id"], row["k_candidate"]) for row in self.deleted}
            if any((row["node_id"], row["candidate"]) in gone for row in self.inserted):
                return None
        return (len(self.deleted), len(self.updated), len(self.inserted))

    def params(self) -> dict[str, Any]:
        """The numbered parameters of the merged statement (see :meth:`TodoTable.merged`)."""
        params: dict[str, Any] = {}
        for prefix, rows in (("d", self.deleted), ("u", self.updated)):
            for n, row in enumerate(rows):
                params[f"{prefix}{n}_node_id"] = row["k_node_id"]
                params[f"{prefix}{n}_candidate"] = row["k_candidate"]
        if self.updated:
            params["u_state"] = self.updated[0]["k_state"]
        params.update(self.inserted_params())
        return params

    def inserted_params(self) -> dict[str, Any]:
        """The inserted rows' values as the numbered parameters of :func:`_numbered_rows`."""
        return {
            f"i{n}_{name}": value
            for n, row in enumerate(self.inserted)
            for name, value in row.items()
        }

    def joined_rowcount(self) -> int:
        """Rows a ``join_update`` matches when the instance row and every todo row exist."""
        return 1 + len(self.updated)


class TodoTable:
    """Statements on ``tables.todo`` (and the index columns of ``tables.repository``), built
    once with bound parameters."""

    def __init__(
        self, tables: FlowTables, *, keys_through_join: bool = False, sentinel: bool = False
    ) -> None:
        """``keys_through_join`` (MySQL/MariaDB, see ``DialectOps.keys_through_join``): the
        DELETE and UPDATE by key join the instance row, so that the server's join optimizer
        reads the todo row as a *const* table through the unique key whatever its statistics
        say (a single-table DELETE is costed, and on a churning table may walk the
        ``(candidate, id)`` index instead, locking every row of that candidate). ``sentinel``
        (MySQL/MariaDB): instances get their :data:`SENTINEL_NODE` row."""
        self.sentinel = sentinel
        todo = self._todo = tables.todo
        repo = self._repo = tables.repository
        key = [todo.c[name] == sa.bindparam(f"k_{name}", type_=todo.c[name].type) for name in _KEY]
        if keys_through_join:
            key += [
                repo.c.instant_id == sa.bindparam("k_instant_id", type_=todo.c.instant_id.type),
                todo.c.instant_id == repo.c.instant_id,
            ]
        self._delete = sa.delete(todo).where(*key)
        self._update = (
            sa.update(todo)
            .where(*key)
            .values(state=sa.bindparam("k_state", type_=todo.c.state.type))
        )
        values = {name: sa.bindparam(name, type_=todo.c[name].type) for name in _ROW_COLUMNS}
        self._insert = todo.insert().inline().values(values)
        # The sentinel row may be there already (kept after the instance's tasks closed):
        # inserted again with new task rows, it takes the values given — as does a row a hand
        # edit left under a task's key. (On MySQL 8.0.20+ the clause reads ``AS new``, which
        # mysqlclient's ``executemany`` does not batch: several rows go one statement each.)
        self._insert_keeping_sentinel = insert_overwriting(todo, values, _OVERWRITTEN)
        #: The INSERT of new rows: with sentinels, one that writes over an existing sentinel.
        self._insert_rows = self._insert_keeping_sentinel if sentinel else self._insert
        self._prepared = PreparedStatements()
        self._merged: dict[tuple[int, str, _Shape], tuple[sa.Update, sa.Update]] = {}
        #: INSERTs of n rows in one statement (numbered parameters), by n.
        self._inserts_of: dict[int, sa.Insert] = {}

    # -- writing -------------------------------------------------------------------------
    def changes(
        self, instance_id: str, before: InstanceIndex | None, after: InstanceIndex
    ) -> TodoChanges:
        """The rows to delete, re-state and insert to bring the instance from ``before`` to
        ``after``."""
        kept = _kept(before, after)
        changes = TodoChanges()
        for task in () if before is None else before.tasks:
            now = kept.get(task.node_id)
            if now is None:
                changes.deleted.extend(_keys(instance_id, task))
            elif now.state != task.state:
                changes.updated.extend(
                    {**k, "k_state": int(now.state)} for k in _keys(instance_id, task)
                )
        for task in after.tasks:
            if task.node_id not in kept:
                changes.inserted.extend(_rows(instance_id, task.graph_of(after), task))
        if self.sentinel and changes.inserted and not _has_rows(before):
            changes.inserted.append(_sentinel_row(instance_id, after.graph_id))
        return changes

    def write(self, conn: Connection, changes: TodoChanges) -> None:
        """Apply ``changes`` with at most three statements (one executemany each)."""
        prepared = self._prepared
        if changes.deleted:
            prepared.get(conn, self._delete).execute_many(conn, changes.deleted)
        if changes.updated:
            prepared.get(conn, self._update).execute_many(conn, changes.updated)
        if changes.inserted:
            prepared.get(conn, self._insert_rows).execute_many(conn, changes.inserted)

    def statements(
        self, conn: Connection, changes: TodoChanges
    ) -> list[tuple[PreparedStatement, dict[str, Any]]] | None:
        """``changes`` as prepared statements to send together with the row's UPDATE, in
        :meth:`write`'s order (:func:`flow_sqla._prepared.execute_together`): one DELETE or
        UPDATE per row, one INSERT of every new row. ``None`` past :data:`MERGE_ROWS` rows —
        the INSERT of each row count is a statement compiled and kept once; such writes take
        :meth:`write`."""
        rows = len(changes.deleted) + len(changes.updated) + len(changes.inserted)
        if not changes or rows > MERGE_ROWS:
            return None
        prepared = self._prepared
        found: list[tuple[PreparedStatement, dict[str, Any]]] = []
        if changes.deleted:
            delete = prepared.get(conn, self._delete)
            found += [(delete, row) for row in changes.deleted]
        if changes.updated:
            update = prepared.get(conn, self._update)
            found += [(update, row) for row in changes.updated]
        if changes.inserted:
            insert = prepared.get(conn, self._insert_of(len(changes.inserted)))
            found.append((insert, changes.inserted_params()))
        return found

    def _insert_of(self, count: int) -> sa.Insert:
        """The INSERT of ``count`` rows in one statement, parameters numbered as
        :meth:`statements` binds them — with sentinels, writing over an existing row of a
        key as :attr:`_insert_rows` does."""
        insert = self._inserts_of.get(count)
        if insert is None:
            todo = self._todo
            rows = _numbered_rows(todo, count)
            if self.sentinel:
                insert = insert_overwriting(todo, rows, _OVERWRITTEN)
            else:
                insert = todo.insert().inline().values(rows)
            self._inserts_of[count] = insert
        return insert

    def repair(self, conn: Connection, instance_id: str, stored: InstanceIndex) -> bool:
        """Make the instance's todo rows exactly those of ``stored`` (its row's own index) when
        they are not — rows deleted, added or edited by hand, values that no longer read —
        by deleting them all and inserting the right ones (which then sort as new in the
        inboxes). Returns whether it did; rows that match are left as they are."""
        inserted = [
            row for task in stored.tasks for row in _rows(instance_id, task.graph_of(stored), task)
        ]
        sentinel = self.sentinel
        t = self._todo
        name = conn.dialect.name
        as_stored = sa.select(*(stored_text(name, t.c[key]) for key in _ROW_COLUMNS)).where(
            t.c.instant_id == instance_id
        )
        # A plain read: ``conn`` reads the latest commits (a full reindex runs its batches
        # at READ COMMITTED); a locking one would lock the gap after the instance's rows.
        found = self._by_key(
            row._asdict()
            for row in conn.execute(as_stored)
            if not (sentinel and _is_sentinel(row._asdict()))
        )
        if found == self._by_key(inserted):
            return False
        conn.execute(sa.delete(t).where(t.c.instant_id == instance_id))
        if inserted and sentinel:
            inserted.append(_sentinel_row(instance_id, stored.graph_id))
        if inserted:
            self._prepared.get(conn, self._insert_rows).execute_many(conn, inserted)
        return True

    def _by_key(self, rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
        """Todo rows (as written, or read back as text) by ``(node_id, candidate)``, each as
        the comparable tuple of its other values."""
        c = self._todo.c
        by_key: dict[tuple[str, str], tuple[Any, ...]] = {}
        for row in rows:
            state = row["state"]
            by_key[(str(row["node_id"]), str(row["candidate"]))] = (
                str(row["graph_id"]),
                row["node_name"],
                int(state) if str(state).lstrip("-").isdigit() else None,
                _as_read(c.lineage.type, row["lineage"]),
                _whole_seconds(_as_read(c.create_time.type, row["create_time"])),
            )
        return by_key

    def merged(
        self, row_update: sa.Update, changes: TodoChanges, how: IndexMerge
    ) -> sa.Update | None:
        """``row_update`` (the instance row's UPDATE, its key bound as ``row_key``) carrying
        ``changes`` too, as one statement — or ``None`` when ``how`` cannot carry them.

        ``"cte"`` (PostgreSQL): the todo DELETE, UPDATE and INSERT ride along as data-modifying
        CTEs; all run, whatever the main UPDATE matches. Not when a key is both deleted and
        inserted (the CTEs share one snapshot, so the insert would meet the old row).
        ``"join_update"`` (MySQL/MariaDB): a multi-table UPDATE of the row and the re-stated
        todo rows (a claim); nothing is deleted or inserted. It changes anything only when
        every named row exists: the caller compares the matched count with
        :meth:`TodoChanges.joined_rowcount`. Built once per shape, with numbered parameters
        (:meth:`TodoChanges.params`).
        """
        shape = changes.shape(how)
        if shape is None:
            return None
        key = (id(row_update), how, shape)
        found = self._merged.get(key)
        if found is None:
            found = self._merged[key] = (row_update, self._merge(row_update, how, shape))
        return found[1]

    def _merge(self, row_update: sa.Update, how: IndexMerge, shape: _Shape) -> sa.Update:
        todo, repo = self._todo, self._repo
        deleted, updated, inserted = shape
        row_key = todo.c.instant_id == sa.bindparam("row_key", type_=todo.c.instant_id.type)

        def keys(prefix: str, count: int) -> sa.ColumnElement[bool]:
            return sa.or_(
                *(
                    sa.and_(
                        todo.c.node_id
                        == sa.bindparam(f"{prefix}{n}_node_id", type_=todo.c.node_id.type),
                        todo.c.candidate
                        == sa.bindparam(f"{prefix}{n}_candidate", type_=todo.c.candidate.type),
                    )
                    for n in range(count)
                )
            )

        state = sa.bindparam("u_state", type_=todo.c.state.type)
        if how == "join_update":
            joined = todo.c.instant_id == repo.c.instant_id
            return row_update.where(row_key, joined, keys("u", updated)).values(
                {todo.c.state: state}
            )
        ctes = []
        if deleted:
            ctes.append(sa.delete(todo).where(row_key, keys("d", deleted)).cte("todo_closed"))
        if updated:
            stmt = sa.update(todo).where(row_key, keys("u", updated)).values(state=state)
            ctes.append(stmt.cte("todo_restated"))
        if inserted:
            ctes.append(todo.insert().values(_numbered_rows(todo, inserted)).cte("todo_opened"))
        return row_update.add_cte(*ctes)

    # -- queries -------------------------------------------------------------------------
    def inbox_statement(
        self, identities: Sequence[str], graph_id: str | None, limit: int, after: int | None
    ) -> sa.Select[Any]:
        """One statement: the oldest row per task among the rows of ``identities``, oldest
        first. Served by the ``(candidate, id)`` index; the ``NOT EXISTS`` (on the unique key)
        keeps a task whose several candidates match once, at its first matching row.
        ``identities``: at least one that :func:`matchable` keeps."""
        t = self._todo
        other = t.alias("other")
        wanted = matchable(identities)
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
        if not matchable(identities):
            return []
        rows = self._fetch_tasks(conn, self.inbox_statement(identities, graph_id, limit, after))
        return [_open_task(row, (row["candidate"],)) for row in rows]

    def open_tasks_statement(self, instance_id: str) -> sa.Select[Any]:
        t = self._todo
        return sa.select(*_TASK_COLUMNS(t)).where(t.c.instant_id == instance_id).order_by(t.c.id)

    def open_tasks(self, conn: Connection, instance_id: str) -> list[OpenTask]:
        """The tasks of one instance, each once with all its candidates, oldest first."""
        rows = [
            row
            for row in self._fetch_tasks(conn, self.open_tasks_statement(instance_id))
            if not _is_sentinel(row)
        ]
        candidates: dict[str, list[str]] = {}
        first: dict[str, RowMapping] = {}
        for row in rows:
            candidates.setdefault(row["node_id"], []).append(row["candidate"])
            first.setdefault(row["node_id"], row)
        return [_open_task(row, tuple(candidates[node])) for node, row in first.items()]

    def _fetch_tasks(self, conn: Connection, stmt: sa.Select[Any]) -> list[RowMapping]:
        rows = fetch_rows(conn, stmt, self._todo.fullname, _REBUILD_TODO)
        return [row._mapping for row in rows]

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
            stmt = stmt.where(ExactlyEqual(r.c.creator, creator))
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
                status=stored_status(row["instant_id"], row["status"]),
                creator=row["creator"] or None,  # '' (no auditor, as the Go plugin writes)
                created_at=row["create_time"],
                updated_at=row["update_time"],
                finished_at=row["finish_time"],
                cursor=row["id"],
            )
            for row in (
                found._mapping
                for found in fetch_rows(conn, stmt, self._repo.fullname, TIMES_BY_HAND)
            )
        ]


def _numbered_rows(todo: sa.Table, count: int) -> list[dict[str, sa.BindParameter[Any]]]:
    """``count`` rows of bound parameters for a multi-row INSERT, row ``n``'s named
    ``i{n}_{column}`` (:meth:`TodoChanges.inserted_params`)."""
    return [
        {name: sa.bindparam(f"i{n}_{name}", type_=todo.c[name].type) for name in _ROW_COLUMNS}
        for n in range(count)
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
    return (a.graph_id, a.candidates, a.lineage, a.opened_at, a.node_title) == (
        b.graph_id,
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


def matchable(identities: Sequence[str]) -> list[str]:
    """The identities a stored candidate can equal, each once: one longer than the column is
    never stored (see :func:`check_candidates`), so it matches nothing."""
    return list(dict.fromkeys(c for c in identities if c and len(c) <= CANDIDATE_LENGTH))


def _has_rows(index: InstanceIndex | None) -> bool:
    """Whether ``index`` has todo rows (a task with a candidate): then its sentinel is there."""
    return index is not None and any(task.candidates for task in index.tasks)


def _sentinel_row(instance_id: str, graph_id: str) -> dict[str, Any]:
    return {
        "instant_id": instance_id,
        "graph_id": graph_id,
        "node_id": SENTINEL_NODE,
        "node_name": None,
        "state": 0,
        "candidate": "",
        "lineage": None,
        "create_time": None,
    }


def _is_sentinel(row: Mapping[str, Any] | RowMapping) -> bool:
    """The empty candidate marks it (no task has one), whatever became of its node id over a
    connection whose character set could not carry it."""
    return bool(row["candidate"] == "")


def _rows(instance_id: str, graph_id: str, task: IndexedTask) -> list[dict[str, Any]]:
    return [
        {
            "instant_id": instance_id,
            "graph_id": graph_id,
            "node_id": task.node_id,
            "node_name": display_text(task.node_title, _NAME_LENGTH) or None,
            "state": int(task.state),
            "candidate": candidate,
            "lineage": list(task.lineage),
            "create_time": task.opened_at,
        }
        for candidate in dict.fromkeys(task.candidates)  # checked by check_candidates
    ]


def _as_read(column_type: sa.types.TypeEngine[Any], value: Any) -> Any:
    """A value as written (a list, a time) or read back as text, decoded alike."""
    return decoded(column_type, value) if isinstance(value, str) else value


def _whole_seconds(value: Any) -> datetime | None:
    """A time to the second (a ``DATETIME`` column keeps no fraction); anything else ``None``."""
    return value.replace(microsecond=0) if isinstance(value, datetime) else None


def check_candidates(instance_id: str, before: InstanceIndex | None, after: InstanceIndex) -> None:
    """Raise :class:`UnstorableValueError` naming the node and instance for a candidate no
    row can hold, among the tasks whose rows going from ``before`` to ``after`` inserts —
    before the operation writes anything. Clipped, two roles sharing their first 128
    characters would become one candidate, and each would see the other's tasks in its inbox.
    Tasks left as they are stored are not checked again: rows written before long candidates
    were refused hold them clipped, and their instances keep working."""
    kept = _kept(before, after)
    for task in after.tasks:
        if task.node_id not in kept:
            field_name = f"candidate of node {task.node_id!r}"
            for candidate in task.candidates:
                check_candidate(candidate, field_name, instance_id)


class GraphCandidateChecks(CheckedGraphs):
    """Raises for a graph with a node whose candidates no todo row can hold, once per graph
    (candidates depend on the node alone)."""

    def check(self, graph: Graph, controller: object, instance_id: str | None = None) -> None:
        """Raise :class:`UnstorableValueError` naming the node, the graph and the instance for
        a candidate of ``controller`` no row can hold — before the instance starts, instead of
        when that task would open (the task before it could then never be submitted)."""
        if self._known(graph):
            return
        for node in graph.nodes.values():
            field_name = f"candidate of node {node.id!r} of graph {graph.id!r}"
            for candidate in candidates_of(controller, node):
                check_candidate(candidate, field_name, instance_id)
        self._remember(graph)


def check_candidate(candidate: str, field_name: str, instance_id: str | None) -> None:
    """A candidate a todo row can hold: not empty (``""`` marks an instance's sentinel row on
    MySQL/MariaDB, and no identity matches it), at most 128 characters, valid UTF-8."""
    if candidate == "":
        raise UnstorableValueError(
            field_name, "empty: no identity can match it", instance_id=instance_id, value=""
        )
    check_id(candidate, field_name, instance_id=instance_id, limit=CANDIDATE_LENGTH)


def _kept(before: InstanceIndex | None, after: InstanceIndex) -> dict[str, IndexedTask]:
    """The tasks of ``after`` whose todo rows ``before`` already holds (their state aside), by
    node id. None when the graph changed — an instance driven on through another graph (a
    claim or submit naming it) keeps no row of the old one even where a node id and candidate
    match: the rows name their graph."""
    if before is None or before.graph_id != after.graph_id:
        return {}
    old = {t.node_id: t for t in before.tasks}
    return {
        t.node_id: t
        for t in after.tasks
        if (stored := old.get(t.node_id)) is not None and _same_rows(stored, t)
    }


def _clipped(candidates: Sequence[str]) -> list[str]:
    """Candidates as keys of stored rows, each once (order kept). Clipped to the column: rows
    written before longer candidates were refused hold them clipped."""
    return list(dict.fromkeys(c[:CANDIDATE_LENGTH] for c in candidates))


def _open_task(row: RowMapping, candidates: tuple[str, ...]) -> OpenTask:
    return OpenTask(
        instance_id=row["instant_id"],
        graph_id=row["graph_id"],
        node_id=row["node_id"],
        node_title=row["node_name"] or row["node_id"],
        state=TaskState.of(row["state"]),
        candidates=candidates,
        lineage=_stored_lineage(row),
        opened_at=row["create_time"],
        cursor=row["id"],
    )


def _stored_lineage(row: RowMapping) -> tuple[str, ...]:
    """A todo row's ``lineage``: a JSON list of node ids (NULL: none). Anything else — a
    value only a hand edit or another program writes — is a :class:`SnapshotError` naming
    the instance, rather than a lineage of numbers that a send-back would look up."""
    lineage = row["lineage"]
    if lineage is None:
        return ()
    if isinstance(lineage, list) and all(isinstance(node, str) for node in lineage):
        return tuple(lineage)
    raise SnapshotError(
        f"the lineage of the todo row of node {row['node_id']!r} holds "
        f"{display_text(repr(lineage), 40)}, not a list of node ids; {_REBUILD_TODO}",
        instance_id=row["instant_id"],
    )


__all__ = ["GraphCandidateChecks", "TodoChanges", "TodoTable", "check_candidates"]
