"""The instance row as the repository holds it in memory, and the bounded maps that keep rows.

A row read from ``bpm_flow_repository`` is validated once, when it is read: ``states`` must be
a JSON object of string keys to integer codes, ``vars`` a JSON object. Anything else raises
:class:`~flow.errors.SnapshotError` naming the instance, so one bad row never affects others.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from sqlalchemy.engine import RowMapping

from flow.errors import SnapshotError
from flow.workflow.aggregate import IndexedTask, InstanceIndex, InstanceStatus
from flow.workflow.states import TaskState

_V = TypeVar("_V")


class StoredRow(NamedTuple):
    """The validated columns an operation needs: ``states`` (codes, unknown ones kept as
    stored), ``vars`` (the encoded JSON object), whether a graph is stored and — when the
    repository keeps the task index — the stored aggregate (``None``: not indexed). Immutable;
    a tuple because one is made for every operation."""

    states: Mapping[str, int]
    vars: Mapping[str, Any]
    has_graph: bool
    aggregate: InstanceIndex | None = None
    # The graph column's graph id, read only where nothing else tells which graph the row
    # runs: a row not indexed yet with no states (the Go plugin's restart writes ``{}``).
    graph_id: str | None = None


def holds_nothing(states: Any, vars_null: bool, graph: Any) -> bool:
    """Whether a row's raw columns hold nothing any write put there — ``states``, ``vars`` and
    ``graph`` all NULL: the row a locking read inserts for an unknown id (a write always
    stores a states object, a restart too)."""
    return states is None and vars_null and not graph


def parse_states(instance_id: str, raw: Any) -> dict[str, int]:
    """``states`` of a row: ``None`` reads as empty; raises :class:`SnapshotError` on any
    shape other than an object of string keys to integers."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SnapshotError(
            f"Stored states must be a JSON object, got {type(raw).__name__}",
            instance_id=instance_id,
        )
    for key, code in raw.items():
        if not isinstance(code, int) or isinstance(code, bool):
            raise SnapshotError(
                f"Stored state {key!r} must be an integer code, got {code!r}",
                instance_id=instance_id,
            )
    return raw


