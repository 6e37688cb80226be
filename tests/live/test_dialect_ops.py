"""DialectOps statements executed on real servers: upserts, row locks, lock conflicts.

Run at each server's default isolation (REPEATABLE READ on MySQL/MariaDB, READ COMMITTED on
PostgreSQL). Timing never relies on sleeps: threads meet at barriers, and a waiting lock is
observed in the server's own lock-wait view before the holder commits.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from flow_sqla import FlowTables
from flow_sqla._dialect import WRITE_OPTIONS, DialectOps

WHEN = dt.datetime(2026, 1, 2, 3, 4, 5)
UPDATE_COLUMNS = ["states", "vars", "updater", "update_time"]
TIMEOUT = 30.0


def _row(instance_id: str, **values: Any) -> dict[str, Any]:
    row = {
        "instant_id": instance_id,
        "graph": {"id": "leave"},
        "states": {},
        "vars": {},
        "creator": "alice",
        "create_time": WHEN,
        "updater": "alice",
        "update_time": WHEN,
    }
    return row | values


@pytest.fixture
def tables(engine: sa.Engine) -> FlowTables:
    tables = FlowTables()
    tables.metadata.create_all(engine)
    return tables


@pytest.fixture
def ops(engine: sa.Engine, tables: FlowTables) -> DialectOps:
    return DialectOps(engine.dialect, tables)


def _lock_and_read(conn: sa.Connection, ops: DialectOps, instance_id: str, *, known: bool) -> Any:
    statements = ops.locking_read(instance_id, _row(instance_id), row_known=known)
    result = None
    for stmt in statements:
        result = conn.execute(stmt)
    assert result is not None
    return result.mappings().first()


def _read(engine: sa.Engine, ops: DialectOps, instance_id: str) -> sa.RowMapping | None:
    with engine.connect() as conn:
        return conn.execute(ops.plain_read(instance_id)).mappings().first()


def _set_lock_timeout(conn: sa.Connection, seconds: float) -> None:
    if conn.dialect.name in ("mysql", "mariadb"):
        conn.exec_driver_sql(f"SET SESSION innodb_lock_wait_timeout = {max(1, int(seconds))}")
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(seconds * 1000)}ms'")


def _run_in_threads(*jobs: Callable[[], None]) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(job: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                job()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(job)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    return errors


def _lock_waiters(conn: sa.Connection) -> int:
    if conn.dialect.name in ("mysql", "mariadb"):
        sql = "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
    else:
        sql = (
            "SELECT COUNT(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
    return int(conn.exec_driver_sql(sql).scalar_one())


def _a_lock_waiter_appears(observer: sa.Connection) -> bool:
    """Poll the server's lock-wait view until a transaction waits (False after TIMEOUT)."""
    give_up = threading.Event()
    timer = threading.Timer(TIMEOUT, give_up.set)
    timer.start()
    while _lock_waiters(observer) == 0 and not give_up.is_set():
        observer.rollback()
        # InnoDB refreshes its INNODB_TRX cache only after 0.1 s without readers.
        give_up.wait(0.2)
    timer.cancel()
    observer.rollback()
    return not give_up.is_set()


#: Row locks exist on the servers only; SQLite's write lock is covered by the timeout test.
ROW_LOCK_BACKENDS = pytest.mark.parametrize("db_url", ["mysql", "postgresql"], indirect=True)


def test_upsert_inserts_then_updates_only_the_given_columns(
    engine: sa.Engine, ops: DialectOps
) -> None:
    with engine.begin() as conn:
        conn.execute(
            ops.upsert(_row("i-1", states={"g:a": 1}), UPDATE_COLUMNS),
            execution_options=WRITE_OPTIONS,
        )
    first = _read(engine, ops, "i-1")
    later = _row("i-1", graph={"id": "other"}, creator="bob", states={"g:a": 2}, updater="bob")
    with engine.begin() as conn:
        conn.execute(ops.upsert(later, UPDATE_COLUMNS), execution_options=WRITE_OPTIONS)
    second = _read(engine, ops, "i-1")
    assert first is not None and second is not None
    # The plain read returns the graph column as its text (it may hold only a graph id).
    assert (second["id"], json.loads(second["graph"]), second["creator"]) == (
        first["id"],
        {"id": "leave"},
        "alice",
    )
    assert (second["states"], second["updater"]) == ({"g:a": 2}, "bob")


