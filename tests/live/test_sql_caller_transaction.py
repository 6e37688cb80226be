"""What the repository relies on when it joins the caller's transaction: a real transaction
(AUTOCOMMIT is refused), and rows it holds locked only while that transaction is alive (after a
failed operation — a deadlock ends the whole transaction on the server — nothing is assumed)."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from _support import approve, count_rows, ctx, executor, migrate

from flow.workflow import ConcurrentSubmitError, TaskAction
from flow_sqla import AutocommitError, RepositoryError, SqlStateRepository

TIMEOUT = 60.0


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def test_an_autocommit_engine_is_refused_when_the_repository_is_built(db: sa.Engine) -> None:
    autocommit = sa.create_engine(db.url, isolation_level="AUTOCOMMIT")
    try:
        with pytest.raises(AutocommitError, match="AUTOCOMMIT"):
            SqlStateRepository(autocommit)
        with pytest.raises(AutocommitError):
            SqlStateRepository(db.execution_options(isolation_level="AUTOCOMMIT"))
    finally:
        autocommit.dispose()


def test_an_autocommit_caller_connection_is_refused_before_any_sql(db: sa.Engine) -> None:
    """Under AUTOCOMMIT the claim's row lock would end with its statement, and a second
    submitter could win too: the operation refuses, names the instance, writes nothing."""
    ex = executor(db, index=True)
    with db.connect() as plain:
        conn = plain.execution_options(isolation_level="AUTOCOMMIT")
        with conn.begin(), pytest.raises(AutocommitError) as raised:
            ex.claim_task("oa", ctx("ac-1", "employee", conn, amount=1))
    assert raised.value.instance_id == "ac-1"
    assert count_rows(db, "bpm_flow_repository") == 0
    assert approve(ex, "ac-1", "employee", amount=1)  # the same engine, its own transactions


#: Autocommit switched on in the driver itself, below SQLAlchemy's isolation_level option.
DRIVER_AUTOCOMMIT = {
    "sqlite": {"isolation_level": None},
    "mysql": {"autocommit": True},
    "postgresql": {"autocommit": True},
}


def test_autocommit_set_in_the_driver_is_refused_at_the_operation(db: sa.Engine) -> None:
    backend = db.dialect.name if db.dialect.name != "mariadb" else "mysql"
    driver_level = sa.create_engine(db.url, connect_args=DRIVER_AUTOCOMMIT[backend])
    try:
        ex = executor(driver_level, index=True)  # built: the engine's options say nothing
        with pytest.raises(AutocommitError) as raised:
            ex.claim_task("oa", ctx("da-1", "employee", amount=1))
        assert raised.value.instance_id == "da-1"
        with driver_level.connect() as conn, conn.begin(), pytest.raises(AutocommitError):
            ex.claim_task("oa", ctx("da-2", "employee", conn, amount=1))
    finally:
        driver_level.dispose()
    assert count_rows(db, "bpm_flow_repository") == 0


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_autocommit_switched_on_by_sql_in_the_transaction_is_refused(db: sa.Engine) -> None:
    """``SET autocommit = 1`` inside the caller's transaction commits it and ends every lock
    it held: the next operation refuses instead of trusting the claim's row lock."""
    ex = executor(db, index=True)
    assert approve(ex, "sa-1", "employee", amount=1)
    with db.connect() as conn, conn.begin():
        c = ctx("sa-1", "manager", conn)
        task = ex.claim_task("oa", c)
        conn.exec_driver_sql("SET autocommit = 1")
        with pytest.raises(AutocommitError):
            ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        conn.exec_driver_sql("SET autocommit = 0")
    assert count_rows(db, "bpm_flow_task", "sa-1") == 1  # the employee's approval only


def _heavy_transaction_waiting_for(
    db: sa.Engine, first: str, then: str
) -> tuple[threading.Thread, threading.Event, list[BaseException | None]]:
    """A thread whose transaction writes many rows (InnoDB picks the *smaller* transaction as a
    deadlock's victim), locks ``first``'s row, then waits for ``then``'s; the caller gets the
    thread and an event set when the transaction holds ``first``."""
    holds = threading.Event()
    done: list[BaseException | None] = []

    def run() -> None:
        try:
            with db.begin() as conn:
                conn.exec_driver_sql("CREATE TEMPORARY TABLE ballast (n INT)")
                conn.exec_driver_sql(
                    "INSERT INTO ballast (n) VALUES (%s)", [(n,) for n in range(2000)]
                )
                lock = "SELECT id FROM bpm_flow_repository WHERE instant_id = %s FOR UPDATE"
                conn.exec_driver_sql(lock, (first,)).all()
                holds.set()
                conn.exec_driver_sql(lock, (then,)).all()
            done.append(None)
        except BaseException as exc:  # reported by the test
            done.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, holds, done


