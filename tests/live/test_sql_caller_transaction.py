"""What the repository relies on when it joins the caller's transaction: a real transaction
(AUTOCOMMIT is refused), and rows it holds locked only while that transaction is alive (after a
failed operation — a deadlock ends the whole transaction on the server — nothing is assumed)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from _support import (
    approve,
    count_rows,
    ctx,
    executor,
    flow_engine,
    manager_approvals,
    migrate,
    raw_row,
)

from flow import FlowEngine, FlowError, Graph, MapContainer, SimpleFlowDriver
from flow.workflow import (
    ActorStateController,
    ConcurrentSubmitError,
    InstanceStatus,
    TaskAction,
    WorkflowExecutor,
)
from flow_sqla import (
    AutocommitError,
    FlowTables,
    RepositoryError,
    SqlStateRepository,
    sql_workflow,
)

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


def _claim_then_lose_a_deadlock(
    db: sa.Engine,
    ex: WorkflowExecutor,
    mine: Any,
    other: str,
    lose: Callable[[], None],
    *,
    claimed_before: bool = False,
) -> Any:
    """After the employees' approvals of ``mine``'s instance and ``other``, claim the
    manager's task in ``mine``'s transaction (``claimed_before``: claimed in an earlier
    transaction already, so this claim writes nothing), then :func:`_lose_a_deadlock`.
    Returns the claimed task."""
    for instance_id in (mine.instance_id, other):
        assert approve(ex, instance_id, "employee", amount=1)
    if claimed_before:
        assert ex.claim_task("oa", ctx(mine.instance_id, "manager")) is not None
    task = ex.claim_task("oa", mine)
    assert task is not None
    _lose_a_deadlock(db, mine.instance_id, other, lose)
    return task


def _lose_a_deadlock(db: sa.Engine, mine: str, other: str, lose: Callable[[], None]) -> None:
    """Let a heavier transaction lock ``other`` and wait for ``mine``'s row, which the
    caller's transaction holds locked, then run ``lose`` — the statement of the caller's
    transaction that waits for ``other`` and loses the deadlock."""
    thread, holds, done = _heavy_transaction_waiting_for(db, other, mine)
    assert holds.wait(TIMEOUT) and _a_lock_waiter_appears(db)
    lose()  # deadlock: this one loses
    thread.join(TIMEOUT)
    assert done == [None]


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
    with db.connect() as conn, conn.begin():
        mine = ctx("dl-a", "manager", conn)

        def lose() -> None:
            with pytest.raises(ConcurrentSubmitError):
                ex.claim_task("oa", ctx("dl-b", "manager", conn))

        task = _claim_then_lose_a_deadlock(db, ex, mine, "dl-b", lose)
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


@pytest.mark.parametrize("claimed_before", [False, True], ids=["claim-writes", "claimed-before"])
@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_after_a_deadlock_of_the_caller_s_own_statement_nothing_of_the_claim_is_trusted(
    db: sa.Engine, claimed_before: bool
) -> None:
    """The caller's transaction claims A, then the caller's *own* statement loses a deadlock
    over B: InnoDB rolls back all of it, the claim's lock on A included. Another transaction
    approves A meanwhile; the caller catches the error, submits its claimed task of A and
    commits. Neither the submit (from the row held before the deadlock) nor the claim's
    write (decided under the lost lock, due at the COMMIT) may land over that approval —
    also when the task was claimed in an earlier request, so that this claim, the first
    operation on the engine in a caller's transaction, writes and defers nothing."""
    ex = executor(db, index=True)
    with db.connect() as conn, conn.begin():
        mine = ctx("od-a", "manager", conn)
        lock_b = "SELECT id FROM bpm_flow_repository WHERE instant_id = 'od-b' FOR UPDATE"

        def lose() -> None:
            with pytest.raises(sa.exc.OperationalError):
                conn.exec_driver_sql(lock_b).all()

        task = _claim_then_lose_a_deadlock(
            db, ex, mine, "od-b", lose, claimed_before=claimed_before
        )
        assert approve(ex, "od-a", "manager")  # another transaction completes A's task
        assert not ex.submit_task_if_waiting(task, TaskAction.FORWARD, mine)
    assert manager_approvals(db, "od-a") == 1
    assert ex.claim_task("oa", ctx("od-a", "manager")) is None  # approved, not WAITING again
    assert ex.open_tasks("od-a") == []


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_after_a_deadlock_of_the_caller_s_own_statement_a_submit_s_row_is_not_trusted(
    db: sa.Engine,
) -> None:
    """``submit_task_at`` in the caller's transaction forwards A's task and leaves A's row
    held; the caller's own statement then loses a deadlock, and InnoDB rolls back all of it
    — the forward, its history row, the lock. A claim after it in the same transaction must
    read A again (the employee's task is still open; the manager has none), and the COMMIT
    must store nothing decided on the row held before the deadlock."""
    ex = executor(db, index=True)
    for instance_id in ("os-a", "os-b"):
        assert ex.claim_task("oa", ctx(instance_id, "employee", amount=1)) is not None
    before = raw_row(db, "os-a")
    with db.connect() as conn, conn.begin():
        ex.submit_task_at("oa", "apply", TaskAction.FORWARD, ctx("os-a", "employee", conn))
        lock_b = "SELECT id FROM bpm_flow_repository WHERE instant_id = 'os-b' FOR UPDATE"

        def lose() -> None:
            with pytest.raises(sa.exc.OperationalError):
                conn.exec_driver_sql(lock_b).all()

        _lose_a_deadlock(db, "os-a", "os-b", lose)
        assert ex.claim_task("oa", ctx("os-a", "manager", conn)) is None
    assert raw_row(db, "os-a") == before
    assert count_rows(db, "bpm_flow_task", "os-a") == 0