def test_ensure_row_never_changes_an_existing_row(engine: sa.Engine, ops: DialectOps) -> None:
    with engine.begin() as conn:
        conn.execute(ops.ensure_row(_row("i-1", states={"g:a": 1})))
        conn.execute(ops.ensure_row(_row("i-1", states={"g:a": 9}, creator="bob")))
    row = _read(engine, ops, "i-1")
    assert row is not None and (row["states"], row["creator"]) == ({"g:a": 1}, "alice")


def test_created_row_tells_an_inserted_row_from_an_existing_one(
    engine: sa.Engine, ops: DialectOps
) -> None:
    def ensure(conn: sa.Connection, instance_id: str) -> bool:
        return ops.created_row(
            conn.execute(ops.ensure_row(_row(instance_id)), execution_options=WRITE_OPTIONS)
        )

    with engine.begin() as conn:
        first = [ensure(conn, "i-1"), ensure(conn, "i-1")]
        # After an insert on the same connection, a duplicate still reads as "not created".
        second = [ensure(conn, "i-2"), ensure(conn, "i-1")]
    with engine.begin() as conn:
        later = [ensure(conn, "i-2"), ensure(conn, "i-3")]
    assert (first, second, later) == ([True, False], [True, False], [False, True])


@ROW_LOCK_BACKENDS
def test_a_concurrent_start_of_the_same_new_instance_waits_and_then_sees_its_row(
    engine: sa.Engine, ops: DialectOps
) -> None:
    """Why skipping the read after a created row is safe: the uncommitted insert holds the
    row, so a second ensure_row waits for it and then reports the row as existing."""
    outcome: list[Any] = []

    def second() -> None:
        with engine.connect() as conn, conn.begin():
            _set_lock_timeout(conn, TIMEOUT)
            result = conn.execute(ops.ensure_row(_row("i-1")), execution_options=WRITE_OPTIONS)
            outcome.append(ops.created_row(result))
            outcome.append(_lock_and_read(conn, ops, "i-1", known=True)["states"])

    with engine.connect() as holder, engine.connect() as observer:
        with holder.begin():
            result = holder.execute(ops.ensure_row(_row("i-1")), execution_options=WRITE_OPTIONS)
            assert ops.created_row(result)
            worker = threading.Thread(target=second)
            worker.start()
            assert _a_lock_waiter_appears(observer), "the second start never waited"
            assert outcome == []
            holder.execute(ops.upsert(_row("i-1", states={"g:a": 2}), UPDATE_COLUMNS))
        worker.join(TIMEOUT)
    assert outcome == [False, {"g:a": 2}]


def test_locking_read_creates_a_missing_row_and_returns_it(
    engine: sa.Engine, ops: DialectOps
) -> None:
    with engine.begin() as conn:
        row = _lock_and_read(conn, ops, "i-1", known=False)
    assert row is not None
    graph_column = "graph" if engine.dialect.name == "sqlite" else "has_graph"
    # MySQL/MariaDB also return the row's own id: a table whose collation is not exact may
    # answer with another instance's row (IdCollationError).
    own_id = ["instant_id"] if ops.reads_back_id else []
    assert list(row.keys()) == ["states", "vars", graph_column, *own_id]
    assert row["states"] == {} and bool(row[graph_column])
    stored = _read(engine, ops, "i-1")
    assert stored is not None
    assert (json.loads(stored["graph"]), stored["create_time"]) == ({"id": "leave"}, WHEN)


def test_locking_read_of_a_known_row_returns_its_current_values(
    engine: sa.Engine, ops: DialectOps
) -> None:
    with engine.begin() as conn:
        conn.execute(ops.upsert(_row("i-1", states={"g:a": 3}), UPDATE_COLUMNS))
    with engine.begin() as conn:
        row = _lock_and_read(conn, ops, "i-1", known=True)
    assert row is not None and row["states"] == {"g:a": 3}


