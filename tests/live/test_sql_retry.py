"""run_in_transaction and the library's own units on real servers: deadlocks, PostgreSQL
SERIALIZABLE (40001), a busy COMMIT, and a connection lost during COMMIT."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from _proxy import CommitCutter
from _support import approve, count_rows, ctx, executor, migrate, raw_row

from flow.errors import FlowError
from flow.workflow import ConcurrentSubmitError, TaskAction, WorkflowExecutor
from flow_sqla import CommitOutcomeUnknownError, is_retryable, run_in_transaction

SERVERS = ["mysql", "postgresql"]
THREAD_TIMEOUT = 120.0
#: B's lock wait limit in the in-process deadlock test (seconds).
LOCK_TIMEOUT_S = 20


def approve_on(ex: WorkflowExecutor, instance_id: str, actor: str) -> Callable[[Any], bool]:
    """The unit of work a request handler runs: claim ``actor``'s task, forward it if it is
    still waiting — on the connection ``run_in_transaction`` gives it."""

    def unit(conn: sa.Connection) -> bool:
        c = ctx(instance_id, actor, conn)
        task = ex.claim_task("oa", c)
        return task is not None and ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)

    return unit


def run_threads(count: int, target: Callable[[int], Any]) -> list[Any]:
    """``target(i)`` in ``count`` threads started together; each result or exception."""
    results: list[Any] = [None] * count
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            results[i] = target(i)
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    return results


@pytest.fixture(params=SERVERS)
def server_url(request: pytest.FixtureRequest, make_database_url: Callable[[str], str]) -> str:
    return make_database_url(request.param)


@pytest.fixture
def db(server_url: str) -> Iterator[sa.Engine]:
    eng = migrate(sa.create_engine(server_url))
    yield eng
    assert eng.pool.checkedout() == 0  # type: ignore[attr-defined]
    eng.dispose()


# -- real conflicts, retried ------------------------------------------------------------------


def test_a_real_deadlock_is_retried_and_both_units_commit(db: sa.Engine) -> None:
    with db.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE pair (id INTEGER PRIMARY KEY, n INTEGER)")
        conn.exec_driver_sql("INSERT INTO pair (id, n) VALUES (1, 0), (2, 0)")
    both_hold_one = threading.Barrier(2)
    errors: list[FlowError] = []

    def unit(first: int, second: int) -> Callable[[sa.Connection], str]:
        calls = 0

        def fn(conn: sa.Connection) -> str:
            nonlocal calls
            calls += 1
            conn.exec_driver_sql(f"UPDATE pair SET n = n + 1 WHERE id = {first}")
            if calls == 1:  # only the first attempt waits: both then want the other's row
                both_hold_one.wait(timeout=THREAD_TIMEOUT)
            conn.exec_driver_sql(f"UPDATE pair SET n = n + 1 WHERE id = {second}")
            return f"{first}{second}"

        return fn

    orders = [(1, 2), (2, 1)]
    results = run_threads(
        2,
        lambda i: run_in_transaction(db, unit(*orders[i]), on_retry=lambda n, e: errors.append(e)),
    )
    assert results == ["12", "21"]
    # One deadlock at least (its retry may deadlock again with the winner's wake-up).
    assert errors and all(isinstance(e, ConcurrentSubmitError) for e in errors)
    assert all(is_retryable(e) and is_retryable(e.__cause__) for e in errors)  # type: ignore[arg-type]
    with db.connect() as conn:
        assert conn.exec_driver_sql("SELECT n FROM pair ORDER BY id").scalars().all() == [2, 2]


@pytest.mark.parametrize("isolation", ["default", "SERIALIZABLE"])
def test_racing_approvals_through_the_helper_give_one_winner_and_no_errors(
    server_url: str, isolation: str
) -> None:
    """6 threads claim + submit_task_if_waiting the same waiting task, each in
    run_in_transaction: exactly one True, the rest False, one history row, nothing raised
    (at SERIALIZABLE, PostgreSQL's losers fail with 40001 and are re-run)."""
    options = {} if isolation == "default" else {"isolation_level": isolation}
    eng = migrate(sa.create_engine(server_url, **options))
    try:
        ex = executor(eng)
        approve(ex, "race-1", "employee", amount=10)
        retries: list[FlowError] = []
        results = run_threads(
            6,
            lambda i: run_in_transaction(
                eng,
                approve_on(ex, "race-1", "manager"),
                attempts=10,
                idempotent=True,
                on_retry=lambda n, e: retries.append(e),
            ),
        )
        assert sorted(results, key=repr) == [False] * 5 + [True], results
        assert all(isinstance(e, ConcurrentSubmitError) for e in retries)
        assert count_rows(eng, "bpm_flow_task", "race-1") == 2  # employee + one manager
        assert raw_row(eng, "race-1")["states"]["oa:manager"] == 1002  # type: ignore[index]
    finally:
        eng.dispose()


def test_postgresql_serialization_failure_40001_is_retried(
    make_database_url: Callable[[str], str],
) -> None:
    """At SERIALIZABLE, a unit whose snapshot predates another transaction's commit of the
    instance row fails with 40001 when it locks the row; the helper runs it again and the
    re-run sees the task done."""
    eng = migrate(sa.create_engine(make_database_url("postgresql"), isolation_level="SERIALIZABLE"))
    try:
        ex = executor(eng)
        approve(ex, "ser-1", "employee", amount=10)
        ex.claim_task("oa", ctx("ser-1", "manager"))
        calls = 0
        retries: list[FlowError] = []

        def unit(conn: sa.Connection) -> bool:
            nonlocal calls
            calls += 1
            conn.exec_driver_sql("SELECT 1")  # the snapshot is taken here
            if calls == 1:  # meanwhile another worker approves and commits
                assert approve(ex, "ser-1", "manager")
            return approve_on(ex, "ser-1", "manager")(conn)

        assert run_in_transaction(eng, unit, on_retry=lambda n, e: retries.append(e)) is False
        assert calls == 2
        (error,) = retries
        assert isinstance(error, ConcurrentSubmitError)
        assert isinstance(error.__cause__, sa.exc.DBAPIError)
        assert getattr(error.__cause__.orig, "sqlstate", None) == "40001"
        assert count_rows(eng, "bpm_flow_task", "ser-1") == 2
    finally:
        eng.dispose()


# -- a failed COMMIT --------------------------------------------------------------------------


def test_sqlite_busy_commit_of_an_owned_unit_keeps_nothing(tmp_path: Path) -> None:
    """The library's own COMMIT fails (another connection's read lock, SQLITE_BUSY): a typed
    retryable error, and nothing of the unit reaches the database later through the pooled
    connection (SQLite keeps a transaction open after a busy COMMIT)."""
    path = tmp_path / "busy.sqlite"
    eng = migrate(sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05}))
    reader = sqlite3.connect(path, isolation_level=None)
    ex = executor(eng)
    armed = [True]

    @sa.event.listens_for(eng, "commit")
    def hold_a_read_lock(conn: sa.Connection) -> None:
        if armed.pop() if armed else False:
            reader.execute("BEGIN")
            reader.execute("SELECT * FROM bpm_flow_repository").fetchall()

    try:
        with pytest.raises(ConcurrentSubmitError) as info:
            approve(ex, "busy-1", "employee", amount=10)
        assert is_retryable(info.value)
        reader.execute("COMMIT")
        assert approve(ex, "busy-2", "employee", amount=10)
        assert raw_row(eng, "busy-1") is None
        assert count_rows(eng, "bpm_flow_task", "busy-1") == 0
        assert approve(ex, "busy-1", "employee", amount=10)  # the retry does the work once
        assert count_rows(eng, "bpm_flow_task", "busy-1") == 1
    finally:
        reader.close()
        eng.dispose()