def test_two_executors_in_one_transaction_never_approve_twice(db: sa.Engine) -> None:
    """The second executor's submit changes the row the first one's claim left; the first
    one's submit must start from the row as it is now, not from what it wrote itself."""
    _the_first_sees_the_second_s_approval(
        db, executor(db, index=True), executor(db, index=True), "two-1"
    )


def _the_first_sees_the_second_s_approval(
    db: sa.Engine, first: WorkflowExecutor, second: WorkflowExecutor, instance_id: str
) -> None:
    """In one transaction: the first claims the manager's task, the second claims and
    approves it, the first's submit of its claimed task must find it approved."""
    assert approve(first, instance_id, "employee", amount=1)
    with db.connect() as conn, conn.begin():
        c = ctx(instance_id, "manager", conn)
        task = first.claim_task("oa", c)
        assert second.submit_task_if_waiting(second.claim_task("oa", c), TaskAction.FORWARD, c)
        assert not first.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert count_rows(db, "bpm_flow_task", instance_id) == 2  # the employee's, one manager's


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


def _default_schema(db: sa.Engine) -> str:
    """The schema an unqualified table name resolves to, spelled out."""
    return {"sqlite": "main", "postgresql": "public"}.get(db.dialect.name) or str(db.url.database)


def test_two_executors_naming_one_table_two_ways_never_approve_twice(db: sa.Engine) -> None:
    """One executor names the tables without a schema, the other with the default schema
    written out (``main``, ``public``, the current database): the same rows. The second's
    submit changes the row the first one's claim left; the first must not re-use its own."""
    first = executor(db, index=True)
    second = sql_workflow(
        db,
        flow_engine(),
        state_controller=ActorStateController(),
        tables=FlowTables(schema=_default_schema(db)),
    )
    _the_first_sees_the_second_s_approval(db, first, second, "alias-1")


#: SQL of the caller's that ends the transaction on the server behind the Connection's back.
SERVER_ENDS_IT = [
    ("sqlite", "COMMIT"),
    ("sqlite", "ROLLBACK"),
    ("sqlite", "INSERT OR ROLLBACK INTO bpm_flow_repository (id) VALUES (0)"),
    ("postgresql", "COMMIT"),
    ("postgresql", "ROLLBACK"),
]


def _approve_around_a_server_side_end(db: sa.Engine, instance_id: str, sql: str) -> bool:
    """Claim the manager's task in a caller's transaction, let ``sql`` end that transaction
    on the server, have another transaction approve the task, then submit the claimed task;
    returns what that submit returned."""
    ex = executor(db, index=True)
    assert approve(ex, instance_id, "employee", amount=1)
    with db.connect() as conn, conn.begin():
        mine = ctx(instance_id, "manager", conn)
        task = ex.claim_task("oa", mine)
        assert task is not None
        with contextlib.suppress(sa.exc.DBAPIError):  # INSERT OR ROLLBACK fails, as meant
            conn.exec_driver_sql(sql)
        assert approve(ex, instance_id, "manager")  # another transaction approves meanwhile
        return ex.submit_task_if_waiting(task, TaskAction.FORWARD, mine)


