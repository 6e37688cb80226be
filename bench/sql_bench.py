"""Approvals per second through flow_sqla on MariaDB/MySQL, next to hand-written SQL.

Usage: ``python bench/sql_bench.py [--workers 1,4,16] [--instances 40] [--repeat 3]``. The
server comes from ``FLOW_MYSQL_DSN`` (default ``mysql+mysqldb://root@127.0.0.1:3306/test``);
the script creates its own throwaway database and drops it afterwards.

Each worker is an OS process that starts ``--instances`` OA instances (more when needed to reach
``--min-instances`` in all) and drives each to its end: two approvals (the employee's, then the
manager's). Setup (connection, engine, graph) and one warm-up instance per worker are not
timed. Each cell runs ``--repeat`` rounds, variants interleaved and their order rotated from
round to round; the median is printed, then the ratio of ``submit_at`` to (b) in each round.
Variants:

* ``flow_sqla submit_at``: ``submit_task_at`` for both approvals — the same work as the
  baselines (per approval: locked read, one states write, one history insert, one commit);
* ``flow_sqla claim+submit``: the user-facing pattern, ``claim_task`` then
  ``submit_task_if_waiting`` (two operations per approval), with ``cache="operation"`` and
  ``cache="process"``;
* baseline (a) bare MySQLdb and (b) the same SQL text through SQLAlchemy ``engine.begin()``:
  ``SELECT ... FOR UPDATE``, ``UPDATE`` of the states, ``INSERT`` of the history row,
  ``COMMIT`` (the first approval of an instance also inserts its row first). (b) runs the text
  as ``text()`` constructs through ``conn.execute`` — the statement path (compiled cache, bind
  and result handling) that every Core-based library pays; (b') runs it through
  ``exec_driver_sql``, which skips that path, for comparison.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
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


# A variant is set up once per worker (connection, engine, graph) outside the timed region and
# warmed up with one untimed instance; it returns the callable that drives one instance to its
# end and the one that releases its resources.
Runner = Callable[[str], None]
Closer = Callable[[], None]
Variant = Callable[[str, list[int]], tuple[Runner, Closer]]


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


def setup_mysqldb(dsn: str, counter: list[int]) -> tuple[Runner, Closer]:
    conn = _mysqldb_connect(dsn)
    cursor = conn.cursor()

    def execute(sql: str, params: tuple[Any, ...]) -> None:
        counter[0] += 1
        cursor.execute(sql, params)

    def run(instance_id: str) -> None:
        _baseline_instance(execute, conn.commit, cursor.fetchone, instance_id)

    return run, conn.close


def _baseline_engine(dsn: str) -> sa.Engine:
    """The baselines' engine, configured like the one flow_sqla makes from a URL (no pool
    reset-on-return ROLLBACK), so the comparison measures the library, not engine settings."""
    return sa.create_engine(dsn, pool_reset_on_return=None)


def _as_text(sql: str) -> sa.TextClause:
    """``%s`` placeholders as ``:p0, :p1, ...`` binds of a ``text()`` construct."""
    parts = sql.split("%s")
    return sa.text("".join(f"{part}:p{i}" for i, part in enumerate(parts[:-1])) + parts[-1])


def setup_sqlalchemy_construct(dsn: str, counter: list[int]) -> tuple[Runner, Closer]:
    """The same SQL as ``text()`` constructs (built once) executed with ``conn.execute``: the
    statement path every Core-based library takes (compiled cache, bind handling, result)."""
    engine = _baseline_engine(dsn)
    _count(engine, counter)
    texts = {sql: _as_text(sql) for sql in (ENSURE, LOCK, WRITE, HISTORY)}
    state: dict[str, Any] = {}

    def execute(sql: str, params: tuple[Any, ...]) -> None:
        if "tx" not in state:
            state["tx"] = engine.begin()
            state["conn"] = state["tx"].__enter__()
        binds = {f"p{i}": value for i, value in enumerate(params)}
        state["result"] = state["conn"].execute(texts[sql], binds)

    def commit() -> None:
        state.pop("tx").__exit__(None, None, None)

    def run(instance_id: str) -> None:
        _baseline_instance(execute, commit, lambda: state["result"].first(), instance_id)

    return run, engine.dispose


def setup_sqlalchemy_text(dsn: str, counter: list[int]) -> tuple[Runner, Closer]:
    """The same SQL text through ``exec_driver_sql`` (no statement construct at all), one
    ``engine.begin()`` transaction per approval."""
    engine = _baseline_engine(dsn)
    _count(engine, counter)
    state: dict[str, Any] = {}

    def execute(sql: str, params: tuple[Any, ...]) -> None:
        if "tx" not in state:
            state["tx"] = engine.begin()
            state["conn"] = state["tx"].__enter__()
        state["result"] = state["conn"].exec_driver_sql(sql, params)

    def commit() -> None:
        state.pop("tx").__exit__(None, None, None)

    def run(instance_id: str) -> None:
        _baseline_instance(execute, commit, lambda: state["result"].first(), instance_id)

    return run, engine.dispose


# -- flow_sqla --------------------------------------------------------------------------------
def _executor(dsn: str, cache: str, counter: list[int]) -> Any:
    engine = FlowEngine()
    engine.load(Graph.from_file(ROOT / "examples" / "oa.yml"))
    ex = sql_workflow(dsn, engine, state_controller=ActorStateController(), cache=cache)  # type: ignore[arg-type]
    _count(ex.state_repository.engine, counter)
    return ex


def setup_flow_submit_at(dsn: str, counter: list[int], cache: str) -> tuple[Runner, Closer]:
    ex = _executor(dsn, cache, counter)

    def run(instance_id: str) -> None:
        for actor, node, *_ in STEPS:
            ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 100})
            ex.submit_task_at("oa", node, TaskAction.FORWARD, ctx)

    return run, ex.state_repository.engine.dispose


def setup_flow_claim_submit(dsn: str, counter: list[int], cache: str) -> tuple[Runner, Closer]:
    ex = _executor(dsn, cache, counter)

    def run(instance_id: str) -> None:
        for actor, *_ in STEPS:
            ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 100})
            task = ex.claim_task("oa", ctx)
            if not ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx):
                raise RuntimeError(f"{instance_id}: {actor}'s approval was not waiting")

    return run, ex.state_repository.engine.dispose


def _count(engine: sa.Engine, counter: list[int]) -> None:
    def before(*_: Any) -> None:
        counter[0] += 1

    sa.event.listen(engine, "before_cursor_execute", before)


VARIANTS: dict[str, Variant] = {
    "flow_sqla submit_at (operation)": lambda d, c: setup_flow_submit_at(d, c, "operation"),
    "flow_sqla claim+submit (operation)": lambda d, c: setup_flow_claim_submit(d, c, "operation"),
    "flow_sqla claim+submit (process)": lambda d, c: setup_flow_claim_submit(d, c, "process"),
    "(a) bare MySQLdb": setup_mysqldb,
    "(b) SQLAlchemy text() + begin()": setup_sqlalchemy_construct,
    "(b') SQLAlchemy exec_driver_sql + begin()": setup_sqlalchemy_text,
}


def worker(variant: str, dsn: str, ids: list[str], barrier: Any, results: Any) -> None:
    try:
        counter = [0]
        run, close = VARIANTS[variant](dsn, counter)
        try:
            run(f"{ids[0]}-warm")  # connect, compile, first-use caches: not timed
            counter[0] = 0
            barrier.wait(timeout=120)
            start = time.perf_counter()
            for instance_id in ids:
                run(instance_id)
            results.put((start, time.perf_counter(), counter[0], None))
        finally:
            close()
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


def _paired(runs: dict[str, list[tuple[float, float]]]) -> str:
    """flow_sqla ``submit_at`` over baseline (b) for each round (the two ran back to back), to
    show how much of a difference is the machine's noise."""
    ours = runs["flow_sqla submit_at (operation)"]
    base = runs["(b) SQLAlchemy text() + begin()"]
    return " ".join(f"{o / b:.0%}" for (o, _), (b, _) in zip(ours, base, strict=True))


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


