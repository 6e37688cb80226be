"""Several OS processes on the same instances: exactly one winner, no lost update, no
deadlock on new instances, and a lock conflict surfaces as ConcurrentSubmitError."""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from _support import CLAIMED_STATES, approve, count_rows, ctx, executor, migrate, raw_row
from _workers import drive_instances, race_one_task

from flow.workflow import ConcurrentSubmitError, TaskAction

PROCESSES = 8
WORKER_DEADLINE = 180.0
DONE_STATES = {**CLAIMED_STATES, "oa:manager": 1002}
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _url(db: sa.Engine) -> str:
    return db.url.render_as_string(hide_password=False)


def _run(target: Callable[..., None], args_for: Callable[[int], tuple[Any, ...]]) -> list[Any]:
    """Start PROCESSES workers together (a Barrier) and collect one result from each.

    Fails fast (and terminates the others) when a worker dies without reporting."""
    barrier = SPAWN.Barrier(PROCESSES)
    results = SPAWN.Queue()
    procs = [
        SPAWN.Process(target=target, args=(*args_for(i), i, barrier, results), daemon=True)
        for i in range(PROCESSES)
    ]
    collected: list[tuple[int, Any]] = []
    deadline = time.monotonic() + WORKER_DEADLINE
    try:
        for proc in procs:
            proc.start()
        while len(collected) < PROCESSES:
            try:
                collected.append(results.get(timeout=1))
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                assert not dead, f"worker(s) died without reporting: exit codes {dead}"
                assert time.monotonic() < deadline, "workers did not finish in time"
    finally:
        for proc in procs:
            if proc.is_alive() and len(collected) < PROCESSES:
                proc.terminate()
            proc.join(timeout=30)
        results.close()
        results.join_thread()
    errors = [r for _, r in collected if isinstance(r, str)]
    assert not errors, errors
    return [r for _, r in sorted(collected, key=lambda item: item[0])]


@pytest.mark.slow
def test_racing_processes_forward_a_waiting_task_exactly_once(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "race-1", "employee", amount=1)
    ex.claim_task("oa", ctx("race-1", "manager"))
    outcomes = _run(race_one_task, lambda i: (_url(db), "race-1"))
    assert sorted(outcomes) == [False] * (PROCESSES - 1) + [True]
    assert count_rows(db, "bpm_flow_task", "race-1") == 2
    assert raw_row(db, "race-1")["states"] == DONE_STATES  # type: ignore[index]


@pytest.mark.slow
def test_processes_driving_shared_instances_lose_no_update(db: sa.Engine) -> None:
    ids = [f"shared-{n}" for n in range(10)]
    outcomes = _run(drive_instances, lambda i: (_url(db), ids))
    assert sum(won for won, _ in outcomes) == 2 * len(ids)
    for instance_id in ids:
        assert raw_row(db, instance_id)["states"] == DONE_STATES  # type: ignore[index]
        assert count_rows(db, "bpm_flow_task", instance_id) == 2


@pytest.mark.slow
def test_new_instances_started_concurrently_do_not_deadlock(db: sa.Engine) -> None:
    outcomes = _run(drive_instances, lambda i: (_url(db), [f"new-{i}-{n}" for n in range(10)]))
    assert outcomes == [(20, 0)] * PROCESSES
    assert count_rows(db, "bpm_flow_task") == PROCESSES * 20


def _impatient_engine(db: sa.Engine) -> sa.Engine:
    """An engine on the same database whose lock waits give up quickly."""
    url = db.url
    if db.dialect.name == "sqlite":
        return sa.create_engine(url, connect_args={"timeout": 0.05})
    if db.dialect.name == "postgresql":
        return sa.create_engine(url, connect_args={"options": "-c lock_timeout=100"})
    return sa.create_engine(
        url, connect_args={"init_command": "SET SESSION innodb_lock_wait_timeout=1"}
    )


def test_a_held_row_lock_surfaces_as_concurrent_submit_error(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "lock-1", "employee", amount=1)
    ex.claim_task("oa", ctx("lock-1", "manager"))
    impatient = _impatient_engine(db)
    try:
        other = executor(impatient)
        c = ctx("lock-1", "manager")
        task = other.claim_task("oa", c)
        with db.connect() as holder:
            holder.begin()
            holder.execute(
                sa.text("UPDATE bpm_flow_repository SET updater = 'holder' WHERE instant_id = :i"),
                {"i": "lock-1"},
            )
            with pytest.raises(ConcurrentSubmitError) as caught:
                other.submit_task_if_waiting(task, TaskAction.FORWARD, c)
            holder.rollback()
        assert caught.value.instance_id == "lock-1"
        assert impatient.pool.checkedout() == 0  # type: ignore[attr-defined]
    finally:
        impatient.dispose()
    assert raw_row(db, "lock-1")["states"] == CLAIMED_STATES  # type: ignore[index]
    assert count_rows(db, "bpm_flow_task", "lock-1") == 1
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx("lock-1", "manager"))