@pytest.mark.parametrize(("db_url", "sql"), SERVER_ENDS_IT, indirect=["db_url"])
def test_a_transaction_the_server_ended_is_never_trusted_for_the_row(
    db: sa.Engine, sql: str
) -> None:
    """The caller's own ``COMMIT``/``ROLLBACK`` text, or SQLite's ``INSERT OR ROLLBACK``,
    ends the transaction on the server while SQLAlchemy still calls it active: the claim's
    row lock is gone. The driver says so (sqlite3's ``in_transaction``, libpq's transaction
    status): the submit reads the row again and finds the task approved — no second
    approval."""
    assert not _approve_around_a_server_side_end(db, "end-1", sql)
    assert manager_approvals(db, "end-1") == 1


@pytest.mark.parametrize(("db_url", "sql"), SERVER_ENDS_IT, indirect=["db_url"])
def test_after_a_server_side_end_no_held_row_is_trusted_by_the_next_operation(
    db: sa.Engine, sql: str
) -> None:
    """The same, when the transaction's next operation is on another instance: its locking
    read begins a new transaction on the server, after which the driver shows one open — so
    the check is made at every operation while rows are held, and they are all forgotten."""
    ex = executor(db, index=True)
    for instance_id in ("next-1", "next-2"):
        assert approve(ex, instance_id, "employee", amount=1)
    with db.connect() as conn, conn.begin():
        mine = ctx("next-1", "manager", conn)
        task = ex.claim_task("oa", mine)
        assert task is not None
        with contextlib.suppress(sa.exc.DBAPIError):
            conn.exec_driver_sql(sql)
        assert approve(ex, "next-1", "manager")  # another transaction approves meanwhile
        assert ex.claim_task("oa", ctx("next-2", "manager", conn)) is not None
        assert not ex.submit_task_if_waiting(task, TaskAction.FORWARD, mine)
    assert manager_approvals(db, "next-1") == 1


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_an_aborted_postgresql_transaction_is_an_error_not_a_stale_task(db: sa.Engine) -> None:
    """After a failed statement of the caller's, PostgreSQL refuses everything until the
    rollback: a second claim on that transaction raises instead of answering from the row
    the first one held (which another transaction may have approved since)."""
    ex = executor(db, index=True)
    assert approve(ex, "ab-1", "employee", amount=1)
    with db.connect() as conn, conn.begin():
        c = ctx("ab-1", "manager", conn)
        assert ex.claim_task("oa", c) is not None
        with pytest.raises(sa.exc.DBAPIError):
            conn.exec_driver_sql("SELECT 1 / 0")
        with pytest.raises(RepositoryError):
            ex.claim_task("oa", c)


