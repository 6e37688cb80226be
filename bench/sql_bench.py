"""Approvals per second through flow_sqla on MariaDB/MySQL, next to hand-written SQL.

Usage: ``python bench/sql_bench.py [--workers 1,4,16] [--slice 100] [--rounds 20]
[--variants flow,b',...]``. The server comes from ``FLOW_MYSQL_DSN`` (default
``mysql+mysqldb://root@127.0.0.1:3306/test``); the script creates its own throwaway database
and drops it afterwards.

For each N, N worker processes are started once and set up every variant (connection, engine,
graph; one untimed warm-up instance each). The variants then alternate in short timed
*slices*: in a slice every worker drives ``--slice``/N new OA instances (at least 8) of one
variant to their end, two approvals each (the employee's, then the manager's). A round runs
one slice of every variant, forwards in even rounds and backwards in odd ones, with
``submit_task_at`` and (b') always back to back. A variant's rate is all its approvals over
all its slices' time; the line under each N gives the median and spread of ``submit_task_at`` /
(b') over the rounds' back-to-back pairs. Short alternating slices matter on a shared machine whose
speed drifts by tens of percent within a minute: long rounds, one variant after another,
measured the drift as much as the code.
Variants (``--variants`` takes the short names in brackets):

* ``flow_sqla submit_task_at`` [flow]: ``submit_task_at`` for both approvals, each its own unit
  of work — the same work as the baselines (per approval: locked read, one states write, one
  history insert, one commit) with the open-task index off; [flow-index] with it on;
* ``flow_sqla README pattern`` [readme]: the README's ``claim_task`` then
  ``submit_task_if_waiting`` inside one application ``engine.begin()``; [readme-index] with
  the open-task index on;
* ``flow_sqla claim, submit`` [claim, claim-process]: the same two calls as two units of work
  of their own, with ``cache="operation"`` and ``cache="process"``;
* baseline (a) bare MySQLdb [a] — the driver's limit — and (b') the same SQL text through
  SQLAlchemy ``engine.begin()`` + ``exec_driver_sql`` [b'] — the floor of any Core-based
  library: ``SELECT ... FOR UPDATE``, ``UPDATE`` of the states, ``INSERT`` of the history row,
  ``COMMIT`` (the first approval of an instance also inserts its row first). (b) [b] runs the
  text as ``text()`` constructs through ``conn.execute`` and is kept as a reference row, as
  is (a2) [a2]: (a) with the ``UPDATE`` and the history ``INSERT`` in one round trip (a
  multi-statement query), which is how flow_sqla sends them on mysqlclient;
* (f) [floor], a reference row: the README pattern's SQL floor — flow_sqla's statement plan
  for it, hand-written (the first approval's row insert, which also locks the row, or the
  second's locked read; the write and the history insert in one round trip; the ``COMMIT``),
  on the driver's cursor inside the application's ``engine.begin()``, with no library logic
  at all. It sends slightly less than flow_sqla does (not the graph document flow_sqla
  stores with an instance's first write, nor the extra columns of its locked read), so its
  ratio to SpiffWorkflow bounds, from above, what the README pattern can reach on the
  machine;
* ``SpiffWorkflow 3.2`` [spiff] (``pip install -e '.[bench]'``): the same process as BPMN,
  persisted with Spiff's JSON serializer plus one history row per approval, in one
  transaction (``bench/spiff_side.py``).

Ratios are printed against (b'), (a) and SpiffWorkflow, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from flow.context import FlowContext  # noqa: E402
from flow.engine import FlowEngine  # noqa: E402
from flow.graph import Graph  # noqa: E402
from flow.workflow import ActorStateController, TaskAction, WorkflowExecutor  # noqa: E402
from flow_sqla import SqlStateRepository, migrations, sql_workflow  # noqa: E402
from flow_sqla.repository import CacheMode  # noqa: E402

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
                       fetch: Callable[[], Any], instance_id: str,
                       together: bool = False, lean: bool = False) -> None:  # fmt: skip
    """One instance driven to its end with the minimal SQL; ``together``: the state write and
    the history insert in one round trip (a multi-statement query); ``lean``: flow_sqla's
    round trips — the first approval reads nothing back from the row its insert just created
    (and locked), as flow_sqla does not."""
    for index, (actor, node, title, target, target_title, target_type, states) in enumerate(STEPS):
        now = _now()
        if index == 0:
            execute(ENSURE, (instance_id, actor, now, actor, now))
        row = None
        if index > 0 or not lean:
            execute(LOCK, (instance_id,))
            row = fetch()
        stored = json.loads(row[1]) if row and row[1] else {}
        variables = {**stored, "amount": 100}
        write = (json.dumps(states), json.dumps(variables), actor, now, instance_id)
        history = (instance_id, "oa", node, node, title, "ACTIVITY", target, target_title,
                   target_type, actor, 1002, 1001, json.dumps({**variables, "actor": actor}),
                   None, actor, now)  # fmt: skip
        if together:
            execute(f"{WRITE};\n{HISTORY}", write + history)
        else:
            execute(WRITE, write)
            execute(HISTORY, history)
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


def _on_cursor(cursor: Any, sql: str, params: tuple[Any, ...]) -> None:
    """Run ``sql`` on a MySQLdb cursor, reading a multi-statement query's further results.
    Not after a single statement: ``nextset()`` first fetches every row left, and the locked
    read's row would never be read."""
    cursor.execute(sql, params)
    if ";" in sql:
        while cursor.nextset():
            pass