def _a_lock_waiter_appears(db: sa.Engine) -> bool:
    """Poll InnoDB's lock-wait view until a transaction waits (False after TIMEOUT)."""
    give_up = threading.Event()
    timer = threading.Timer(TIMEOUT, give_up.set)
    timer.start()
    sql = "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
    with db.connect() as observer:
        while not observer.exec_driver_sql(sql).scalar_one() and not give_up.is_set():
            observer.rollback()
            give_up.wait(0.2)  # InnoDB refreshes the view after 0.1 s without readers
    timer.cancel()
    return not give_up.is_set()


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_after_a_deadlock_the_caller_caught_no_row_is_taken_as_still_locked(
    db: sa.Engine,
) -> None:
    """The caller's transaction claims A, then loses a deadlock over B: InnoDB rolls back
    the whole transaction (the claim of A included) while SQLAlchemy still calls it active.
    Another transaction approves A meanwhile. The caller catches the error and submits its
    claimed task of A: the repository must lock and read A again (the claim is gone, the task
    completed) — never write from the row it held before the deadlock (a second approval)."""
    ex = executor(db, index=True)
    for instance_id in ("dl-a", "dl-b"):
        assert approve(ex, instance_id, "employee", amount=1)
    with db.connect() as conn, conn.begin():
        mine = ctx("dl-a", "manager", conn)
        task = ex.claim_task("oa", mine)
        assert task is not None
        thread, holds, done = _heavy_transaction_waiting_for(db, "dl-b", "dl-a")
        assert holds.wait(TIMEOUT) and _a_lock_waiter_appears(db)
        with pytest.raises(ConcurrentSubmitError):
            ex.claim_task("oa", ctx("dl-b", "manager", conn))  # deadlock: this one loses
        thread.join(TIMEOUT)
        assert done == [None]
        assert approve(ex, "dl-a", "manager")  # another transaction completes A's task
        assert not ex.submit_task_if_waiting(task, TaskAction.FORWARD, mine)
    with db.connect() as check:
        approvals = check.execute(
            sa.text(
                "SELECT COUNT(*) FROM bpm_flow_task "
                "WHERE flow_ins_id = 'dl-a' AND source_node_code = 'manager'"
            )
        ).scalar_one()
    assert approvals == 1


def test_two_executors_in_one_transaction_never_approve_twice(db: sa.Engine) -> None:
    """The second executor's submit changes the row the first one's claim left; the first
    one's submit must start from the row as it is now, not from what it wrote itself."""
    first, second = executor(db, index=True), executor(db, index=True)
    assert approve(first, "two-1", "employee", amount=1)
    with db.connect() as conn, conn.begin():
        c = ctx("two-1", "manager", conn)
        task = first.claim_task("oa", c)
        assert second.submit_task_if_waiting(second.claim_task("oa", c), TaskAction.FORWARD, c)
        assert not first.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert count_rows(db, "bpm_flow_task", "two-1") == 2  # the employee's and one manager's


def test_a_closed_or_invalidated_caller_connection_is_a_repository_error(
    db: sa.Engine,
) -> None:
    """No SQLAlchemy exception type escapes: a closed ``Connection`` in the context, or one
    invalidated (as SQLAlchemy does on a lost connection) between the claim and the submit,
    fails the operation with a ``RepositoryError``, nothing written."""
    ex = executor(db, index=True)
    approve(ex, "cc-1", "employee", amount=10)
    tables = ("bpm_flow_repository", "bpm_flow_task")
    before = [count_rows(db, t) for t in tables]
    closed = db.connect()
    closed.close()
    with pytest.raises(RepositoryError):
        ex.claim_task("oa", ctx("cc-1", "manager", closed))
    conn = db.connect()
    conn.begin()
    c = ctx("cc-1", "manager", conn)
    task = ex.claim_task("oa", c)
    assert task is not None
    conn.invalidate()
    with pytest.raises(RepositoryError):
        ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    with pytest.raises(RepositoryError):
        ex.claim_task("oa", c)  # the next operation on that transaction too
    conn.close()
    assert [count_rows(db, t) for t in tables] == before
    assert approve(ex, "cc-1", "manager")  # the claim in the lost transaction kept nothing


@pytest.mark.parametrize("cache", ["operation", "process"])
@pytest.mark.parametrize("index", [False, True])
def test_one_transaction_used_from_two_threads_never_approves_twice(
    db: sa.Engine, cache: str, index: bool
) -> None:
    """Async apps run each call on whichever pool thread is free (``asyncio.to_thread``,
    ``run_in_threadpool``): the rows an operation leaves held belong to the transaction, not
    to the thread, so a submit decided on another thread is seen by this one."""
    from concurrent.futures import ThreadPoolExecutor

    ex = executor(db, cache=cache, index=index)
    approve(ex, "tt-1", "employee", amount=10)
    first, second = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    try:
        with db.begin() as conn:
            c = ctx("tt-1", "manager", conn)
            task = first.submit(ex.claim_task, "oa", c).result()
            assert task is not None
            other = ctx("tt-1", "manager", conn)
            again = second.submit(ex.claim_task, "oa", other).result()
            assert second.submit(
                ex.submit_task_if_waiting, again, TaskAction.FORWARD, other
            ).result()
            assert not first.submit(ex.submit_task_if_waiting, task, TaskAction.FORWARD, c).result()
    finally:
        first.shutdown()
        second.shutdown()
    assert count_rows(db, "bpm_flow_task", "tt-1") == 2  # the employee's and one manager's