def _start_two_new_instances(
    engine: sa.Engine, ops: DialectOps, *, known: bool
) -> list[BaseException]:
    """Two workers each lock-and-read a new instance (``known``: the SELECT alone), meet while
    both hold their locks, then write; the errors the workers raised."""
    both_locked = threading.Barrier(2, timeout=TIMEOUT)

    def start(instance_id: str) -> Callable[[], None]:
        def job() -> None:
            with engine.connect() as conn, conn.begin():
                _set_lock_timeout(conn, 10)
                _lock_and_read(conn, ops, instance_id, known=known)
                both_locked.wait()
                conn.execute(ops.upsert(_row(instance_id, states={"g:a": 1}), UPDATE_COLUMNS))

        return job

    return _run_in_threads(start("new-a"), start("new-b"))


@ROW_LOCK_BACKENDS
def test_two_new_instances_start_concurrently_without_deadlock(
    engine: sa.Engine, ops: DialectOps
) -> None:
    assert _start_two_new_instances(engine, ops, known=False) == []
    assert [_read(engine, ops, i) is not None for i in ("new-a", "new-b")] == [True, True]


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)  # PostgreSQL takes no gap locks
def test_for_update_of_missing_rows_alone_deadlocks_on_mysql(
    engine: sa.Engine, ops: DialectOps
) -> None:
    """The baseline that ensure_row exists for: gap locks at REPEATABLE READ (error 1213)."""
    errors = _start_two_new_instances(engine, ops, known=True)
    assert len(errors) == 1 and ops.is_lock_conflict(errors[0])


@ROW_LOCK_BACKENDS
def test_second_locking_read_waits_until_the_first_commits(
    engine: sa.Engine, ops: DialectOps
) -> None:
    with engine.begin() as conn:
        conn.execute(ops.ensure_row(_row("i-1", states={"g:a": 1})))
    seen: list[Any] = []
    waiting = threading.Event()

    def second() -> None:
        with engine.connect() as conn, conn.begin():
            _set_lock_timeout(conn, TIMEOUT)
            waiting.set()
            seen.append(_lock_and_read(conn, ops, "i-1", known=True))

    with engine.connect() as holder, engine.connect() as observer:
        with holder.begin():
            _lock_and_read(holder, ops, "i-1", known=True)
            worker = threading.Thread(target=second)
            worker.start()
            assert waiting.wait(TIMEOUT)
            assert _a_lock_waiter_appears(observer), "the second locking read never waited"
            assert seen == []
            holder.execute(ops.upsert(_row("i-1", states={"g:a": 2}), UPDATE_COLUMNS))
        observer.rollback()
        worker.join(TIMEOUT)
    assert [row["states"] for row in seen] == [{"g:a": 2}]


def test_lock_wait_timeout_is_a_lock_conflict(
    engine: sa.Engine, ops: DialectOps, db_url: str
) -> None:
    with engine.begin() as conn:
        conn.execute(ops.ensure_row(_row("i-1")))
    impatient = (
        sa.create_engine(db_url, connect_args={"timeout": 0.05}) if ops.name == "sqlite" else engine
    )
    try:
        with engine.connect() as holder, holder.begin():
            _lock_and_read(holder, ops, "i-1", known=False)
            with impatient.connect() as other, other.begin():
                _set_lock_timeout(other, 0.05)
                with pytest.raises(sa.exc.DBAPIError) as info:
                    _lock_and_read(other, ops, "i-1", known=True)
        assert ops.is_lock_conflict(info.value)
    finally:
        if impatient is not engine:
            impatient.dispose()


def test_concurrent_read_modify_write_on_one_instance_loses_no_update(
    engine: sa.Engine, ops: DialectOps
) -> None:
    """Every worker locks, reads, increments and writes; the lock serializes them all.

    On SQLite this is the case the single locking INSERT ... RETURNING exists for: a read
    followed by a write would let two workers both read and then fail with SQLITE_BUSY.
    """
    workers = 4
    start = threading.Barrier(workers, timeout=TIMEOUT)

    def increment() -> None:
        start.wait()
        with engine.connect() as conn, conn.begin():
            _set_lock_timeout(conn, TIMEOUT)
            row = _lock_and_read(conn, ops, "i-1", known=False)
            count = int(row["vars"].get("count", 0))
            conn.execute(ops.upsert(_row("i-1", vars={"count": count + 1}), UPDATE_COLUMNS))

    assert _run_in_threads(*[increment] * workers) == []
    row = _read(engine, ops, "i-1")
    assert row is not None and row["vars"] == {"count": workers}