def setup_mysqldb(dsn: str, counter: list[int], together: bool = False) -> tuple[Runner, Closer]:
    conn = _mysqldb_connect(dsn)
    cursor = conn.cursor()

    def execute(sql: str, params: tuple[Any, ...]) -> None:
        counter[0] += 1
        _on_cursor(cursor, sql, params)

    def run(instance_id: str) -> None:
        _baseline_instance(execute, conn.commit, cursor.fetchone, instance_id, together)

    return run, conn.close


def setup_floor(dsn: str, counter: list[int]) -> tuple[Runner, Closer]:
    """flow_sqla's statement plan for the README pattern, hand-written on the driver's cursor
    inside the application's own ``engine.begin()`` (one round trip for the first approval's
    row insert or the second's locked read, one for the write and the history insert, the
    ``COMMIT``), with none of a library's logic: a bound from above for the pattern. It leaves
    out the graph document flow_sqla stores with an instance's first write."""
    engine = _baseline_engine(dsn)
    state: dict[str, Any] = {}

    def execute(sql: str, params: tuple[Any, ...]) -> None:
        if "tx" not in state:
            state["tx"] = engine.begin()
            conn = state["tx"].__enter__()
            state["cursor"] = conn.connection.driver_connection.cursor()
        counter[0] += 1
        _on_cursor(state["cursor"], sql, params)

    def commit() -> None:
        state.pop("cursor").close()
        state.pop("tx").__exit__(None, None, None)

    def run(instance_id: str) -> None:
        fetch = lambda: state["cursor"].fetchone()  # noqa: E731
        _baseline_instance(execute, commit, fetch, instance_id, together=True, lean=True)

    return run, engine.dispose


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
def _executor(
    dsn: str, cache: CacheMode, counter: list[int], index: bool = False
) -> tuple[WorkflowExecutor, sa.Engine]:
    """The OA executor on ``dsn`` and its SQLAlchemy engine (statements counted). The
    open-task index is off unless asked for: off, flow_sqla does the baselines' work."""
    engine = FlowEngine()
    engine.load(Graph.from_file(ROOT / "examples" / "oa.yml"))
    ex = sql_workflow(
        dsn, engine, state_controller=ActorStateController(), cache=cache, index=index
    )
    repository = ex.state_repository
    assert isinstance(repository, SqlStateRepository)
    _count(repository.engine, counter)
    return ex, repository.engine


def setup_flow_submit_at(
    dsn: str, counter: list[int], cache: CacheMode, index: bool = False
) -> tuple[Runner, Closer]:
    ex, db = _executor(dsn, cache, counter, index)

    def run(instance_id: str) -> None:
        for actor, node, *_ in STEPS:
            ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 100})
            ex.submit_task_at("oa", node, TaskAction.FORWARD, ctx)

    return run, db.dispose


