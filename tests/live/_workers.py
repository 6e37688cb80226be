"""Worker functions run in spawned OS processes by test_sql_concurrency.py.

Each worker builds its own engine and executor from the URL (nothing is inherited) and reports
through a queue: ``(worker, result)`` or ``(worker, "error: ...")``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from _support import approve, ctx, executor

from flow.workflow import ConcurrentSubmitError, TaskAction

_RETRIES = 50
BARRIER_TIMEOUT = 120.0


def _engine(url: str) -> sa.Engine:
    """SQLite serializes writers on one database lock, waiting up to the busy timeout (5 s by
    default) before "database is locked": on a loaded machine that wait alone would count as a
    retry. These tests look for deadlocks, so SQLite writers wait up to a minute."""
    if url.startswith("sqlite"):
        return sa.create_engine(url, poolclass=sa.NullPool, connect_args={"timeout": 60})
    return sa.create_engine(url, poolclass=sa.NullPool)


def race_one_task(url: str, instance_id: str, worker: int, barrier: Any, results: Any) -> None:
    """Claim the manager task, wait for every worker, then try to forward it."""
    engine = _engine(url)
    try:
        ex = executor(engine)
        c = ctx(instance_id, "manager")
        task = ex.claim_task("oa", c)
        barrier.wait(timeout=BARRIER_TIMEOUT)
        results.put((worker, ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)))
    except BaseException as exc:
        results.put((worker, f"error: {exc!r}"))
    finally:
        engine.dispose()


def drive_instances(
    url: str, instance_ids: list[str], worker: int, barrier: Any, results: Any
) -> None:
    """Try to approve every instance (employee, then manager) until each has reached its
    end; retries only on ConcurrentSubmitError. Reports how many approvals this worker won
    and how many retries it needed."""
    engine = _engine(url)
    try:
        ex = executor(engine)
        barrier.wait(timeout=BARRIER_TIMEOUT)
        won = retries = 0
        for actor in ("employee", "manager"):
            for instance_id in instance_ids:
                for _ in range(_RETRIES):
                    try:
                        won += approve(ex, instance_id, actor, amount=1)
                        break
                    except ConcurrentSubmitError:
                        retries += 1
        results.put((worker, (won, retries)))
    except BaseException as exc:
        results.put((worker, f"error: {exc!r}"))
    finally:
        engine.dispose()


def upgrade_at_once(url: str, worker: int, barrier: Any, results: Any) -> None:
    """Wait for every worker, then run ``migrations.upgrade`` on the shared database; report
    ``"ok"`` or the error's type and message."""
    from flow_sqla import migrations

    try:
        barrier.wait(timeout=BARRIER_TIMEOUT)
        migrations.upgrade(url)
        results.put((worker, "ok"))
    except BaseException as exc:
        results.put((worker, f"{type(exc).__name__}: {exc}"))


def upgrade_pausing_in_the_lock(
    url: str, schema: str | None, held: Any, release: Any, results: Any
) -> None:
    """Run ``migrations.upgrade(url, schema=schema)``, pausing once inside its migration lock
    (``held`` set) until ``release`` is set; report ``"ok"`` or the error's type and message.

    A process of its own: Alembic's ``context`` is one per process, so two upgrades cannot
    overlap in threads."""
    from flow_sqla import migrations
    from flow_sqla.migrations import _runner

    migrate = _runner._migrate

    def paused(*args: Any) -> None:
        held.set()
        release.wait(timeout=BARRIER_TIMEOUT)
        migrate(*args)

    _runner._migrate = paused
    try:
        migrations.upgrade(url, schema=schema)
        results.put("ok")
    except BaseException as exc:
        held.set()
        results.put(f"{type(exc).__name__}: {exc}")


__all__ = ["drive_instances", "race_one_task", "upgrade_at_once", "upgrade_pausing_in_the_lock"]