@pytest.mark.parametrize("db_url", ["mysql", "postgresql"], indirect=True)
def test_an_operation_that_failed_inside_a_savepoint_leaves_nothing_and_the_caller_goes_on(
    db: sa.Engine,
) -> None:
    """transactions.md §2's recipe: the library takes no savepoint per operation, so a caller
    who catches an operation's error to go on wraps the call in one. The recorder fails after
    its INSERT: rolled back to the savepoint, no history row remains, the claim before it
    does, and the submit can be made again in the same transaction."""
    ex = executor(db, index=True)
    history = ex.recorder
    assert history is not None

    class FailingAfterItsRow:
        def record(self, ctx: Any, record: Any) -> None:
            history.record(ctx, record)
            raise RuntimeError("audit hook down")

    with db.connect() as conn, conn.begin():
        c = ctx("sp-1", "employee", conn, amount=1)
        task = ex.claim_task("oa", c)
        ex.recorder = FailingAfterItsRow()  # type: ignore[assignment]
        with pytest.raises(RuntimeError), conn.begin_nested():
            ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        ex.recorder = history
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert count_rows(db, "bpm_flow_task", "sp-1") == 1
    assert [t.node_id for t in ex.open_tasks("sp-1")] == ["manager"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sqlite_s_savepoint_recipe_refuses_a_transaction_ended_by_the_caller_s_commit(
    db: sa.Engine,
) -> None:
    """With SQLAlchemy's pysqlite savepoint recipe (sqlite3 begins nothing itself), the
    caller's raw COMMIT leaves no transaction open: the next operation refuses, saying so,
    and writes nothing."""
    recipe = sa.create_engine(db.url, connect_args={"isolation_level": None})
    sa.event.listen(recipe, "begin", lambda conn: conn.exec_driver_sql("BEGIN"))
    try:
        ex = executor(recipe, index=True)
        assert approve(ex, "rc-1", "employee", amount=1)
        with recipe.connect() as conn, conn.begin():
            c = ctx("rc-1", "manager", conn)
            task = ex.claim_task("oa", c)
            conn.exec_driver_sql("COMMIT")
            with pytest.raises(AutocommitError, match="ended with COMMIT or ROLLBACK"):
                ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
            conn.exec_driver_sql("BEGIN")  # for the block's own COMMIT
    finally:
        recipe.dispose()
    assert manager_approvals(db, "rc-1") == 0


_TASK_FIRST = """
id: g
layout:
  - {id: s, type: start, link: book}
  - {id: book, task: "@book", link: apply}
  - {id: apply, meta: {actor: employee}, link: e}
  - {id: e, type: end}
"""


class _OrderRefused(Exception):
    """The application's own refusal, raised by its task code."""


def _executor_with_task(db: sa.Engine, book: Callable[[Any, Any], None]) -> WorkflowExecutor:
    engine = FlowEngine(SimpleFlowDriver(container=MapContainer({"book": book})))
    engine.load(Graph.from_text(_TASK_FIRST))
    return sql_workflow(db, engine, state_controller=ActorStateController(), index=True)


def test_a_refused_new_instance_whose_row_the_caller_s_code_references_keeps_their_work(
    db: sa.Engine,
) -> None:
    """The caller's task code inserted a row referencing the new instance (a foreign key),
    then refused: removing the empty instance row fails — inside a savepoint, so the
    caller's transaction goes on and commits all of their work (on PostgreSQL the failed
    DELETE aborted it, and the commit lost everything)."""
    id_type = "VARCHAR(64)"
    if db.dialect.name in ("mysql", "mariadb"):  # as the instance id column (flow0003)
        id_type += " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
    with db.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE TABLE orders (instance_id {id_type}, "
                "FOREIGN KEY (instance_id) REFERENCES bpm_flow_repository (instant_id))"
            )
        )

    def book(c: Any, node: Any) -> None:
        c.connection.execute(sa.text("INSERT INTO orders VALUES (:i)"), {"i": c.instance_id})
        raise _OrderRefused("over budget")

    ex = _executor_with_task(db, book)
    with db.begin() as conn:
        with pytest.raises(FlowError, match="book"):
            ex.claim_task("g", ctx("fk-1", "employee", conn))
        conn.execute(sa.text("INSERT INTO orders VALUES (NULL)"))
    assert count_rows(db, "orders") == 2


def test_after_a_database_error_the_task_code_wrapped_nothing_more_is_sent(
    db: sa.Engine,
) -> None:
    """A task whose SQL failed raises its own error from the driver's: the transaction may
    be over on the server (InnoDB rolls it back after a deadlock), so the operation sends
    nothing more — no clean-up DELETE, which would start a new transaction and lock the id."""

    def book(c: Any, node: Any) -> None:
        try:
            c.connection.execute(sa.text("SELECT * FROM no_such_table"))
        except sa.exc.DBAPIError as exc:
            raise _OrderRefused("cannot book") from exc

    ex = _executor_with_task(db, book)
    sent: list[str] = []

    def record(*args: Any) -> None:
        sent.append(str(args[2]))

    sa.event.listen(db, "before_cursor_execute", record)
    try:
        with db.connect() as conn, conn.begin():
            with pytest.raises(FlowError, match="book"):
                ex.claim_task("g", ctx("db-1", "employee", conn))
            failed = next(i for i, sql in enumerate(sent) if "no_such_table" in sql)
            after_error = sent[failed + 1 :]
            conn.rollback()
    finally:
        sa.event.remove(db, "before_cursor_execute", record)
    assert after_error == []


CALL_BACK = """
id: cb
layout:
  - {id: s, type: start, link: apply}
  - {id: apply, meta: {actor: employee}, link: notify}
  - {id: notify, task: '@notify', link: review}
  - {id: review, meta: {actor: manager}, link: e}
  - {id: e, type: end}
"""