def prepared_database(server: str) -> tuple[str, Callable[[], None]]:
    """A throwaway database on ``server`` migrated to head: its URL and the function that
    drops it."""
    dsn, drop = _throwaway(server)
    engine = sa.create_engine(dsn)
    try:
        migrations.upgrade(engine)
    except BaseException:
        drop()
        raise
    finally:
        engine.dispose()
    return dsn, drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument("--instances", type=int, default=40, help="instances per worker")
    parser.add_argument(
        "--min-instances", type=int, default=500, help="at least this many instances in all"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell; the median counts")
    args = parser.parse_args()
    dsn, drop = prepared_database(os.environ.get("FLOW_MYSQL_DSN", DEFAULT_DSN))
    try:
        header = ("variant", "N", "approvals/s", "vs (b)", "vs (b')", "vs (a)", "stmts/approval")
        print("{:42} {:>3} {:>12} {:>7} {:>8} {:>7} {:>15}".format(*header))
        for workers in (int(n) for n in args.workers.split(",")):
            per_worker = max(args.instances, -(-args.min_instances // workers))
            runs: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
            names = list(VARIANTS)
            for round_no in range(args.repeat):
                # Interleaved, so drifting load hits every variant, and rotated, so no variant
                # is always the one that runs right after the previous cell's load.
                shift = round_no % len(names)
                for variant in names[shift:] + names[:shift]:
                    runs[variant].append(measure(variant, dsn, workers, per_worker))
            rows = {v: (statistics.median(r for r, _ in rs), rs[0][1]) for v, rs in runs.items()}
            base_a = rows["(a) bare MySQLdb"][0]
            base_b = rows["(b) SQLAlchemy text() + begin()"][0]
            base_b_raw = rows["(b') SQLAlchemy exec_driver_sql + begin()"][0]
            for variant, (rate, stmts) in rows.items():
                ratios = (rate / base_b, rate / base_b_raw, rate / base_a)
                print(f"{variant:42} {workers:>3} {rate:>12.1f} {ratios[0]:>7.0%} "
                      f"{ratios[1]:>8.0%} {ratios[2]:>7.0%} {stmts:>15.2f}")  # fmt: skip
            print(f"{'  per run, submit_at vs (b) of the same round':46} {_paired(runs)}")
    finally:
        drop()


if __name__ == "__main__":
    main()
