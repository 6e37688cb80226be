"""The documented statement budget per operation (BEGIN/COMMIT are not counted)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from _support import approve, count_rows, counting, ctx, executor, migrate

from flow.workflow import TaskAction, TaskState, WorkflowExecutor


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def test_first_claim_on_a_new_instance_takes_two_statements(db: sa.Engine) -> None:
    """Creating the row (which also locks it) and writing the claim: no read back."""
    ex = executor(db)
    with counting(db) as counter:
        ex.claim_task("oa", ctx("b-1", "employee", amount=1))
    assert counter.count <= 2, counter.statements


def test_first_submit_on_a_new_instance_takes_at_most_three_statements(db: sa.Engine) -> None:
    ex = executor(db)
    with counting(db) as counter:
        ex.submit_task_at("oa", "apply", TaskAction.FORWARD, ctx("b-5", "employee", amount=1))
    assert counter.count <= 3, counter.statements


def test_forward_submit_takes_at_most_three_statements(db: sa.Engine) -> None:
    ex = executor(db)
    c = ctx("b-2", "employee", amount=1)
    task = ex.claim_task("oa", c)
    with counting(db) as counter:
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert counter.count <= 3, counter.statements


def test_claim_that_changes_nothing_takes_at_most_one_statement(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "b-3", "employee", amount=1)
    ex.claim_task("oa", ctx("b-3", "manager"))
    with counting(db) as counter:
        task = ex.claim_task("oa", ctx("b-3", "manager"))
    assert task is not None
    assert counter.count <= 1, counter.statements


def test_warm_claim_in_process_cache_mode_takes_no_statement(db: sa.Engine) -> None:
    ex = executor(db, cache="process")
    approve(ex, "b-4", "employee", amount=1)
    ex.claim_task("oa", ctx("b-4", "manager"))
    with counting(db) as counter:
        task = ex.claim_task("oa", ctx("b-4", "manager"))
    assert task is not None
    assert counter.count == 0, counter.statements


def _claim_and_submit(ex: WorkflowExecutor, conn: sa.Connection, instance_id: str) -> bool:
    c = ctx(instance_id, "manager", conn)
    task = ex.claim_task("oa", c)
    return ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)


def test_readme_pattern_takes_at_most_three_statements(db: sa.Engine) -> None:
    """Claim + submit in one caller transaction: the submit reuses the row the claim locked
    and its write is folded into the submit's (lock-read, history insert, one update)."""
    ex = executor(db)
    approve(ex, "b-6", "employee", amount=1)
    with counting(db) as counter, db.begin() as conn:
        assert _claim_and_submit(ex, conn, "b-6")
    assert counter.count <= 3, counter.statements
    assert count_rows(db, "bpm_flow_task", "b-6") == 2


def test_a_claim_alone_in_a_caller_transaction_takes_two_statements(db: sa.Engine) -> None:
    """Locked read, and the claim's update sent just before the caller's COMMIT."""
    ex = executor(db)
    approve(ex, "b-9", "employee", amount=1)
    with counting(db) as counter, db.begin() as conn:
        assert ex.claim_task("oa", ctx("b-9", "manager", conn)) is not None
    assert counter.count <= 2, counter.statements
    assert any(sql.lstrip().upper().startswith("UPDATE") for sql in counter.statements)


def test_a_new_transaction_reads_the_row_again(db: sa.Engine) -> None:
    """What a committed transaction left is never trusted by the next one: another process
    may have changed the row in between."""
    ex = executor(db)
    approve(ex, "b-7", "employee", amount=1)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("b-7", "manager", conn)) is not None
    approve(executor(db), "b-7", "manager")  # another worker approves meanwhile
    with db.begin() as conn:
        assert not _claim_and_submit(ex, conn, "b-7")
    assert count_rows(db, "bpm_flow_task", "b-7") == 2  # one approval each, none twice


def test_a_rolled_back_savepoint_makes_the_next_operation_read_again(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "b-8", "employee", amount=1)
    with db.begin() as conn:
        savepoint = conn.begin_nested()
        assert ex.claim_task("oa", ctx("b-8", "manager", conn)) is not None
        savepoint.rollback()  # the claim's WAITING is gone again
        c = ctx("b-8", "manager", conn)
        task = ex.claim_task("oa", c)
        assert task is not None
        assert task.state is TaskState.WAITING
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert count_rows(db, "bpm_flow_task", "b-8") == 2