def _calling_back(
    db: sa.Engine,
    then: Callable[[], None],
    connection: Callable[[Any], Any] | None = None,
    before: Callable[[], None] = lambda: None,
) -> WorkflowExecutor:
    """An executor whose automatic node ``notify`` terminates ``review`` through the executor
    again, with a context of its own (``connection`` picks what it carries), then ``then()``."""
    container = MapContainer()
    engine = FlowEngine(SimpleFlowDriver(container=container))
    engine.load(Graph.from_text(CALL_BACK))
    ex = sql_workflow(db, engine, state_controller=ActorStateController(), index=True)

    def notify(context: Any, node: Any) -> None:
        before()
        carried = None if connection is None else connection(context)
        own = ctx(context.instance_id, "bot", carried)
        ex.submit_task_at("cb", "review", TaskAction.TERMINATE, own, message="auto")
        then()

    container.put_component("notify", notify)
    return ex


def _fail() -> None:
    raise RuntimeError("mail server down")


def _forward_apply(ex: WorkflowExecutor, instance_id: str) -> None:
    context = ctx(instance_id, "employee")
    task = ex.claim_task("cb", context)
    assert task is not None
    ex.submit_task(task, TaskAction.FORWARD, context)


def _history(db: sa.Engine, instance_id: str) -> list[tuple[Any, ...]]:
    with db.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT source_node_code, message FROM bpm_flow_task "
                "WHERE flow_ins_id = :i ORDER BY id"
            ),
            {"i": instance_id},
        )
        return [tuple(row) for row in rows]


def test_task_code_calling_back_with_its_own_context_writes_in_the_outer_transaction(
    db: sa.Engine,
) -> None:
    """Its history row commits or rolls back with the operation it runs in: a failing outer
    submit leaves no row of the inner one behind (it once committed on its own — and on
    SQLite waited for the outer's write lock, then failed as a 'retryable' conflict)."""
    failing = _calling_back(db, _fail)
    with pytest.raises(FlowError, match="notify"):
        _forward_apply(failing, "cb-1")
    assert _history(db, "cb-1") == []
    # As the claim left it: the applicant's task open, the manager's not (nor terminated).
    assert [task.node_id for task in failing.open_tasks("cb-1")] == ["apply"]

    passing = _calling_back(db, lambda: None)
    _forward_apply(passing, "cb-2")
    assert _history(db, "cb-2") == [("review", "auto"), ("apply", None)]


def test_task_code_calling_back_on_another_connection_is_refused(db: sa.Engine) -> None:
    """Its states would go into one transaction and its history into another."""
    with db.connect() as other:
        ex = _calling_back(db, lambda: None, connection=lambda _: other)
        with pytest.raises(RepositoryError, match="already running in this thread") as raised:
            _forward_apply(ex, "cb-3")
    assert raised.value.instance_id == "cb-3"
    assert _history(db, "cb-3") == []


Component = Callable[[WorkflowExecutor, Any], None]


def _notifying(
    db: sa.Engine, notify: Component, graph: str = CALL_BACK, **more: Component
) -> WorkflowExecutor:
    """An executor whose automatic node ``notify`` runs ``notify(executor, context)`` (and each
    task ``@name`` of ``graph`` its component of ``more``)."""
    container = MapContainer()
    engine = FlowEngine(SimpleFlowDriver(container=container))
    engine.load(Graph.from_text(graph))
    ex = sql_workflow(db, engine, state_controller=ActorStateController(), index=True)
    for name, component in {"notify": notify, **more}.items():
        container.put_component(name, lambda context, node, run=component: run(ex, context))
    return ex


def _refused_with_nothing_written(
    db: sa.Engine, ex: WorkflowExecutor, instance_id: str, match: str | None = None
) -> None:
    """Forwarding the applicant's task fails with a ``RepositoryError`` naming the instance;
    no history row, the applicant's task still the open one."""
    with pytest.raises(RepositoryError, match=match) as raised:
        _forward_apply(ex, instance_id)
    assert raised.value.instance_id == instance_id
    assert _history(db, instance_id) == []
    assert [task.node_id for task in ex.open_tasks(instance_id)] == ["apply"]


