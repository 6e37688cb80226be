"""Atomicity: a submit's state change and history row commit or vanish together, with the
caller's transaction, and the process cache never outlives a rollback."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from _support import CLAIMED_STATES, approve, count_rows, ctx, executor, migrate, raw_row

from flow.workflow import TaskAction, TaskRecord, TaskState, WorkflowExecutor
from flow_sqla import SqlStateRepository, TaskHistoryRecorder


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


class Boom(Exception):
    pass


@pytest.mark.parametrize("cache", ["operation", "process"])
def test_rolled_back_caller_transaction_leaves_no_rows(db: sa.Engine, cache: str) -> None:
    ex = executor(db, cache=cache)
    with db.connect() as conn:
        tx = conn.begin()
        c = ctx("rb-1", "employee", conn, amount=10)
        task = ex.claim_task("oa", c)
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        tx.rollback()
    assert count_rows(db, "bpm_flow_repository") == 0
    assert count_rows(db, "bpm_flow_task") == 0


@pytest.mark.parametrize("cache", ["operation", "process"])
def test_after_a_caller_rollback_the_next_operation_sees_the_old_state(
    db: sa.Engine, cache: str
) -> None:
    ex = executor(db, cache=cache)
    approve(ex, "rb-2", "employee", amount=10)
    ex.claim_task("oa", ctx("rb-2", "manager"))
    with db.connect() as conn:
        tx = conn.begin()
        c = ctx("rb-2", "manager", conn)
        task = ex.claim_task("oa", c)
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        tx.rollback()
    task = ex.claim_task("oa", ctx("rb-2", "manager"))
    assert task is not None and task.node_id == "manager"
    assert raw_row(db, "rb-2")["states"] == CLAIMED_STATES  # type: ignore[index]
    assert count_rows(db, "bpm_flow_task", "rb-2") == 1


def test_caller_transaction_commits_flow_rows_with_their_own_rows(db: sa.Engine) -> None:
    ex = executor(db)
    with db.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS expense (id VARCHAR(64))"))
    with db.begin() as conn:
        conn.execute(sa.text("INSERT INTO expense (id) VALUES ('e-1')"))
        c = ctx("e-1", "employee", conn, amount=10)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
    assert count_rows(db, "bpm_flow_task", "e-1") == 1
    assert count_rows(db, "expense") == 1


class FailingRecorder(TaskHistoryRecorder):
    def record(self, ctx: object, record: TaskRecord) -> None:  # type: ignore[override]
        raise Boom("history unavailable")


@pytest.mark.parametrize("cache", ["operation", "process"])
def test_a_failing_recorder_rolls_back_the_state_change(db: sa.Engine, cache: str) -> None:
    good = executor(db, cache=cache)
    approve(good, "rf-1", "employee", amount=10)
    good.claim_task("oa", ctx("rf-1", "manager"))
    bad = WorkflowExecutor(
        good.engine,
        good.state_controller,
        good.state_repository,
        recorder=FailingRecorder(db),
    )
    c = ctx("rf-1", "manager")
    task = bad.claim_task("oa", c)
    with pytest.raises(Boom):
        bad.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert raw_row(db, "rf-1")["states"] == CLAIMED_STATES  # type: ignore[index]
    task = good.claim_task("oa", ctx("rf-1", "manager"))
    assert task is not None and task.node_id == "manager"


def test_a_failing_task_in_a_submit_leaves_no_trace(db: sa.Engine) -> None:
    ex = executor(db)
    repo: SqlStateRepository = ex.state_repository  # type: ignore[assignment]
    approve(ex, "tf-1", "employee", amount=10)
    ex.claim_task("oa", ctx("tf-1", "manager"))
    with pytest.raises(Boom), repo.unit_of_work(ctx("tf-1", "manager"), lock=True):
        repo.state_clear(ctx("tf-1", "manager"))
        raise Boom
    assert raw_row(db, "tf-1")["states"] == CLAIMED_STATES  # type: ignore[index]


def test_the_unit_of_work_lends_its_connection_to_the_context(db: sa.Engine) -> None:
    repo = SqlStateRepository(db)
    c = ctx("lend-1", "employee")
    with repo.unit_of_work(c, lock=True):
        assert isinstance(c.connection, sa.Connection)
        assert c.connection.in_transaction()
    assert c.connection is None


def test_a_new_instance_rolled_back_by_the_caller_can_be_started_again(db: sa.Engine) -> None:
    ex = executor(db)
    with db.connect() as conn:
        tx = conn.begin()
        c = ctx("again-1", "employee", conn, amount=10)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        tx.rollback()
    assert approve(ex, "again-1", "employee", amount=10)
    assert count_rows(db, "bpm_flow_task", "again-1") == 1


def test_a_locking_unit_of_work_nested_in_a_cached_one_writes_through(db: sa.Engine) -> None:
    ex = executor(db, cache="process")
    repo: SqlStateRepository = ex.state_repository  # type: ignore[assignment]
    approve(ex, "nest-1", "employee", amount=10)
    c = ctx("nest-1", "manager")
    manager = ex.engine.get_graph_or_throw("oa").get_node_or_throw("manager")
    with repo.unit_of_work(c, lock=False), repo.unit_of_work(c, lock=True):
        repo.state_put(c, manager, TaskState.TERMINATED)
    assert raw_row(db, "nest-1")["states"]["oa:manager"] == 1003  # type: ignore[index]
