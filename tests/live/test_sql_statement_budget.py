"""The documented statement budget per operation (BEGIN/COMMIT are not counted)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from _support import approve, counting, ctx, executor, migrate

from flow.workflow import TaskAction


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
