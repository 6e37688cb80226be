"""Approvals per second on a 3-node MariaDB Galera cluster: workers on one node vs spread over
three, on disjoint instances and on one hot instance, for N = 1, 4, 16 workers.

Usage: ``python bench/galera_bench.py [--workers 1,4,16] [--seconds 5]``. The nodes come from
``FLOW_GALERA_DSNS`` (one URL per node, comma-separated; ``python -m tests.galera.cluster start
DIR`` prints it); the script creates a throwaway database through node 1 and drops it after.

Each of N worker processes (started once per N) runs every cell for ``--seconds``, all workers
of a cell starting together. A unit of work is the README pattern — ``claim_task`` then
``submit_task_if_waiting`` in one transaction — run by ``flow_sqla.run_in_transaction``
(``idempotent=True``, 10 attempts). *disjoint*: every worker drives its own new OA instances to
their end (employee, then manager: two approvals each). *hot*: all workers work on the same
instance until someone's manager approval ends it, then all move to the next one. Columns:
approvals/s (submits that returned True), retries (conflicts re-run by the helper: deadlocks,
lock waits and — across nodes — certification failures), lost (units that found the task
decided by someone else: False), errors (units that gave up). See docs/scaling.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flow.context import FlowContext  # noqa: E402
from flow.engine import FlowEngine  # noqa: E402
from flow.errors import FlowError  # noqa: E402
from flow.graph import Graph  # noqa: E402
from flow.workflow import ActorStateController, TaskAction, WorkflowExecutor  # noqa: E402
from flow_sqla import migrations, run_in_transaction, sql_workflow  # noqa: E402

CELLS = [("1 node", "disjoint"), ("3 nodes", "disjoint"), ("1 node", "hot"), ("3 nodes", "hot")]
BARRIER_TIMEOUT = 300.0


def executor(engine: sa.Engine) -> WorkflowExecutor:
    flow_engine = FlowEngine()
    flow_engine.load(Graph.from_file(ROOT / "examples" / "oa.yml"))
    return sql_workflow(engine, flow_engine, state_controller=ActorStateController())


class Tally:
    def __init__(self) -> None:
        self.approvals = self.retries = self.lost = self.errors = 0

    def counts(self) -> tuple[int, int, int, int]:
        return self.approvals, self.retries, self.lost, self.errors


def approve(
    ex: WorkflowExecutor, engine: sa.Engine, instance_id: str, actor: str, t: Tally
) -> bool:
    def unit(conn: sa.Connection) -> bool:
        ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 1}, connection=conn)
        task = ex.claim_task("oa", ctx)
        return task is not None and ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)

    def retried(attempt: int, error: FlowError) -> None:
        t.retries += 1

    try:
        done = run_in_transaction(engine, unit, attempts=10, idempotent=True, on_retry=retried)
    except FlowError:
        t.errors += 1
        return False
    if done:
        t.approvals += 1
    else:
        t.lost += 1
    return done


def worker(
    urls: list[str], run_id: str, index: int, seconds: float, barrier: Any, hot: Any, results: Any
) -> None:
    engines = [sa.create_engine(url, pool_size=2, max_overflow=2) for url in urls]
    executors = [executor(engine) for engine in engines]
    warm = Tally()
    for ex, engine in zip(executors, engines, strict=True):  # untimed: connections, caches
        approve(ex, engine, f"{run_id}w-{index}", "employee", warm)
        approve(ex, engine, f"{run_id}w-{index}", "manager", warm)
    try:
        for cell, (layout, workload) in enumerate(CELLS):
            node = 0 if layout == "1 node" else index % len(engines)
            ex, engine = executors[node], engines[node]
            tally = Tally()
            barrier.wait(timeout=BARRIER_TIMEOUT)
            deadline = time.monotonic() + seconds
            k = 0
            while time.monotonic() < deadline:
                if workload == "disjoint":
                    instance_id = f"{run_id}d{cell}-{index}-{k}"
                    k += 1
                    approve(ex, engine, instance_id, "employee", tally)
                    approve(ex, engine, instance_id, "manager", tally)
                else:
                    current = hot.value
                    instance_id = f"{run_id}h{cell}-{current}"
                    approve(ex, engine, instance_id, "employee", tally)
                    if approve(ex, engine, instance_id, "manager", tally):
                        with hot.get_lock():
                            if hot.value == current:
                                hot.value = current + 1
            results.put((cell, tally.counts()))
            barrier.wait(timeout=BARRIER_TIMEOUT)
    finally:
        for engine in engines:
            engine.dispose()


def run(urls: list[str], workers: int, seconds: float) -> list[tuple[int, ...]]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    hot = ctx.Value("i", 0)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(urls, f"n{workers}-", i, seconds, barrier, hot, results))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    totals = [[0, 0, 0, 0] for _ in CELLS]
    for cell in range(len(CELLS)):
        barrier.wait(timeout=BARRIER_TIMEOUT)  # all workers ready: the cell starts
        for _ in range(workers):
            got_cell, counts = results.get(timeout=BARRIER_TIMEOUT)
            totals[got_cell] = [a + b for a, b in zip(totals[got_cell], counts, strict=True)]
        with hot.get_lock():
            hot.value = 0
        barrier.wait(timeout=BARRIER_TIMEOUT)  # the cell is over
        del cell
    for p in procs:
        p.join(BARRIER_TIMEOUT)
    return [tuple(t) for t in totals]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    servers = [d for d in os.environ.get("FLOW_GALERA_DSNS", "").split(",") if d]
    if len(servers) < 3:
        sys.exit("FLOW_GALERA_DSNS must list three node URLs (python -m tests.galera.cluster)")
    name = f"flowbench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(servers[0], isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    urls = [sa.make_url(u).set(database=name).render_as_string(False) for u in servers]
    try:
        setup = sa.create_engine(urls[0])
        migrations.upgrade(setup)
        setup.dispose()
        print(
            f"{'workers':>7}  {'layout':<8} {'instances':<9} {'approvals/s':>11} "
            f"{'retries':>7} {'lost':>6} {'errors':>6}"
        )
        for n in (int(w) for w in args.workers.split(",")):
            for (layout, workload), (ok, retries, lost, errors) in zip(
                CELLS, run(urls, n, args.seconds), strict=True
            ):
                print(
                    f"{n:>7}  {layout:<8} {workload:<9} {ok / args.seconds:>11.1f} "
                    f"{retries:>7} {lost:>6} {errors:>6}",
                    flush=True,
                )
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        admin.dispose()


if __name__ == "__main__":
    main()