@pytest.fixture
def cutter(server_url: str) -> Iterator[CommitCutter]:
    proxy = CommitCutter(server_url)
    yield proxy
    proxy.close()


def test_owned_unit_losing_its_connection_during_commit_says_the_outcome_is_unknown(
    db: sa.Engine, server_url: str, cutter: CommitCutter
) -> None:
    proxied = sa.create_engine(cutter.url(server_url))
    try:
        ex = executor(proxied)
        assert approve(ex, "cut-1", "employee", amount=10)
        c = ctx("cut-1", "manager")
        task = ex.claim_task("oa", c)
        cutter.arm()
        with pytest.raises(CommitOutcomeUnknownError) as info:
            ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        assert cutter.cuts == 1
        assert info.value.instance_id == "cut-1" and not is_retryable(info.value)
        assert isinstance(info.value.__cause__, sa.exc.DBAPIError)
        # This time the commit had happened: the manager's approval is stored, once.
        assert raw_row(db, "cut-1")["states"]["oa:manager"] == 1002  # type: ignore[index]
        assert count_rows(db, "bpm_flow_task", "cut-1") == 2
        assert approve(ex, "cut-1", "manager") is False  # the pool recovered
    finally:
        proxied.dispose()


@pytest.mark.parametrize("idempotent", [True, False])
def test_helper_reruns_a_unit_whose_commit_was_lost_only_when_idempotent(
    db: sa.Engine, server_url: str, cutter: CommitCutter, idempotent: bool
) -> None:
    proxied = sa.create_engine(cutter.url(server_url))
    try:
        ex = executor(proxied)
        assert approve(ex, "cut-2", "employee", amount=10)
        calls: list[bool] = []
        unit = approve_on(ex, "cut-2", "manager")

        def counted(conn: sa.Connection) -> bool:
            calls.append(unit(conn))
            return calls[-1]

        cutter.arm()
        if idempotent:
            # The first run committed; the re-run finds the task done and says so.
            assert run_in_transaction(proxied, counted, idempotent=True) is False
            assert calls == [True, False]
        else:
            with pytest.raises(CommitOutcomeUnknownError):
                run_in_transaction(proxied, counted)
            assert calls == [True]
        assert cutter.cuts == 1
        assert count_rows(db, "bpm_flow_task", "cut-2") == 2  # one manager approval, never two
    finally:
        proxied.dispose()