def setup_flow_claim_submit(
    dsn: str, counter: list[int], cache: CacheMode
) -> tuple[Runner, Closer]:
    ex, db = _executor(dsn, cache, counter)

    def run(instance_id: str) -> None:
        for actor, *_ in STEPS:
            ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 100})
            task = ex.claim_task("oa", ctx)
            if not ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx):
                raise RuntimeError(f"{instance_id}: {actor}'s approval was not waiting")

    return run, db.dispose


def setup_flow_readme(
    dsn: str, counter: list[int], cache: CacheMode, index: bool = False
) -> tuple[Runner, Closer]:
    """The README's pattern: ``claim_task`` then ``submit_task_if_waiting`` inside one
    ``engine.begin()`` of the application's own, the connection carried in the context."""
    ex, db = _executor(dsn, cache, counter, index)

    def run(instance_id: str) -> None:
        for actor, *_ in STEPS:
            with db.begin() as conn:
                ctx = FlowContext.of(instance_id, {"actor": actor, "amount": 100}, connection=conn)
                task = ex.claim_task("oa", ctx)
                if not ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx):
                    raise RuntimeError(f"{instance_id}: {actor}'s approval was not waiting")

    return run, db.dispose


def setup_spiffworkflow(dsn: str, counter: list[int]) -> tuple[Runner, Closer]:
    from spiff_side import setup_spiff

    return setup_spiff(dsn, counter, engine_for=_baseline_engine, history_sql=HISTORY, now=_now)


def _count(engine: sa.Engine, counter: list[int]) -> None:
    """Nothing: statements are counted by the server (:class:`ServerCounters`). A
    ``before_cursor_execute`` listener would cost every SQLAlchemy side a dispatch per
    statement and keep flow_sqla off its driver-level path (see ``flow_sqla._prepared``)."""


class ServerCounters:
    """The server's own statement counters (``Com_select`` + ``Com_insert`` + ``Com_update``
    + ``Com_delete`` + their multi-table forms ...; COMMIT and ROLLBACK are not among them),
    read before and after a slice on a connection of its own: the same count for every side,
    whatever its client."""

    _NAMES = (
        "Com_select",
        "Com_insert",
        "Com_insert_select",
        "Com_update",
        "Com_update_multi",
        "Com_delete",
        "Com_delete_multi",
    )

    def __init__(self, dsn: str) -> None:
        self._conn = _mysqldb_connect(dsn)
        self._conn.autocommit(True)

    def total(self) -> int:
        cursor = self._conn.cursor()
        names = ",".join(f"'{name}'" for name in self._NAMES)
        cursor.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
        return sum(int(value) for _, value in cursor.fetchall())

    def close(self) -> None:
        self._conn.close()


# FLOW and (b') first: run_cell keeps the first two back to back in every round.
VARIANTS: dict[str, Variant] = {
    "flow_sqla submit_task_at": lambda d, c: setup_flow_submit_at(d, c, "operation"),
    "(b') SQLAlchemy exec_driver_sql + begin()": setup_sqlalchemy_text,
    "flow_sqla README pattern": lambda d, c: setup_flow_readme(d, c, "operation"),
    "flow_sqla submit_task_at, index on": lambda d, c: setup_flow_submit_at(
        d, c, "operation", index=True
    ),
    "flow_sqla README pattern, index on": lambda d, c: setup_flow_readme(
        d, c, "operation", index=True
    ),
    "flow_sqla claim, submit (two units)": lambda d, c: setup_flow_claim_submit(d, c, "operation"),
    "flow_sqla claim, submit (process cache)": lambda d, c: setup_flow_claim_submit(
        d, c, "process"
    ),
    "(a) bare MySQLdb": setup_mysqldb,
    "(a2) bare MySQLdb, write + history in one round trip [ref]": lambda d, c: setup_mysqldb(
        d, c, together=True
    ),
    "(b) SQLAlchemy text() + begin() [ref]": setup_sqlalchemy_construct,
    "(f) README pattern's SQL floor [ref]": setup_floor,
    "SpiffWorkflow 3.2 + JSON serializer": setup_spiffworkflow,
}
#: Short names for ``--variants`` (and ``client_instructions.py``).
SHORT_NAMES = {
    "flow": "flow_sqla submit_task_at",
    "b'": "(b') SQLAlchemy exec_driver_sql + begin()",
    "readme": "flow_sqla README pattern",
    "flow-index": "flow_sqla submit_task_at, index on",
    "readme-index": "flow_sqla README pattern, index on",
    "claim": "flow_sqla claim, submit (two units)",
    "claim-process": "flow_sqla claim, submit (process cache)",
    "a": "(a) bare MySQLdb",
    "a2": "(a2) bare MySQLdb, write + history in one round trip [ref]",
    "b": "(b) SQLAlchemy text() + begin() [ref]",
    "floor": "(f) README pattern's SQL floor [ref]",
    "spiff": "SpiffWorkflow 3.2 + JSON serializer",
}
#: Fewer instances per worker and slice would let the last worker's tail dominate a slice.
MIN_PER_WORKER = 8