def test_a_call_back_that_fails_leaves_nothing_of_its_own(db: sa.Engine) -> None:
    """Task code catches the error of its call back (here the history refusing an assignee
    longer than its column): the call joined the submit, and nothing of it may remain — its
    TERMINATE was once written with the submit, without a history row."""
    raised: list[BaseException] = []

    def notify(ex: WorkflowExecutor, context: Any) -> None:
        bot = ctx(context.instance_id, "bot-" + "x" * 70, context.connection)
        try:
            ex.submit_task_at("cb", "review", TaskAction.TERMINATE, bot, message="auto")
        except FlowError as exc:
            raised.append(exc)

    ex = _notifying(db, notify)
    _forward_apply(ex, "cb-4")
    assert [type(exc).__name__ for exc in raised] == ["UnstorableValueError"]
    assert _history(db, "cb-4") == [("apply", None)]
    assert [task.node_id for task in ex.open_tasks("cb-4")] == ["review"]
    assert "cb:review" not in ex.state_repository.states("cb-4")  # type: ignore[attr-defined]


#: ``CALL_BACK`` whose manager's task runs ``@audit`` when it is forwarded.
_AUDITED = CALL_BACK.replace(
    "{id: review, meta: {actor: manager}, link: e}",
    "{id: review, meta: {actor: manager}, task: '@audit', link: e}",
)


def _audit_then_fail(ex: WorkflowExecutor, context: Any) -> None:
    """Task code that calls back a TERMINATE of the review (a history row), then fails."""
    auditor = ctx(context.instance_id, "auditor", context.connection)
    ex.submit_task_at("cb", "review", TaskAction.TERMINATE, auditor, message="audit-mark")
    raise RuntimeError("audit service down")


def test_a_failed_call_back_leaves_no_history_row_of_a_call_back_inside_it(
    db: sa.Engine,
) -> None:
    """The bot's FORWARD of the review is called back and fails: the review's own task code
    called back a TERMINATE (its history row held back, or sent at once where statements are
    not sent together), then raised. That row describes a step that was undone: it must go
    with the failed call back."""

    def notify(ex: WorkflowExecutor, context: Any) -> None:
        bot = ctx(context.instance_id, "bot", context.connection)
        with contextlib.suppress(FlowError):
            ex.submit_task_at("cb", "review", TaskAction.FORWARD, bot, message="bot-review")

    ex = _notifying(db, notify, _AUDITED, audit=_audit_then_fail)
    _forward_apply(ex, "cb-9")
    assert _history(db, "cb-9") == [("apply", None)]
    assert [task.node_id for task in ex.open_tasks("cb-9")] == ["review"]


def test_task_code_calling_an_executor_of_another_database_on_the_same_id_works(
    db: sa.Engine, tmp_path: Any
) -> None:
    """Mirroring a step to an archive database: the row there is another row, never refused
    as one the running operation is changing."""
    archive_db = migrate(sa.create_engine(f"sqlite:///{tmp_path / 'archive.db'}"))
    try:
        archive = _notifying(archive_db, lambda ex, context: None)
        ex = _notifying(db, lambda ex, context: _forward_apply(archive, context.instance_id))
        _forward_apply(ex, "cb-10")
        assert [task.node_id for task in archive.open_tasks("cb-10")] == ["review"]
        assert [task.node_id for task in ex.open_tasks("cb-10")] == ["review"]
    finally:
        archive_db.dispose()


def test_call_backs_made_from_an_operation_on_another_instance_keep_their_order(
    db: sa.Engine,
) -> None:
    """X's task code calls X back (row ``cb1``), then runs an operation on Y whose task code
    calls X back again (``cb2``), or makes a call back on X that fails after a call back
    inside it wrote a row (``audit-mark``): X's history keeps the order of its steps, and
    holds nothing of the failed one — also though Y's unit is the innermost."""

    def notify(ex: WorkflowExecutor, context: Any) -> None:
        conn = context.connection
        if context.instance_id in ("x-1", "x-2"):
            ex.submit_task_at(
                "cb",
                "review",
                TaskAction.BACK,
                ctx(context.instance_id, "bot", conn),
                message="cb1",
            )
            y = ctx(context.instance_id.replace("x", "y"), "employee", conn)
            ex.submit_task(ex.claim_task("cb", y), TaskAction.FORWARD, y)  # type: ignore[arg-type]
        elif context.instance_id == "y-1":
            ex.submit_task_at(
                "cb", "review", TaskAction.BACK, ctx("x-1", "bot", conn), message="cb2"
            )
        else:
            with contextlib.suppress(FlowError):
                bot = ctx("x-2", "bot", conn)
                ex.submit_task_at("cb", "review", TaskAction.FORWARD, bot, message="bot-review")

    ex = _notifying(db, notify, _AUDITED, audit=_audit_then_fail)
    _forward_apply(ex, "x-1")
    _forward_apply(ex, "x-2")
    assert [message for _, message in _history(db, "x-1")] == ["cb1", "cb2", None]
    assert [message for _, message in _history(db, "x-2")] == ["cb1", None]


