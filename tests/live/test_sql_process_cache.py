"""``cache="process"`` used by two processes anyway (two repository objects): a cached row
that another process has changed since must never be written back over the newer state."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from _support import APPLIED_STATES, approve, count_rows, ctx, executor, migrate, raw_row

from flow.workflow import ConcurrentSubmitError, TaskAction, TaskState, WorkflowExecutor
from flow_sqla import StaleCacheError

DONE_STATES = {**APPLIED_STATES, "oa:manager": 1002}


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


TIMEOUT = 30.0


def _claim_retrying(ex: WorkflowExecutor, instance_id: str, actor: str) -> object:
    """What a caller does with a retryable error: try once more."""
    try:
        return ex.claim_task("oa", ctx(instance_id, actor))
    except ConcurrentSubmitError as exc:
        assert exc.retryable
        return ex.claim_task("oa", ctx(instance_id, actor))


def test_a_stale_claim_never_brings_a_completed_task_back_to_waiting(db: sa.Engine) -> None:
    first, second = executor(db, cache="process"), executor(db, cache="process")
    assert approve(first, "pc-1", "employee", amount=1)  # ``first`` caches APPLIED
    assert approve(second, "pc-1", "manager")  # committed elsewhere: manager COMPLETED
    with pytest.raises(StaleCacheError) as caught:
        first.claim_task("oa", ctx("pc-1", "manager"))
    assert caught.value.retryable and caught.value.instance_id == "pc-1"
    assert raw_row(db, "pc-1")["states"] == DONE_STATES  # type: ignore[index]
    assert first.claim_task("oa", ctx("pc-1", "manager")) is None  # the retry reads fresh


def test_a_stale_process_cache_cannot_approve_twice(db: sa.Engine) -> None:
    first, second = executor(db, cache="process"), executor(db, cache="process")
    assert approve(first, "pc-2", "employee", amount=1)
    assert approve(second, "pc-2", "manager")
    task = _claim_retrying(first, "pc-2", "manager")
    c = ctx("pc-2", "manager")
    assert not first.submit_task_if_waiting(task, TaskAction.FORWARD, c)  # type: ignore[arg-type]
    assert count_rows(db, "bpm_flow_task", "pc-2") == 2  # employee + manager, once each
    assert raw_row(db, "pc-2")["states"] == DONE_STATES  # type: ignore[index]


def test_stale_vars_are_not_written_back_either(db: sa.Engine) -> None:
    first, second = executor(db, cache="process"), executor(db, cache="process")
    assert approve(first, "pc-3", "employee", amount=1)
    second.claim_task("oa", ctx("pc-3", "manager", note="from second"))
    with pytest.raises(StaleCacheError):
        first.claim_task("oa", ctx("pc-3", "manager", other="from first"))
    assert raw_row(db, "pc-3")["vars"] == {"amount": 1, "note": "from second"}  # type: ignore[index]


def test_a_fresh_cache_still_writes_its_claim(db: sa.Engine) -> None:
    ex = executor(db, cache="process")
    assert approve(ex, "pc-4", "employee", amount=1)
    task = ex.claim_task("oa", ctx("pc-4", "manager"))
    assert task is not None and task.node.id == "manager"
    assert raw_row(db, "pc-4")["states"] == {**APPLIED_STATES, "oa:manager": 1001}  # type: ignore[index]
    assert approve(ex, "pc-4", "manager")
    assert raw_row(db, "pc-4")["states"] == DONE_STATES  # type: ignore[index]


def test_a_nested_locking_operation_refuses_changes_made_on_a_stale_row(db: sa.Engine) -> None:
    from _support import oa_graph

    from flow.workflow import TaskState
    from flow_sqla import SqlStateRepository

    first, second = executor(db, cache="process"), executor(db, cache="process")
    repo = first.state_repository
    assert isinstance(repo, SqlStateRepository)
    assert approve(first, "pc-5", "employee", amount=1)
    assert approve(second, "pc-5", "manager")
    manager = oa_graph().get_node("manager")
    c = ctx("pc-5", "manager")
    with pytest.raises(StaleCacheError), repo.unit_of_work(c, lock=False):
        repo.state_put(c, manager, TaskState.WAITING)
        with repo.unit_of_work(c, lock=True):
            pass
    assert raw_row(db, "pc-5")["states"] == DONE_STATES  # type: ignore[index]


def test_a_claim_served_from_the_cache_that_writes_takes_two_statements(db: sa.Engine) -> None:
    """The re-read under the row lock, then the update; a warm claim that writes nothing
    stays at zero (test_sql_statement_budget)."""
    from _support import counting

    ex = executor(db, cache="process")
    assert approve(ex, "pc-6", "employee", amount=1)  # cached: APPLIED, manager not yet
    with counting(db) as counter:
        task = ex.claim_task("oa", ctx("pc-6", "manager"))
    assert task is not None and task.node.id == "manager"
    assert counter.count == 2, counter.statements


def test_an_operation_in_a_callers_transaction_is_not_undone_in_the_cache_by_an_earlier_one(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Operations in a caller's transaction take no process lock. One may lock the row right
    after another thread's own operation committed — and drop the cache entry before that
    operation caches its (now older) row; the older row must then not be cached."""
    import threading

    from flow_sqla.repository import SqlStateRepository

    ex = executor(db, cache="process", index=True)
    approve(ex, "pc-1", "employee", amount=1)
    committed, go_on = threading.Event(), threading.Event()
    remember = SqlStateRepository._remember

    def between_commit_and_cache(self: SqlStateRepository, op: object, **kw: object) -> None:
        if kw.get("cache") and threading.current_thread().name == "claimer":
            committed.set()
            go_on.wait(TIMEOUT)
        remember(self, op, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SqlStateRepository, "_remember", between_commit_and_cache)
    claimer = threading.Thread(
        target=ex.claim_task, args=("oa", ctx("pc-1", "manager")), name="claimer"
    )
    claimer.start()
    assert committed.wait(TIMEOUT)  # the manager's claim is committed, not yet cached
    with db.begin() as conn:  # the README pattern approves meanwhile
        c = ctx("pc-1", "manager", conn)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
    go_on.set()
    claimer.join(TIMEOUT)
    assert ex.claim_task("oa", ctx("pc-1", "manager")) is None  # not the cached WAITING task
    found = ex.find_task("oa", ctx("pc-1", "manager"))
    assert found is None or found.state != TaskState.WAITING