class _Slice:
    """One timed slice of one variant: every worker drives its instances, started together."""

    def __init__(
        self, approvals: int, elapsed: float, statements: int, client_cpu: float, server_cpu: float
    ) -> None:
        self.approvals = approvals
        self.elapsed = elapsed
        self.statements = statements
        self.client_cpu = client_cpu  # seconds, all workers
        self.server_cpu = server_cpu  # seconds, the server process (nan when not local)

    @property
    def rate(self) -> float:
        return self.approvals / self.elapsed


def _server_pid() -> int | None:
    """The local MariaDB/MySQL server process, when there is one (its CPU time is read)."""
    for name in ("mariadbd", "mysqld"):
        for entry in Path("/proc").glob("[0-9]*/comm"):
            try:
                if entry.read_text().strip() == name:
                    return int(entry.parent.name)
            except OSError:
                continue
    return None


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of process ``pid`` so far (nan when unknown)."""
    if pid is None:
        return math.nan
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker(names: list[str], dsn: str, jobs: Any, barrier: Any, results: Any) -> None:
    """A long-lived worker process: sets every variant up once (connection, engine, graph)
    and warms it up with one untimed instance, then runs slices on command until ``None``.

    Keeping the workers alive lets the variants alternate in short slices, so that a change
    in the machine's speed (disk flushes, other tenants) hits every variant alike instead of
    whichever happened to run during it."""
    setups: dict[str, tuple[Runner, Closer]] = {}
    try:
        counters = {name: [0] for name in names}
        for name in names:
            setups[name] = VARIANTS[name](dsn, counters[name])
            setups[name][0](f"warm-{uuid.uuid4().hex}")  # connect, compile, first-use caches
        results.put((0.0, 0.0, 0, 0.0, None))
        while (job := jobs.get()) is not None:
            name, ids = job
            run, counter = setups[name][0], counters[name]
            counter[0] = 0
            barrier.wait(timeout=120)
            start, cpu = time.perf_counter(), time.process_time()
            for instance_id in ids:
                run(instance_id)
            end, cpu = time.perf_counter(), time.process_time() - cpu
            results.put((start, end, counter[0], cpu, None))
    except BaseException as exc:
        results.put((0.0, 0.0, 0, 0.0, repr(exc)))
    finally:
        for _, close in setups.values():
            close()


class _Outcome(NamedTuple):
    """What one worker reports for one slice."""

    start: float
    end: float
    statements: int
    cpu: float
    error: str | None


class Workers:
    """``count`` worker processes holding every variant of ``names``, ready to run slices."""

    def __init__(self, names: list[str], dsn: str, count: int) -> None:
        self.results = SPAWN.Queue()
        self.barrier = SPAWN.Barrier(count)
        self.jobs = [SPAWN.Queue() for _ in range(count)]
        self.procs = [
            SPAWN.Process(target=worker, args=(names, dsn, jobs, self.barrier, self.results))
            for jobs in self.jobs
        ]
        self.slices = 0
        self.server_pid = _server_pid()
        self.counters = ServerCounters(dsn)
        for proc in self.procs:
            proc.start()
        self._collect()  # every worker set up and warm

    def run(self, name: str, per_worker: int) -> _Slice:
        """Time one slice: each worker drives ``per_worker`` new instances of ``name``."""
        self.slices += 1
        tag = f"{uuid.uuid4().hex[:6]}-{self.slices}"
        server_cpu = _cpu_seconds(self.server_pid)
        statements = self.counters.total()
        for number, jobs in enumerate(self.jobs):
            jobs.put((name, [f"{tag}-{number}-{n}" for n in range(per_worker)]))
        outcomes = self._collect()
        server_cpu = _cpu_seconds(self.server_pid) - server_cpu
        statements = self.counters.total() - statements
        elapsed = max(o.end for o in outcomes) - min(o.start for o in outcomes)
        approvals = len(self.jobs) * per_worker * len(STEPS)
        client_cpu = sum(o.cpu for o in outcomes)
        return _Slice(approvals, elapsed, statements, client_cpu, server_cpu)

    def _collect(self) -> list[_Outcome]:
        outcomes = [_Outcome(*self.results.get(timeout=600)) for _ in self.procs]
        errors = [o.error for o in outcomes if o.error]
        if errors:
            self.close()
            raise RuntimeError(errors[0])
        return outcomes

    def close(self) -> None:
        self.counters.close()
        for jobs in self.jobs:
            jobs.put(None)
        for proc in self.procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()


FLOW = SHORT_NAMES["flow"]
README = SHORT_NAMES["readme"]
FLOOR = SHORT_NAMES["floor"]
BASE_A = SHORT_NAMES["a"]
BASE_B_RAW = SHORT_NAMES["b'"]
SPIFF = SHORT_NAMES["spiff"]


def slice_order(names: list[str], round_no: int) -> list[str]:
    """The variants of one round: forwards in even rounds, backwards in odd ones. ``FLOW``
    and ``BASE_B_RAW`` come first in ``names``, so they always run back to back, each first in
    every other round."""
    return names if round_no % 2 == 0 else names[::-1]


def run_cell(
    workers: Workers, names: list[str], per_worker: int, rounds: int
) -> dict[str, list[_Slice]]:
    slices: dict[str, list[_Slice]] = {name: [] for name in names}
    for round_no in range(rounds):
        for name in slice_order(names, round_no):
            slices[name].append(workers.run(name, per_worker))
    return slices


def _rate(slices: list[_Slice]) -> float:
    """Approvals per second over every slice of a variant (all approvals / all time)."""
    return sum(s.approvals for s in slices) / sum(s.elapsed for s in slices)


def _paired(slices: dict[str, list[_Slice]]) -> list[float]:
    """``FLOW`` over ``BASE_B_RAW`` in each round: the two slices ran back to back."""
    pairs = zip(slices[FLOW], slices[BASE_B_RAW], strict=True)
    return [ours.rate / base.rate for ours, base in pairs]


def report(workers: int, slices: dict[str, list[_Slice]]) -> None:
    rates = {name: _rate(found) for name, found in slices.items()}
    bases = [rates.get(name) for name in (BASE_B_RAW, BASE_A, SPIFF)]
    for name, rate in rates.items():
        ratios = " ".join(f"{rate / base:>7.0%}" if base else f"{'-':>7}" for base in bases)
        found = slices[name]
        approvals = sum(s.approvals for s in found)
        statements = sum(s.statements for s in found) / approvals
        client = sum(s.client_cpu for s in found) / approvals * 1000
        server = sum(s.server_cpu for s in found) / approvals * 1000
        print(
            f"{name:42} {workers:>3} {rate:>12.1f} {ratios} {statements:>15.2f} "
            f"{client:>10.3f} {server:>10.3f}"
        )
    if README in rates and FLOOR in rates:
        bound = f"; the floor is {rates[FLOOR] / rates[SPIFF]:.2f}x Spiff" if SPIFF in rates else ""
        print(f"  README pattern / its SQL floor (f): {rates[README] / rates[FLOOR]:.0%}{bound}")
    if FLOW in slices and BASE_B_RAW in slices:
        paired = sorted(_paired(slices))
        quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
        print(
            f"  submit_task_at / (b'), back-to-back slices: "
            f"median {statistics.median(paired):.0%}, "
            f"quartiles {quartiles[0]:.0%}-{quartiles[2]:.0%}, "
            f"range {paired[0]:.0%}-{paired[-1]:.0%} ({len(paired)} rounds)"
        )


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


@contextmanager
def the_server_to_ourselves(dsn: str, names: list[str], counts: list[int]) -> Iterator[None]:
    """Hold the server for the run: one run at a time (a named lock, held by a connection of
    its own — two runs side by side would measure each other), and room for every worker's
    connections. Each of N workers keeps one connection per variant open for the whole cell
    (plus the counters' own), and a default MariaDB allows 151 — twelve variants at N = 16
    need 193: ``max_connections`` is then raised for the run and put back at its end. Without
    the privilege to raise it, stop before any slice runs and say what to do."""
    holder = _mysqldb_connect(dsn)
    try:
        cursor = holder.cursor()
        cursor.execute("SELECT GET_LOCK('flow_sql_bench', 0)")
        if cursor.fetchone()[0] != 1:
            raise SystemExit("sql_bench: another sql_bench run is using this server")
        cursor.execute("SELECT @@max_connections")
        (allowed,) = cursor.fetchone()
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
        (_, connected) = cursor.fetchone()
        needed = max(counts) * len(names) + 1
        raised = None
        if needed > int(allowed) - int(connected):
            raised = needed + int(connected) + 20
            try:
                cursor.execute(f"SET GLOBAL max_connections = {raised:d}")
            except Exception as exc:  # not privileged (SUPER, or MySQL's SYSTEM_VARIABLES_ADMIN)
                raise SystemExit(
                    f"sql_bench: N={max(counts)} workers x {len(names)} variants need {needed} "
                    f"connections; the server allows {allowed} and {connected} are open, and "
                    f"raising the limit failed ({exc}). Raise it (SET GLOBAL max_connections "
                    f"= {raised}) or run fewer --workers/--variants."
                ) from exc
            print(f"sql_bench: max_connections raised from {allowed} to {raised} for this run")
        try:
            yield
        finally:
            if raised is not None:
                cursor.execute(f"SET GLOBAL max_connections = {int(allowed):d}")
                print(f"sql_bench: max_connections back to {allowed}")
    finally:
        holder.close()  # releases the lock


def run_all(server: str, names: list[str], counts: list[int], slice_size: int, rounds: int) -> None:
    """Every N's cell on a throwaway database of ``server``, reported as it completes."""
    dsn, drop = prepared_database(server)
    try:
        header = ("variant", "N", "approvals/s", "vs (b')", "vs (a)", "vs Spiff", "stmts/approval")
        print(
            "{:42} {:>3} {:>12} {:>7} {:>7} {:>7} {:>15} {:>10} {:>10}".format(
                *header, "client ms", "server ms"
            )
        )
        for count in counts:
            per_worker = max(MIN_PER_WORKER, -(-slice_size // count))
            workers = Workers(names, dsn, count)
            try:
                slices = run_cell(workers, names, per_worker, rounds)
            finally:
                workers.close()
            report(count, slices)
    finally:
        drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,4,16")
    parser.add_argument(
        "--slice", type=int, default=100, help="instances per slice, shared by the workers"
    )
    parser.add_argument("--rounds", type=int, default=20, help="slices per variant and N")
    parser.add_argument(
        "--variants", default=",".join(SHORT_NAMES), help=f"from {','.join(SHORT_NAMES)}"
    )
    args = parser.parse_args()
    keys = [key.strip() for key in args.variants.split(",")]
    unknown = [key for key in keys if key not in SHORT_NAMES]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {','.join(SHORT_NAMES)}")
    names = [name for name in VARIANTS if name in {SHORT_NAMES[key] for key in keys}]
    counts = [int(n) for n in args.workers.split(",")]
    server = os.environ.get("FLOW_MYSQL_DSN", DEFAULT_DSN)
    with the_server_to_ourselves(server, names, counts):
        run_all(server, names, counts, args.slice, args.rounds)


if __name__ == "__main__":
    main()