def parse_vars(instance_id: str, raw: Any) -> dict[str, Any]:
    """``vars`` of a row in its encoded form: ``None`` reads as empty; raises
    :class:`SnapshotError` when it is not an object, or holds a number no JSON writer can
    write back (``1e400`` reads as infinity; SQLite's JSON also keeps ``NaN``): any write of
    the row would store text that is no JSON — or fail on the other servers."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SnapshotError(
            f"Stored vars must be a JSON object, got {type(raw).__name__}",
            instance_id=instance_id,
        )
    key = _non_finite_number(raw)
    if key is not None:
        raise SnapshotError(
            f"Stored vars hold a number out of JSON's range under {key!r} (correct the row)",
            instance_id=instance_id,
        )
    return raw


def _non_finite_number(value: dict[str, Any]) -> str | None:
    """The top-level key under which ``value`` holds an infinite or NaN float, if any (walked
    without recursion: stored JSON may nest deeper than Python's stack)."""
    for key, item in value.items():
        pending = [item]
        while pending:
            current = pending.pop()
            kind = type(current)
            if kind is float:
                if not math.isfinite(current):
                    return key
            elif kind is dict:
                pending.extend(current.values())
            elif kind is list:
                pending.extend(current)
    return None


def parse_row(instance_id: str, row: RowMapping) -> StoredRow:
    """Validate the ``states``/``vars`` columns of a fetched row; whether a graph is stored
    comes from ``has_graph`` (locking reads) or the ``graph`` column itself."""
    has_graph = row["has_graph"] if "has_graph" in row else row["graph"] is not None
    return StoredRow(
        states=parse_states(instance_id, row["states"]),
        vars=parse_vars(instance_id, row["vars"]),
        has_graph=bool(has_graph),
        aggregate=parse_index(instance_id, row) if "status" in row else None,
    )


def parse_index(instance_id: str, row: RowMapping | Mapping[str, Any]) -> InstanceIndex | None:
    """The stored aggregate of a row read with the index columns; ``None`` when its status is
    NULL (written before the index existed, or by the Go plugin). Raises
    :class:`SnapshotError` for a status or ``open_tasks`` of the wrong shape."""
    code = row["status"]
    if code is None:
        return None
    status = stored_status(instance_id, code)
    try:
        tasks = tuple(_task(item) for item in (row["open_tasks"] or ()))
    except (ValueError, TypeError, KeyError) as exc:
        raise malformed_index(instance_id, exc) from exc
    return InstanceIndex(
        graph_id=str(row["graph_id"] or ""),
        status=status,
        finished_at=row["finish_time"],
        tasks=tasks,
    )


def stored_status(instance_id: str, code: Any) -> InstanceStatus:
    """The instance status a row's ``status`` column holds; :class:`SnapshotError` naming
    the instance for a code no status has (a row written by hand or another program)."""
    try:
        return InstanceStatus(code)
    except (ValueError, TypeError) as exc:
        raise malformed_index(instance_id, exc) from exc


def malformed_index(instance_id: str, exc: BaseException) -> SnapshotError:
    """The error for a stored task index that does not read (raise it ``from exc``): the
    index is derived from the states, so a reindex of every row rebuilds it."""
    return SnapshotError(
        f"Stored task index is malformed: {exc} (it is rebuilt from the states by "
        "flow_sqla.reindex(..., everything=True), 'flow reindex --all')",
        instance_id=instance_id,
    )


def _task(item: Any) -> IndexedTask:
    if not isinstance(item, dict):
        raise TypeError(f"an open task must be an object, got {type(item).__name__}")
    lineage, candidates = item["lineage"], item["candidates"]
    if not isinstance(lineage, list) or not isinstance(candidates, list):
        raise TypeError("lineage and candidates must be lists")
    return IndexedTask(
        node_id=str(item["node"]),
        node_title=str(item["title"]),
        state=TaskState(item["state"]),
        candidates=tuple(str(c) for c in candidates),
        lineage=tuple(str(n) for n in lineage),
        opened_at=datetime.fromisoformat(item["opened"]),
        graph_id=None if item.get("graph") is None else str(item["graph"]),
    )


def task_doc(task: IndexedTask) -> dict[str, Any]:
    """The JSON object ``open_tasks`` stores for one task (read back by :func:`parse_index`)."""
    return {
        "node": task.node_id,
        "title": task.node_title,
        "state": int(task.state),
        "candidates": list(task.candidates),
        "lineage": list(task.lineage),
        "opened": task.opened_at.isoformat(),
        **({} if task.graph_id is None else {"graph": task.graph_id}),
    }


def utc_now() -> datetime:
    """Naive UTC, whole seconds: what a plain ``DATETIME`` column keeps on every dialect."""
    return datetime(*time.gmtime()[:6])


class BoundedMap(Generic[_V]):
    """A thread-safe LRU map with a fixed capacity (the least recently used entry goes).

    :meth:`pop` also stamps the key, so that a value read before a pop is not put back after
    it: take :meth:`stamp` before reading, then :meth:`put_unless_popped`. (The process cache:
    an operation in a caller's transaction drops the entry it changed while another thread's
    operation, done earlier, has yet to cache its older row.)"""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._items: OrderedDict[str, _V] = OrderedDict()
        self._mutex = threading.Lock()
        self._pops = 0  # pops so far: the stamp of the latest
        self._popped: OrderedDict[str, int] = OrderedDict()  # key -> stamp of its last pop
        self._forgotten = 0  # the latest stamp dropped from _popped (bounded like _items)

    def get(self, key: str) -> _V | None:
        with self._mutex:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: _V) -> None:
        with self._mutex:
            self._put(key, value)

    def stamp(self, key: str) -> int:
        """Where ``key`` stands in the pops: changes whenever ``key`` is popped (and,
        rarely, when older pops are forgotten — a put is then skipped, never wrongly made)."""
        with self._mutex:
            return self._popped.get(key, self._forgotten)

    def put_unless_popped(self, key: str, value: _V, stamp: int) -> None:
        """Put ``value`` unless ``key`` was popped since :meth:`stamp` returned ``stamp``."""
        with self._mutex:
            if self._popped.get(key, self._forgotten) == stamp:
                self._put(key, value)

    def pop(self, key: str) -> None:
        with self._mutex:
            self._items.pop(key, None)
            self._pops += 1
            self._popped[key] = self._pops
            self._popped.move_to_end(key)
            if len(self._popped) > self._capacity:
                _, forgotten = self._popped.popitem(last=False)
                self._forgotten = max(self._forgotten, forgotten)

    def _put(self, key: str, value: _V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        with self._mutex:
            return key in self._items

    def __len__(self) -> int:
        with self._mutex:
            return len(self._items)


__all__ = [
    "BoundedMap",
    "StoredRow",
    "parse_index",
    "parse_row",
    "parse_states",
    "parse_vars",
    "task_doc",
    "utc_now",
]