def _someone_waits_for_a_row_lock(engine: sa.Engine) -> bool:
    if engine.dialect.name == "postgresql":
        sql = "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    else:
        sql = "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'"
    with engine.connect() as conn:
        return bool(conn.exec_driver_sql(sql).scalar_one())


@pytest.mark.parametrize("cache", ["operation", "process"])
def test_two_threads_with_their_own_transactions_do_not_deadlock_in_the_process(
    server_url: str, cache: str
) -> None:
    """Thread A claims in its transaction (holding the row lock), thread B's claim then waits
    for that row; A's submit must not wait for B. (With a per-operation process lock B held it
    while waiting for the row: A waited for B, B for A — until B's lock timeout; PostgreSQL
    has none by default.) In both cache modes: the process cache is not used in a caller's
    transaction."""
    backend = sa.make_url(server_url).get_backend_name()
    # The deadlock this guards against ends only with B's lock timeout, which then fails the
    # asserts below whatever its length; long enough that A's claim-to-commit never reaches
    # it on a loaded machine (3 s once did, under a parallel test run).
    timeout = (
        {"options": f"-c lock_timeout={LOCK_TIMEOUT_S * 1000}"}
        if backend == "postgresql"
        else {"init_command": f"SET SESSION innodb_lock_wait_timeout = {LOCK_TIMEOUT_S}"}
    )
    eng = migrate(sa.create_engine(server_url, connect_args=timeout))
    observer = sa.create_engine(server_url, poolclass=sa.NullPool)
    try:
        ex = executor(eng, cache=cache)
        approve(ex, "pl-1", "employee", amount=10)
        a_claimed, b_result = threading.Event(), []

        def thread_b() -> None:
            a_claimed.wait(THREAD_TIMEOUT)
            try:
                b_result.append(
                    run_in_transaction(eng, approve_on(ex, "pl-1", "manager"), attempts=1)
                )
            except BaseException as exc:
                b_result.append(exc)

        b = threading.Thread(target=thread_b)
        b.start()
        with eng.begin() as conn:
            c = ctx("pl-1", "manager", conn)
            task = ex.claim_task("oa", c)
            a_claimed.set()
            # B is blocked on our row (a B that ended instead fails the asserts below). Polled
            # every 0.2 s: InnoDB refreshes its lock-wait view only after 0.1 s without a
            # reader, so a first look before B waited, then faster polls, saw no waiter until
            # B's lock wait ran out (a flaky failure under load).
            while b.is_alive() and not _someone_waits_for_a_row_lock(observer):
                b.join(0.2)
            assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        b.join(THREAD_TIMEOUT)
        assert b_result == [False]  # waited for A's commit, then found the task decided
    finally:
        observer.dispose()
        eng.dispose()
