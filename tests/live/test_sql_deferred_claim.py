"""A claim in the caller's transaction: its WAITING reaches the row with the submit that
follows (one ``UPDATE`` for both) or just before the caller's ``COMMIT`` — and whichever way
the transaction goes on or ends, the caller sees what an immediate write would have given."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from _support import (
    CLAIMED_STATES,
    approve,
    count_rows,
    counting,
    ctx,
    executor,
    manager_approvals,
    migrate,
    raw_row,
)
from sqlalchemy.orm import Session

from flow import FlowEngine, Graph, MapContainer, SimpleFlowDriver
from flow.workflow import ActorStateController, ConcurrentSubmitError, TaskAction, TaskState
from flow_sqla import _transaction_events, sql_workflow
from flow_sqla._dialect import rolls_back_on_lock_timeout


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _states(db: sa.Engine, instance_id: str) -> dict[str, int] | None:
    row = raw_row(db, instance_id)
    return None if row is None else row["states"]


@pytest.mark.parametrize("index", [False, True])
def test_a_claim_alone_reaches_the_row_when_the_caller_commits(db: sa.Engine, index: bool) -> None:
    ex = executor(db, index=index)
    assert approve(ex, "dc-1", "employee", amount=1)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("dc-1", "manager", conn, note="seen")) is not None
    row = raw_row(db, "dc-1")
    assert row is not None
    assert row["states"] == CLAIMED_STATES
    assert row["vars"]["note"] == "seen"
    if index:
        assert [(t.node_id, t.state) for t in ex.open_tasks("dc-1")] == [
            ("manager", TaskState.WAITING)
        ]


def test_a_claim_on_a_new_instance_commits_its_graph_and_open_task(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("dc-2", "employee", conn, amount=1)) is not None
    row = raw_row(db, "dc-2")
    assert row is not None
    assert row["states"] == {"oa:apply": TaskState.WAITING.value}
    assert row["graph"]["id"] == "oa"
    inbox = ex.inbox(ctx("any", "employee"))
    assert [(t.instance_id, t.state) for t in inbox] == [("dc-2", TaskState.WAITING)]


def test_a_rolled_back_transaction_keeps_nothing_of_the_claim(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    assert approve(ex, "dc-3", "employee", amount=1)
    with db.connect() as conn, conn.begin() as trans:
        assert ex.claim_task("oa", ctx("dc-3", "manager", conn)) is not None
        trans.rollback()
    assert _states(db, "dc-3") == {k: v for k, v in CLAIMED_STATES.items() if k != "oa:manager"}
    assert [t.state for t in ex.open_tasks("dc-3")] == [TaskState.UNKNOWN]


def test_a_savepoint_rolled_back_after_the_claim_keeps_the_claim(db: sa.Engine) -> None:
    """The claim came first: rolling back a later savepoint must not take it along."""
    ex = executor(db, index=True)
    assert approve(ex, "dc-4", "employee", amount=1)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("dc-4", "manager", conn)) is not None
        savepoint = conn.begin_nested()
        conn.execute(sa.text("SELECT 1"))
        savepoint.rollback()
    assert _states(db, "dc-4") == CLAIMED_STATES


def test_a_claim_inside_a_rolled_back_savepoint_is_gone(db: sa.Engine) -> None:
    ex = executor(db)
    assert approve(ex, "dc-5", "employee", amount=1)
    with db.begin() as conn:
        savepoint = conn.begin_nested()
        assert ex.claim_task("oa", ctx("dc-5", "manager", conn)) is not None
        savepoint.rollback()
    assert "oa:manager" not in (_states(db, "dc-5") or {})


def test_the_library_s_reads_on_the_connection_see_the_claim(db: sa.Engine) -> None:
    """The inbox page and restore_context read on the caller's connection: they see the
    transaction's own claim, as they would had it been written at once."""
    ex = executor(db, index=True)
    assert approve(ex, "dc-6", "employee", amount=1)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("dc-6", "manager", conn, note="mine")) is not None
        page = ex.inbox(ctx("any", "manager", conn))
        assert [(t.instance_id, t.state) for t in page] == [("dc-6", TaskState.WAITING)]
        restored = ex.state_repository.restore_context("dc-6", connection=conn)  # type: ignore[attr-defined]
        assert restored.get("note") == "mine"


