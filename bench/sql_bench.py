"""Approvals per second through flow_sqla on MariaDB/MySQL, next to hand-written SQL.

Usage: ``python bench/sql_bench.py [--workers 1,4,16] [--instances 40]``. The server comes
from ``FLOW_MYSQL_DSN`` (default ``mysql+mysqldb://root@127.0.0.1:3306/test``); the script
creates its own throwaway database and drops it afterwards.

Each worker is an OS process that starts ``--instances`` OA instances and drives each to its
end: two approvals (the employee's, then the manager's). Variants:

* ``flow_sqla submit_at``: ``submit_task_at`` for both approvals — the same work as the
  baselines (per approval: locked read, one states write, one history insert, one commit);
* ``flow_sqla claim+submit``: the user-facing pattern, ``claim_task`` then
  ``submit_task_if_waiting`` (two operations per approval), with ``cache="operation"`` and
  ``cache="process"``;
* baseline (a) bare MySQLdb and (b) the same SQL text through SQLAlchemy ``engine.begin()``:
  ``SELECT ... FOR UPDATE``, ``UPDATE`` of the states, ``INSERT`` of the history row,
  ``COMMIT`` (the first approval of an instance also inserts its row first).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flow.context import FlowContext  # noqa: E402
from flow.engine import FlowEngine  # noqa: E402
from flow.graph import Graph  # noqa: E402
from flow.workflow import ActorStateController, TaskAction  # noqa: E402
from flow_sqla import migrations, sql_workflow  # noqa: E402

DEFAULT_DSN = "mysql+mysqldb://root@127.0.0.1:3306/test"
SPAWN = multiprocessing.get_context("spawn")

ENSURE = (
    "INSERT INTO bpm_flow_repository (instant_id, creator, create_time, updater, update_time) "
    "VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE instant_id = instant_id"
)
LOCK = "SELECT states, vars FROM bpm_flow_repository WHERE instant_id = %s FOR UPDATE"
WRITE = (
    "UPDATE bpm_flow_repository SET states = %s, vars = %s, updater = %s, update_time = %s "
    "WHERE instant_id = %s"
)
HISTORY = (
    "INSERT INTO bpm_flow_task (flow_ins_id, proc_def_id, task_id, source_node_code, "
    "source_node_name, source_node_type, target_node_code, target_node_name, target_node_type, "
    "assignee, status, form_id, variables, message, creator, create_time) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
STEPS = [  # (actor, node, title, next node, next title, next type, states after)
    ("employee", "apply", "Apply", "manager", "Manager approval", "ACTIVITY",
     {"oa:apply": 1002, "oa:amount": 1002}),
    ("manager", "manager", "Manager approval", "end", "End", "END",
     {"oa:apply": 1002, "oa:amount": 1002, "oa:manager": 1002}),
]  # fmt: skip


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


# -- the hand-written baselines -------------------------------------------------------------
def _baseline_instance(execute: Callable[[str, tuple[Any, ...]], Any], commit: Callable[[], None],
                       fetch: Callable[[], Any], instance_id: str) -> None:  # fmt: skip
    for index, (actor, node, title, target, target_title, target_type, states) in enumerate(STEPS):
        now = _now()
        if index == 0:
            execute(ENSURE, (instance_id, actor, now, actor, now))
        execute(LOCK, (instance_id,))
        row = fetch()
        stored = json.loads(row[1]) if row and row[1] else {}
        variables = {**stored, "amount": 100}
        execute(WRITE, (json.dumps(states), json.dumps(variables), actor, now, instance_id))
        execute(
            HISTORY,
            (instance_id, "oa", node, node, title, "ACTIVITY", target, target_title, target_type,
             actor, 1002, 1001, json.dumps({**variables, "actor": actor}), None, actor, now),
        )  # fmt: skip
        commit()


def _mysqldb_connect(dsn: str) -> Any:
    import MySQLdb

    url = sa.make_url(dsn)
    return MySQLdb.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username or "root",
        password=url.password or "",
        database=url.database or "",
        charset="utf8mb4",
    )


def run_mysqldb(dsn: str, ids: list[str], counter: list[int]) -> None:
    conn = _mysqldb_connect(dsn)
    cursor = conn.cursor()

    def execute(sql: str, params: tuple[Any, ...]) -> None:
        counter[0] += 1
        cursor.execute(sql, params)

    try:
        for instance_id in ids:
            _baseline_instance(execute, conn.commit, cursor.fetchone, instance_id)
    finally:
        conn.close()


def run_sqlalchemy_text(dsn: str, ids: list[str], counter: list[int]) -> None:
    """The same SQL text, one ``engine.begin()`` transaction per approval."""
    engine = sa.create_engine(dsn)
    _count(engine, counter)
    state: dict[str, Any] = {}

    def execute(sql: str, params: tuple[Any, ...]) -> None:
        if "tx" not in state:
            state["tx"] = engine.begin()
            state["conn"] = state["tx"].__enter__()
        state["result"] = state["conn"].exec_driver_sql(sql, params)

    def commit() -> None:
        state.pop("tx").__exit__(None, None, None)

    try:
        for instance_id in ids:
            _baseline_instance(execute, commit, lambda: state["result"].first(), instance_id)
    finally:
        engine.dispose()


# -- flow_sqla --------------------------------------------------------------------------------
def _executor(dsn: str, cache: str, counter: list[int]) -> Any:
    engine = FlowEngine()
    engine.load(Graph.from_file(ROOT / "examples" / "oa.yml"))
    ex = sql_workflow(dsn, engine, state_controller=ActorStateController(), cache=cache)  # type: ignore[arg-type]
    _count(ex.state_repository.engine, counter)
    return ex


def run_flow_submit_at(dsn: str, ids: list[str], counter: list[int], cache: str) -> None:
    ex = _executor(dsn, cache, counter)
    for instance_id in ids:
        for actor, node, *_ in STEPS:
            ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 100})
            ex.submit_task_at("oa", node, TaskAction.FORWARD, ctx)
    ex.state_repository.engine.dispose()


def run_flow_claim_submit(dsn: str, ids: list[str], counter: list[int], cache: str) -> None:
    ex = _executor(dsn, cache, counter)
    for instance_id in ids:
        for actor, *_ in STEPS:
            ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 100})
            task = ex.claim_task("oa", ctx)
            if not ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx):
                raise RuntimeError(f"{instance_id}: {actor}'s approval was not waiting")
    ex.state_repository.engine.dispose()


def _count(engine: sa.Engine, counter: list[int]) -> None:
    def before(*_: Any) -> None:
        counter[0] += 1

    sa.event.listen(engine, "before_cursor_execute", before)


VARIANTS: dict[str, Callable[[str, list[str], list[int]], None]] = {
    "flow_sqla submit_at (operation)": lambda d, i, c: run_flow_submit_at(d, i, c, "operation"),
    "flow_sqla claim+submit (operation)": lambda d, i, c: run_flow_claim_submit(
        d, i, c, "operation"
    ),
    "flow_sqla claim+submit (process)": lambda d, i, c: run_flow_claim_submit(d, i, c, "process"),
    "(a) bare MySQLdb": run_mysqldb,
    "(b) SQLAlchemy text + begin()": run_sqlalchemy_text,
}


def worker(variant: str, dsn: str, ids: list[str], barrier: Any, results: Any) -> None:
    try:
        counter = [0]
        barrier.wait(timeout=120)
        start = time.perf_counter()
        VARIANTS[variant](dsn, ids, counter)
        results.put((start, time.perf_counter(), counter[0], None))
    except BaseException as exc:
        results.put((0.0, 0.0, 0, repr(exc)))


def measure(variant: str, dsn: str, workers: int, per_worker: int) -> tuple[float, float]:
    """(approvals per second, statements per approval) for one variant and worker count."""
    tag = uuid.uuid4().hex[:6]
    barrier = SPAWN.Barrier(workers)
    results = SPAWN.Queue()
    procs = [
        SPAWN.Process(
            target=worker,
            args=(variant, dsn, [f"{tag}-{w}-{n}" for n in range(per_worker)], barrier, results),
            daemon=True,
        )
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    errors = [e for *_, e in outcomes if e]
    if errors:
        raise RuntimeError(f"{variant}: {errors[0]}")
    elapsed = max(end for _, end, _, _ in outcomes) - min(start for start, *_ in outcomes)
    approvals = workers * per_worker * len(STEPS)
    statements = sum(count for _, _, count, _ in outcomes)
    return approvals / elapsed, statements / approvals


def _throwaway(server: str) -> tuple[str, Callable[[], None]]:
    name = f"flowbench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(server, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        admin.dispose()

    return sa.make_url(server).set(database=name).render_as_string(hide_password=False), drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--instances", type=int, default=40, help="instances per worker")
    args = parser.parse_args()
    dsn, drop = _throwaway(os.environ.get("FLOW_MYSQL_DSN", DEFAULT_DSN))
    try:
        engine = sa.create_engine(dsn)
        migrations.upgrade(engine)
        engine.dispose()
        print(f"{'variant':38} {'N':>3} {'approvals/s':>12} {'vs (b)':>7} {'vs (a)':>7} "
              f"{'stmts/approval':>15}")  # fmt: skip
        for workers in (int(n) for n in args.workers.split(",")):
            rows = {v: measure(v, dsn, workers, args.instances) for v in VARIANTS}
            base_a = rows["(a) bare MySQLdb"][0]
            base_b = rows["(b) SQLAlchemy text + begin()"][0]
            for variant, (rate, stmts) in rows.items():
                print(f"{variant:38} {workers:>3} {rate:>12.1f} {rate / base_b:>7.0%} "
                      f"{rate / base_a:>7.0%} {stmts:>15.2f}")  # fmt: skip
    finally:
        drop()


if __name__ == "__main__":
    main()