#: A trigger refusing the history row whose message is 'refused'.
_REFUSING_TRIGGER = {
    "sqlite": [
        "CREATE TRIGGER no_refused BEFORE INSERT ON bpm_flow_task "
        "WHEN NEW.message = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END"
    ],
    "mysql": [
        "CREATE TRIGGER no_refused BEFORE INSERT ON bpm_flow_task FOR EACH ROW "
        "BEGIN IF NEW.message = 'refused' THEN SIGNAL SQLSTATE '45000' "
        "SET MESSAGE_TEXT = 'refused'; END IF; END"
    ],
    "postgresql": [
        "CREATE FUNCTION no_refused() RETURNS trigger AS $$ BEGIN "
        "IF NEW.message = 'refused' THEN RAISE EXCEPTION 'refused'; END IF; "
        "RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER no_refused BEFORE INSERT ON bpm_flow_task "
        "FOR EACH ROW EXECUTE FUNCTION no_refused()",
    ],
}


def test_a_call_back_s_history_row_the_server_refuses_fails_the_operation(
    db: sa.Engine,
) -> None:
    """The call back's row is held back (so that a failure after it could drop it) and goes
    out with the operation's write: the server's refusal fails the operation with a typed
    error naming the instance, and nothing of it is kept — never a state change without its
    history row."""
    backend = "mysql" if db.dialect.name == "mariadb" else db.dialect.name
    with db.begin() as conn:
        for sql in _REFUSING_TRIGGER[backend]:
            conn.exec_driver_sql(sql)

    def notify(ex: WorkflowExecutor, context: Any) -> None:
        bot = ctx(context.instance_id, "bot", context.connection)
        ex.submit_task_at("cb", "review", TaskAction.TERMINATE, bot, message="refused")

    ex = _notifying(db, notify)
    _refused_with_nothing_written(db, ex, "cb-12")


def test_task_code_calling_another_executor_without_a_connection_is_refused_at_once(
    db: sa.Engine,
) -> None:
    """On a connection of its own the second executor would wait for the row lock its own
    thread holds — until the lock wait ends, or for ever on PostgreSQL."""
    admin = executor(db, index=True)
    admin.engine.load(Graph.from_text(CALL_BACK))

    def notify(ex: WorkflowExecutor, context: Any) -> None:
        admin.submit_task_at("cb", "review", TaskAction.TERMINATE, ctx(context.instance_id, "bot"))

    ex = _notifying(db, notify)
    with pytest.raises(RepositoryError, match="another executor"):
        _forward_apply(ex, "cb-14")
    assert _history(db, "cb-14") == []


def _respelled(url: sa.URL) -> sa.URL:
    """The same database under another URL text."""
    if url.get_backend_name() == "sqlite":
        return url.set(database=str(url.database).replace("/", "/./", 1))
    if url.get_backend_name() == "postgresql":
        return url.update_query_dict({"application_name": "respelled"})
    return url.update_query_dict({"charset": "utf8mb4"})


def test_another_executor_on_the_same_database_under_another_url_is_refused_too(
    db: sa.Engine,
) -> None:
    """What makes the row the same is the connection the call joins, not the URL text."""
    other = sa.create_engine(_respelled(db.url))
    try:
        admin = sql_workflow(
            other, FlowEngine(), state_controller=ActorStateController(), index=True
        )
        admin.engine.load(Graph.from_text(CALL_BACK))

        def notify(ex: WorkflowExecutor, context: Any) -> None:
            bot = ctx(context.instance_id, "bot", context.connection)
            admin.submit_task_at("cb", "review", TaskAction.TERMINATE, bot, message="auto")

        ex = _notifying(db, notify)
        with pytest.raises(RepositoryError, match="another executor"):
            _forward_apply(ex, "cb-13")
        assert _history(db, "cb-13") == []
    finally:
        other.dispose()