def test_claims_of_two_instances_in_one_transaction_both_commit(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    for instance_id in ("dc-7", "dc-8"):
        assert approve(ex, instance_id, "employee", amount=1)
    with db.begin() as conn:
        first = ctx("dc-7", "manager", conn)
        task = ex.claim_task("oa", first)
        assert ex.claim_task("oa", ctx("dc-8", "manager", conn)) is not None
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, first)
    assert count_rows(db, "bpm_flow_task", "dc-7") == 2
    assert _states(db, "dc-8") == CLAIMED_STATES
    assert [t.state for t in ex.open_tasks("dc-8")] == [TaskState.WAITING]
    assert ex.open_tasks("dc-7") == []


def test_a_submit_that_fails_before_writing_leaves_the_claim_to_the_commit(
    db: sa.Engine,
) -> None:
    """The caller catches the submit's error and commits: the claim stays, as it would
    had it been written at once; the failed submit left nothing."""
    ex = executor(db, index=True)
    history = ex.recorder
    assert approve(ex, "dc-9", "employee", amount=1)

    class Down:
        def record(self, ctx: Any, record: Any) -> None:
            raise RuntimeError("audit hook down")

    with db.begin() as conn:
        c = ctx("dc-9", "manager", conn)
        task = ex.claim_task("oa", c)
        ex.recorder = Down()  # type: ignore[assignment]
        with pytest.raises(RuntimeError):
            ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        ex.recorder = history
    assert _states(db, "dc-9") == CLAIMED_STATES
    assert count_rows(db, "bpm_flow_task", "dc-9") == 1


def test_commit_of_a_connection_that_began_by_itself(db: sa.Engine) -> None:
    """SQLAlchemy 2.0's commit-as-you-go: each ``conn.commit()`` keeps what came before it,
    each ``conn.rollback()`` drops it."""
    ex = executor(db)
    for instance_id in ("dc-11", "dc-12"):
        assert approve(ex, instance_id, "employee", amount=1)
    with db.connect() as conn:
        assert ex.claim_task("oa", ctx("dc-11", "manager", conn)) is not None
        conn.commit()
        assert ex.claim_task("oa", ctx("dc-12", "manager", conn)) is not None
        conn.rollback()
    assert _states(db, "dc-11") == CLAIMED_STATES
    assert "oa:manager" not in (_states(db, "dc-12") or {})


def test_an_orm_session_s_commit_keeps_the_claim(db: sa.Engine) -> None:
    ex = executor(db)
    assert approve(ex, "dc-13", "employee", amount=1)
    with Session(db) as session:
        assert ex.claim_task("oa", ctx("dc-13", "manager", session.connection())) is not None
        session.commit()
    assert _states(db, "dc-13") == CLAIMED_STATES


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_a_two_phase_commit_keeps_the_claim(db: sa.Engine) -> None:
    ex = executor(db)
    for instance_id in ("dc-14", "dc-15"):
        assert approve(ex, instance_id, "employee", amount=1)
    with db.connect() as conn:
        xa = conn.begin_twophase()
        assert ex.claim_task("oa", ctx("dc-14", "manager", conn)) is not None
        xa.prepare()
        xa.commit()
        xa = conn.begin_twophase()
        assert ex.claim_task("oa", ctx("dc-15", "manager", conn)) is not None
        xa.commit()  # without prepare(): SQLAlchemy prepares it
    assert _states(db, "dc-14") == CLAIMED_STATES
    assert _states(db, "dc-15") == CLAIMED_STATES


