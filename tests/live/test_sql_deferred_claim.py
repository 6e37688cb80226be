"""A claim in the caller's transaction: its WAITING reaches the row with the submit that
follows (one ``UPDATE`` for both) or just before the caller's ``COMMIT`` — and whichever way
the transaction goes on or ends, the caller sees what an immediate write would have given."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from _support import CLAIMED_STATES, approve, count_rows, counting, ctx, executor, migrate, raw_row
from sqlalchemy.orm import Session

from flow.workflow import TaskAction, TaskState


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


def test_evict_between_the_claim_and_the_submit_keeps_both(db: sa.Engine) -> None:
    ex = executor(db)
    assert approve(ex, "dc-10", "employee", amount=1)
    with db.begin() as conn:
        c = ctx("dc-10", "manager", conn)
        task = ex.claim_task("oa", c)
        ex.state_repository.evict("dc-10")  # type: ignore[attr-defined]
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert count_rows(db, "bpm_flow_task", "dc-10") == 2
    assert ex.claim_task("oa", ctx("dc-10", "manager")) is None


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