def test_a_call_back_inside_a_savepoint_of_task_code_is_refused(db: sa.Engine) -> None:
    """Rolling the savepoint back would undo the call's history row but not its state
    changes, which are the submit's: refused, and the submit fails with nothing written."""

    def notify(ex: WorkflowExecutor, context: Any) -> None:
        with context.connection.begin_nested():
            bot = ctx(context.instance_id, "bot", context.connection)
            ex.submit_task_at("cb", "review", TaskAction.TERMINATE, bot, message="auto")

    ex = _notifying(db, notify)
    _refused_with_nothing_written(db, ex, "cb-5", "outside the savepoint")


def test_task_code_calling_another_executor_on_the_same_instance_is_refused(
    db: sa.Engine,
) -> None:
    """A second executor on the same tables would read the row the running submit is
    changing, and the submit's write would land over its own (its terminated task open
    again, its history saying otherwise): refused, nothing written."""
    admin = executor(db, index=True)
    admin.engine.load(Graph.from_text(CALL_BACK))

    def notify(ex: WorkflowExecutor, context: Any) -> None:
        bot = ctx(context.instance_id, "bot", context.connection)
        admin.submit_task_at("cb", "review", TaskAction.TERMINATE, bot, message="auto")

    ex = _notifying(db, notify)
    _refused_with_nothing_written(db, ex, "cb-6", "another executor")


def test_a_withdraw_that_task_code_calls_back_stands(db: sa.Engine) -> None:
    def notify(ex: WorkflowExecutor, context: Any) -> None:
        assert ex.withdraw("cb", ctx(context.instance_id, "bot", context.connection))

    ex = _notifying(db, notify)
    _forward_apply(ex, "cb-7")
    assert ex.status("cb-7") == InstanceStatus.WITHDRAWN
    assert ex.open_tasks("cb-7") == []
    assert ex.claim_task("cb", ctx("cb-7", "manager")) is None


#: The lock wait a session of this test gives up after (seconds), on the servers.
_LOCK_WAIT = {
    "mysql": {"init_command": "SET SESSION innodb_lock_wait_timeout = 5"},
    "postgresql": {"options": "-c lock_timeout=5000"},
}
_ROW_LOCK_WAITERS = {
    "mysql": "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'",
    "postgresql": (
        "SELECT COUNT(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
    ),
}


def test_task_code_calling_back_without_a_connection_waits_for_no_other_thread(
    db: sa.Engine,
) -> None:
    """The submit runs in the caller's transaction (row locked, no process lock); another
    thread's operation on the instance takes the process lock and waits for the row. The task
    code's call back, with a context of its own, joins the submit — it once took the process
    lock too, and the two threads waited on each other until the other's lock wait ran out."""
    backend = "mysql" if db.dialect.name == "mariadb" else db.dialect.name
    if backend == "sqlite":
        pytest.skip("SQLite serializes every writer on its database lock, not on rows")
    timed = sa.create_engine(db.url, connect_args=_LOCK_WAIT[backend])
    outcome: list[object] = []

    def other_thread() -> None:
        try:
            outcome.append(ex.claim_task("cb", ctx("cb-9", "manager")))
        except Exception as exc:  # the test asserts on it
            outcome.append(exc)

    other = threading.Thread(target=other_thread)

    def start_the_other_and_let_it_wait_for_the_row() -> None:
        other.start()
        pause = threading.Event()
        # Each poll in a transaction of its own (PostgreSQL shows a transaction one snapshot
        # of pg_stat_activity), 0.25 s apart (MariaDB refreshes innodb_trx at most every
        # 0.1 s): polled until the other thread waits, or 30 s — a condition, not a delay.
        probe_engine = timed.execution_options(isolation_level="AUTOCOMMIT")
        with probe_engine.connect() as probe:
            for _ in range(120):
                if probe.execute(sa.text(_ROW_LOCK_WAITERS[backend])).scalar():
                    return
                pause.wait(0.25)
        pytest.fail("the other thread never waited for the instance row")

    try:
        ex = _calling_back(timed, lambda: None, before=start_the_other_and_let_it_wait_for_the_row)
        context = ctx("cb-9", "employee")
        task = ex.claim_task("cb", context)
        assert task is not None
        with timed.begin() as conn:
            mine = ctx("cb-9", "employee", conn)
            ex.submit_task(task, TaskAction.FORWARD, mine)
        other.join(TIMEOUT)
        assert not other.is_alive()
        assert not any(isinstance(found, Exception) for found in outcome), outcome
        assert _history(timed, "cb-9") == [("review", "auto"), ("apply", None)]
    finally:
        timed.dispose()