def test_the_readme_pattern_sends_one_update_for_the_claim_and_the_submit(db: sa.Engine) -> None:
    ex = executor(db)
    assert approve(ex, "dc-16", "employee", amount=1)
    with counting(db) as counter, db.begin() as conn:
        c = ctx("dc-16", "manager", conn)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
    updates = [sql for sql in counter.statements if sql.lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 1, counter.statements
    assert count_rows(db, "bpm_flow_task", "dc-16") == 2


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_a_rolled_back_two_phase_transaction_leaves_no_claim_behind(db: sa.Engine) -> None:
    """The claim of a rolled-back XA transaction never reaches a later transaction of the
    same connection (another one approved the task meanwhile)."""
    ex = executor(db, index=True)
    assert approve(ex, "dc-20", "employee", amount=1)
    with db.connect() as conn:
        xa = conn.begin_twophase()
        assert ex.claim_task("oa", ctx("dc-20", "manager", conn)) is not None
        xa.rollback()
        assert approve(ex, "dc-20", "manager")  # another transaction approves
        with conn.begin():
            conn.begin_nested().rollback()
            assert ex.inbox(ctx("any", "manager", conn)) == []
    assert manager_approvals(db, "dc-20") == 1
    assert ex.claim_task("oa", ctx("dc-20", "manager")) is None


#: The caller's own SQL ending the transaction on the server, where the driver shows it.
SERVER_ENDS_IT = [
    ("sqlite", "COMMIT"),
    ("sqlite", "ROLLBACK"),
    ("postgresql", "COMMIT"),
    ("postgresql", "ROLLBACK"),
]


@pytest.mark.parametrize("step", ["savepoint", "inbox", "restore_context"])
@pytest.mark.parametrize(("db_url", "sql"), SERVER_ENDS_IT, indirect=["db_url"])
def test_a_claim_whose_transaction_the_server_ended_is_never_sent_later(
    db: sa.Engine, sql: str, step: str
) -> None:
    """Your ``COMMIT``/``ROLLBACK`` text ends the transaction (and the claim's row lock)
    behind the ``Connection``'s back; another transaction approves; the next step of the
    library's on the connection must not write the claim decided under the lost lock."""
    ex = executor(db, index=True)
    assert approve(ex, "dc-21", "employee", amount=1)
    with db.connect() as conn, conn.begin():
        assert ex.claim_task("oa", ctx("dc-21", "manager", conn)) is not None
        conn.exec_driver_sql(sql)
        assert approve(ex, "dc-21", "manager")  # another transaction approves meanwhile
        if step == "savepoint":
            conn.begin_nested().rollback()
        elif step == "inbox":
            assert ex.inbox(ctx("any", "manager", conn)) == []
        else:
            ex.state_repository.restore_context("dc-21", connection=conn)  # type: ignore[attr-defined]
    assert manager_approvals(db, "dc-21") == 1
    assert ex.claim_task("oa", ctx("dc-21", "manager")) is None


#: Makes the claim's write, sent at the COMMIT, wait for a lock another session holds.
LOCK_TIMEOUT = {
    "mysql": "SET SESSION innodb_lock_wait_timeout = 1",
    "postgresql": "SET lock_timeout = '200ms'",
}


@pytest.mark.parametrize("db_url", ["mysql", "postgresql"], indirect=True)
def test_a_claim_s_write_failing_at_the_commit_leaves_no_transaction_open(
    db: sa.Engine,
) -> None:
    """The write sent just before ``conn.commit()`` fails (here: another session holds the
    task's todo rows): the commit raises the library's error, and the server's transaction is
    rolled back with the caller's own writes — not left open for the next commit to keep."""
    ex = executor(db, index=True)
    assert approve(ex, "dc-22", "employee", amount=1)
    with db.begin() as setup:
        setup.exec_driver_sql("CREATE TABLE app_audit (n INTEGER)")
    with db.connect() as locker, locker.begin():
        locker.exec_driver_sql(
            "SELECT * FROM bpm_flow_todo WHERE instant_id = 'dc-22' FOR UPDATE"
        ).all()
        with db.connect() as conn:
            conn.exec_driver_sql(LOCK_TIMEOUT[db.dialect.name.replace("mariadb", "mysql")])
            conn.commit()
            conn.exec_driver_sql("INSERT INTO app_audit VALUES (1)")
            assert ex.claim_task("oa", ctx("dc-22", "manager", conn)) is not None
            with pytest.raises(ConcurrentSubmitError):
                conn.commit()
            conn.rollback()
            conn.exec_driver_sql("INSERT INTO app_audit VALUES (2)")
            conn.commit()
    with db.connect() as check:
        assert [n for (n,) in check.exec_driver_sql("SELECT n FROM app_audit")] == [2]
    assert "oa:manager" not in (_states(db, "dc-22") or {})


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_a_lock_wait_timeout_of_the_caller_s_own_statement_keeps_the_claim(
    db: sa.Engine,
) -> None:
    """MariaDB/MySQL roll back only the statement on a lock wait timeout (``NOWAIT``
    included): the caller's try-lock fails, it goes on and commits — the claim stays."""
    _claim_then_fail_to_lock_another(db, "dc-23", "dc-24")
    assert _states(db, "dc-23") == CLAIMED_STATES


def test_evict_drops_an_unsent_claim_so_that_your_own_sql_wins(db: sa.Engine) -> None:
    """evict() says the row changes behind the library's back: a claim not yet written is
    dropped, never written over your delete (or update) at the commit."""
    ex = executor(db, index=True)
    assert approve(ex, "dc-25", "employee", amount=1)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("dc-25", "manager", conn)) is not None
        ex.state_repository.evict("dc-25")  # type: ignore[attr-defined]
        for table in ("bpm_flow_todo", "bpm_flow_repository"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE instant_id = 'dc-25'"))
    assert raw_row(db, "dc-25") is None
    assert ex.open_tasks("dc-25") == []


def test_evict_given_the_connection_writes_the_claim_first(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    assert approve(ex, "dc-26", "employee", amount=1)
    with db.begin() as conn:
        c = ctx("dc-26", "manager", conn)
        task = ex.claim_task("oa", c)
        ex.state_repository.evict("dc-26", connection=conn)  # type: ignore[attr-defined]
        conn.execute(
            sa.text("UPDATE bpm_flow_repository SET updater = 'app' WHERE instant_id = 'dc-26'")
        )
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert count_rows(db, "bpm_flow_task", "dc-26") == 2


def test_evict_in_another_transaction_keeps_this_transaction_s_claim(db: sa.Engine) -> None:
    """A claim holds the row lock until its transaction ends: another transaction's (or
    thread's) evict cannot mean the row changed under it, and must not drop its write."""
    ex = executor(db, index=True)
    for instance_id in ("dc-27", "dc-28"):
        assert approve(ex, instance_id, "employee", amount=1)
    repository = ex.state_repository
    with db.begin() as conn:
        c = ctx("dc-27", "manager", conn)
        task = ex.claim_task("oa", c)
        with db.connect() as other:
            repository.evict("dc-27", connection=other)  # type: ignore[attr-defined]
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("dc-28", "manager", conn)) is not None
        elsewhere = threading.Thread(target=repository.evict, args=("dc-28",))  # type: ignore[attr-defined]
        elsewhere.start()
        elsewhere.join()
    assert manager_approvals(db, "dc-27") == 1
    assert _states(db, "dc-28") == CLAIMED_STATES


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_a_submit_failing_after_its_row_update_never_sends_the_claim_again(
    db: sa.Engine,
) -> None:
    """The submit's UPDATE (carrying the claim) went out, then its todo DELETE timed out on
    another session's lock; the caller catches the error and commits anyway (the documented
    way is to roll back). The claim must not be sent again over the submit's states: the
    task would be WAITING again and approved a second time."""
    ex = executor(db, index=True)
    assert approve(ex, "dc-29", "employee", amount=1)
    with db.connect() as locker, locker.begin():
        todo = "SELECT * FROM bpm_flow_todo WHERE instant_id = 'dc-29' FOR UPDATE"
        with db.connect() as conn:
            conn.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1")
            conn.commit()
            c = ctx("dc-29", "manager", conn)
            task = ex.claim_task("oa", c)
            locker.exec_driver_sql(todo).all()
            with pytest.raises(ConcurrentSubmitError):
                ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
            conn.commit()
    assert ex.claim_task("oa", ctx("dc-29", "manager")) is None
    assert not approve(ex, "dc-29", "manager")
    assert manager_approvals(db, "dc-29") <= 1


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_the_server_s_rollback_on_timeout_setting_is_read_as_it_is(db: sa.Engine) -> None:
    with db.connect() as conn:
        expected = bool(conn.execute(sa.text("SELECT @@innodb_rollback_on_timeout")).scalar())
        dbapi_connection = conn.connection.dbapi_connection
        assert rolls_back_on_lock_timeout(db.dialect, dbapi_connection) is expected


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_where_a_lock_wait_timeout_ends_the_transaction_the_claim_is_dropped(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a server run with ``innodb_rollback_on_timeout`` (the answer is read once per
    engine; set here as that server would give it), a timeout of the caller's own statement
    has rolled back the claim's row lock with everything else: the claim is never written
    afterwards, over what another transaction approved meanwhile."""
    monkeypatch.setitem(_transaction_events._TIMEOUT_ENDS, db, True)
    _claim_then_fail_to_lock_another(db, "dc-30", "dc-31")
    assert "oa:manager" not in (_states(db, "dc-30") or {})


def _claim_then_fail_to_lock_another(db: sa.Engine, claimed: str, locked: str) -> None:
    """After the employees' approvals, a caller's transaction claims the manager's task of
    ``claimed``, then its own ``NOWAIT`` try-lock of ``locked`` (held by another session)
    fails; the caller goes on and commits."""
    ex = executor(db)
    for instance_id in (claimed, locked):
        assert approve(ex, instance_id, "employee", amount=1)
    lock = f"SELECT id FROM bpm_flow_repository WHERE instant_id = '{locked}' FOR UPDATE"
    with db.connect() as locker, locker.begin():
        locker.exec_driver_sql(lock).all()
        with db.begin() as conn:
            assert ex.claim_task("oa", ctx(claimed, "manager", conn)) is not None
            with pytest.raises(sa.exc.OperationalError):
                conn.exec_driver_sql(lock + " NOWAIT").all()


#: The OA graph whose applicant's task runs task code (``@side_work``) when it is forwarded.
_OA_WITH_TASK_CODE = """
id: oa
layout:
  - {id: start, type: start, link: apply}
  - {id: apply, meta: {actor: employee}, task: "@side_work", link: amount}
  - {id: amount, type: exclusive, link: [{nextId: director, when: amount >= 5000}, manager]}
  - {id: manager, meta: {actor: manager}, link: end}
  - {id: director, meta: {actor: director}, link: end}
  - {id: end, type: end}
"""


def _with_side_work(db: sa.Engine, side_work: Any) -> Any:
    """The OA executor (index on) whose applicant's task runs ``side_work(executor, ctx)``."""
    holder: list[Any] = []
    container = MapContainer()
    container.put_component("side_work", lambda c, node: side_work(holder[0], c))
    engine = FlowEngine(SimpleFlowDriver(container=container))
    engine.load(Graph.from_text(_OA_WITH_TASK_CODE))
    holder.append(sql_workflow(db, engine, state_controller=ActorStateController(), index=True))
    return holder[0]


def _savepoint(ex: Any, c: Any) -> None:
    with c.connection.begin_nested():  # the documented way to make task code's SQL recoverable
        c.connection.execute(sa.text("SELECT 1"))


def _status_of_another(ex: Any, c: Any) -> None:
    ex.status("dc-other", connection=c.connection)


def _claim_of_another(ex: Any, c: Any) -> None:
    assert ex.claim_task("oa", ctx("dc-other", "employee", c.connection, amount=1)) is not None


@pytest.mark.parametrize(
    "side_work",
    [_savepoint, _status_of_another, _claim_of_another],
    ids=["savepoint", "status-of-another", "claim-of-another"],
)
def test_a_claim_sent_while_its_submit_runs_is_not_folded_into_the_submit_again(
    db: sa.Engine, side_work: Any
) -> None:
    """The README pattern on a new instance, whose forwarded task's code makes the
    connection send the claim's deferred write in the middle of the submit (a savepoint,
    another instance's status or claim on ``ctx.connection``): the submit must then write
    from the row as the claim left it. Folded in again, its todo rows were computed from
    the index before the claim: the completed task stayed in the applicant's inbox, and a
    later send-back to it hit the todo table's unique key."""
    ex = _with_side_work(db, side_work)
    with db.begin() as conn:
        c = ctx("dc-new", "employee", conn, amount=1)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
    assert [t.instance_id for t in ex.inbox(ctx("any", "employee"))] == (
        ["dc-other"] if side_work is _claim_of_another else []
    )
    assert [(t.node_id, t.state) for t in ex.open_tasks("dc-new")] == [
        ("manager", TaskState.UNKNOWN)
    ]
    row = raw_row(db, "dc-new")
    assert row is not None and row["graph"]["id"] == "oa"
    assert count_rows(db, "bpm_flow_task", "dc-new") == 1
    with db.begin() as conn:
        c = ctx("dc-new", "manager", conn)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.BACK, c)
    assert [(t.node_id, t.state) for t in ex.open_tasks("dc-new")] == [
        ("apply", TaskState.UNKNOWN)
    ]


def test_a_claim_deferred_while_another_claim_runs_is_kept(db: sa.Engine) -> None:
    """An interceptor of the claim of one instance claims another on the same connection:
    both claims' writes are kept for the COMMIT (one is deferred per connection: the
    other's is sent first). Replaced by the outer claim's, the inner claim was lost and
    left its instance a row with no states."""
    from flow.interceptor import FlowInterceptor

    holder: list[Any] = []

    class ClaimsAnother(FlowInterceptor):
        def on_node_start(self, c: Any, node: Any) -> None:
            if c.instance_id == "dc-outer" and node.id == "apply":
                holder[0].claim_task("oa", ctx("dc-inner", "employee", c.connection, amount=1))

    engine = FlowEngine()
    engine.load(Graph.from_text(_OA_WITH_TASK_CODE.replace(', task: "@side_work"', "")))
    engine.add_interceptor(ClaimsAnother())
    holder.append(sql_workflow(db, engine, state_controller=ActorStateController(), index=True))
    ex = holder[0]
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("dc-outer", "employee", conn, amount=1)) is not None
    for instance_id in ("dc-outer", "dc-inner"):
        assert _states(db, instance_id) == {"oa:apply": TaskState.WAITING.value}
    inbox = ex.inbox(ctx("any", "employee"))
    assert sorted(t.instance_id for t in inbox) == ["dc-inner", "dc-outer"]
