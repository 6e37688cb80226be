"""The task index under load: inbox pages among many open tasks, and what it costs a submit.

Usage: ``python bench/inbox_bench.py [--tasks 100000] [--history 1000000] [--rounds 10]
[--slice 20] [--only mysql|pg]``. Servers come from ``FLOW_MYSQL_DSN`` (MariaDB/MySQL) and
``FLOW_PG_DSN`` (PostgreSQL); a dialect without its variable is skipped. The script creates a
throwaway database per server and drops it afterwards.

Per server:

1. **Fill** (timed, server-side bulk inserts from a number sequence — MariaDB's ``seq_1_to_N``
   table, PostgreSQL's ``generate_series``): ``--tasks`` RUNNING instance rows with one open
   task each in ``bpm_flow_todo`` — 10% for ``role:finance``, the rest spread over 1,000
   actors (``actor:u0``...) — and ``--history`` history rows, then ``ANALYZE``.
2. **Inbox pages** of 50 through ``WorkflowExecutor.inbox`` (one statement each): a typical
   actor (~0.1% of the tasks), a busy role (10%), actor and role together, and the role's page
   after its 5,000th task; the median of 30 runs each, and an ``instances(status=RUNNING)``
   page. The inbox statement's plan is read with ``EXPLAIN`` (JSON) and parsed: which index
   serves the todo table and whether any table of the statement is scanned in full.
3. **FORWARD approvals/s**, ``sql_workflow(index=True)`` against ``index=False`` on the same
   filled tables, alternating short slices (``--slice`` new OA instances of one side, two
   FORWARD approvals each in the README pattern: ``claim_task`` + ``submit_task_if_waiting``
   in one ``engine.begin()``), the order flipped every round, so that the shared machine's
   drift hits both sides alike. The ratio is all approvals over all time of each side; the
   spread is that of the per-round ratios. Target: index on ≥ 0.8× index off.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flow import FlowContext, FlowEngine, Graph  # noqa: E402
from flow.workflow import (  # noqa: E402
    ActorStateController,
    InstanceStatus,
    TaskAction,
    WorkflowExecutor,
)
from flow_sqla import FlowTables, migrations, sql_workflow  # noqa: E402

GRAPH = Graph.from_file(ROOT / "examples" / "oa.yml")
ACTORS = 1000
RUNS = 30
PAGE = 50
OPENED = datetime(2026, 1, 1)


@dataclass(frozen=True, kw_only=True)
class Server:
    name: str
    dsn: str


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What ``EXPLAIN`` says about the inbox statement."""

    indexes: tuple[str, ...]
    full_scans: tuple[str, ...]
    #: Indexes read in their own order under a LIMIT: the read stops after the page (a
    #: planner's choice for an identity that holds a large share of the tasks), not a scan.
    ordered_walks: tuple[str, ...] = ()

    def describe(self) -> str:
        used = ", ".join(self.indexes) or "none"
        scans = ", ".join(self.full_scans) or "none"
        text = f"indexes used: {used}; full scans: {scans}"
        if self.ordered_walks:
            text += f"; read in id order up to the page: {', '.join(self.ordered_walks)}"
        return text


# -- a throwaway database -------------------------------------------------------------------


@contextmanager
def throwaway(server: Server) -> Iterator[sa.Engine]:
    """A new empty database on ``server``, dropped afterwards."""
    name = f"flow_inbox_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(server.dsn, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine = sa.create_engine(sa.engine.make_url(server.dsn).set(database=name))
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            force = " WITH (FORCE)" if server.name == "pg" else ""
            conn.exec_driver_sql(f"DROP DATABASE {name}{force}")
        admin.dispose()


# -- filling --------------------------------------------------------------------------------


def numbers(engine: sa.Engine, count: int) -> sa.ColumnElement[int]:
    """A column counting 1..``count`` from a server-side sequence (one row each)."""
    if engine.dialect.name == "postgresql":
        series = sa.func.generate_series(1, count).table_valued("seq").render_derived()
        return series.c.seq
    table = sa.table(f"seq_1_to_{int(count)}", sa.column("seq", sa.Integer))
    return table.c.seq


def text(*parts: Any) -> sa.ColumnElement[str]:
    return sa.func.concat(*parts)


def fill(engine: sa.Engine, tables: FlowTables, tasks: int, history: int) -> float:
    """``tasks`` running instances with one open task each, ``history`` history rows."""
    started = time.perf_counter()
    with engine.begin() as conn:
        n = numbers(engine, tasks)
        instance = text("b-", n)
        repo = tables.repository
        conn.execute(
            repo.insert().from_select(
                ["instant_id", "graph_id", "status", "creator", "create_time", "update_time"],
                sa.select(
                    instance,
                    sa.literal("oa"),
                    sa.literal(int(InstanceStatus.RUNNING)),
                    sa.literal("employee"),
                    sa.literal(OPENED),
                    sa.literal(OPENED),
                ),
            )
        )
        candidate = sa.case(
            (n % 10 == 0, sa.literal("role:finance")), else_=text("actor:u", n % ACTORS)
        )
        todo = tables.todo
        conn.execute(
            todo.insert().from_select(
                ["instant_id", "graph_id", "node_id", "node_name", "state", "candidate"],
                sa.select(
                    instance,
                    sa.literal("oa"),
                    sa.literal("manager"),
                    sa.literal("Manager approval"),
                    sa.literal(0),
                    candidate,
                ),
            )
        )
    with engine.begin() as conn:
        h = numbers(engine, history)
        columns: dict[str, Any] = {
            "flow_ins_id": text("b-", h % max(tasks, 1)),
            "proc_def_id": sa.literal("oa"),
            "task_id": sa.literal("apply"),
            "source_node_code": sa.literal("apply"),
            "source_node_name": sa.literal("Apply"),
            "source_node_type": sa.literal("ACTIVITY"),
            "target_node_code": sa.literal("manager"),
            "target_node_name": sa.literal("Manager approval"),
            "target_node_type": sa.literal("ACTIVITY"),
            "assignee": text("u", h % ACTORS),
            "status": sa.literal(1002),
            "message": sa.literal("ok"),
            "create_time": sa.literal(OPENED),
        }
        conn.execute(tables.task.insert().from_select(list(columns), sa.select(*columns.values())))
    with engine.begin() as conn:
        for table in (tables.repository, tables.todo, tables.task):
            verb = "ANALYZE" if engine.dialect.name == "postgresql" else "ANALYZE TABLE"
            conn.exec_driver_sql(f"{verb} {table.name}")
    return time.perf_counter() - started


# -- inbox pages ----------------------------------------------------------------------------


def who(actor: str | None = None, role: str | None = None) -> FlowContext:
    return FlowContext.of(None, {"actor": actor, "role": role})


def page_ms(call: Callable[[], object]) -> float:
    """Median wall time of ``RUNS`` calls, in milliseconds (after one warm-up call)."""
    call()
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def explain(engine: sa.Engine, stmt: sa.Select[Any]) -> Plan:
    """The inbox statement's plan, parsed: indexes used, tables read in full."""
    sql = str(stmt.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            doc = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {sql}").scalar_one()
            return _pg_plan(doc if isinstance(doc, list) else json.loads(doc))
        doc = conn.exec_driver_sql(f"EXPLAIN FORMAT=JSON {sql}").scalar_one()
        return _mysql_plan(json.loads(doc))


def _walk(node: Any, limited: bool = False) -> Iterator[tuple[dict[str, Any], bool]]:
    """Every plan node, and whether a ``Limit`` node lies above it."""
    if isinstance(node, dict):
        yield node, limited
        limited = limited or node.get("Node Type") == "Limit"
        for value in node.values():
            yield from _walk(value, limited)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value, limited)


def _pg_plan(doc: Any) -> Plan:
    indexes: list[str] = []
    scans: list[str] = []
    walks: list[str] = []
    for node, limited in _walk(doc):
        kind = node.get("Node Type")
        if kind == "Seq Scan":
            scans.append(str(node.get("Relation Name")))
        elif isinstance(kind, str) and "Index" in kind and "Index Name" in node:
            indexes.append(str(node["Index Name"]))
            if "Index Cond" not in node:  # an index read in its order, without a range
                (walks if limited else scans).append(str(node["Index Name"]))
    return Plan(
        indexes=tuple(dict.fromkeys(indexes)), full_scans=tuple(scans), ordered_walks=tuple(walks)
    )


def _mysql_plan(doc: Any) -> Plan:
    indexes, scans = [], []
    for node, _ in _walk(doc):
        if "table_name" not in node or "access_type" not in node:
            continue
        if str(node["table_name"]).startswith("<derived"):
            continue  # a materialized page of the UNION ALL (at most PAGE rows), not a table
        if node["access_type"] == "ALL":
            scans.append(str(node["table_name"]))
        elif node["access_type"] == "index":  # a full index scan, in the index's order
            scans.append(f"{node['table_name']} ({node.get('key')}, whole index)")
        elif "key" in node:
            indexes.append(f"{node['key']} ({node['table_name']}, {node['access_type']})")
    return Plan(indexes=tuple(dict.fromkeys(indexes)), full_scans=tuple(scans))


def inbox_report(engine: sa.Engine, tables: FlowTables) -> None:
    wf = sql_workflow(
        engine, FlowEngine(), state_controller=ActorStateController("actor", "role"), tables=tables
    )
    deep = wf.inbox(who(role="finance"), limit=5000)[-1].cursor
    cases: list[tuple[str, FlowContext, int | None]] = [
        ("actor u7 (~0.1% of the tasks)", who(actor="u7"), None),
        ("role finance (10%)", who(role="finance"), None),
        ("actor u7 + role finance", who(actor="u7", role="finance"), None),
        ("role finance, page after 5,000", who(role="finance"), deep),
    ]
    for label, ctx, after in cases:
        got = len(wf.inbox(ctx, limit=PAGE, after=after))
        ms = page_ms(_inbox_call(wf, ctx, after))
        print(f"  inbox page of {got:>2}, {label:<32} {ms:8.2f} ms")
    running = InstanceStatus.RUNNING
    ms = page_ms(lambda: wf.instances(status=running, limit=PAGE))
    print(f"  instances(status=RUNNING) page of {PAGE}{'':<17} {ms:8.2f} ms")
    todo = _todo_statements(wf)
    for label, identities in (
        ("actor", ["actor:u7"]),
        ("actor + role", ["actor:u7", "role:finance"]),
    ):
        plan = explain(engine, todo.inbox_statement(identities, None, PAGE, None))
        verdict = "uses (candidate, id), no full scan" if _good(plan, tables) else "FULL SCAN"
        print(f"  plan, {label}: {plan.describe()} -> {verdict}")


def _inbox_call(wf: WorkflowExecutor, ctx: FlowContext, after: int | None) -> Callable[[], object]:
    return lambda: wf.inbox(ctx, limit=PAGE, after=after)


def _todo_statements(wf: WorkflowExecutor) -> Any:
    return wf.state_repository._todo  # type: ignore[attr-defined]


def _good(plan: Plan, tables: FlowTables) -> bool:
    index = tables.names.candidate_index
    return not plan.full_scans and any(index in used for used in plan.indexes)


# -- approvals/s, index on against index off -----------------------------------------------


def approver(engine: sa.Engine, tables: FlowTables, index: bool) -> Callable[[str], None]:
    """Drive one new OA instance to its end: two FORWARD approvals, each the README
    pattern (claim, then submit if waiting) in one transaction."""
    wf = sql_workflow(
        engine, FlowEngine(), state_controller=ActorStateController(), tables=tables, index=index
    )

    def run(instance_id: str) -> None:
        for actor in ("employee", "manager"):
            with engine.begin() as conn:
                ctx = FlowContext.of(instance_id, {"amount": 100}, connection=conn)
                ctx.put("actor", actor)
                task = wf.claim_task(GRAPH, ctx)
                if not wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx):
                    raise RuntimeError(f"{instance_id}: no task for {actor}")

    return run


def forward_report(engine: sa.Engine, tables: FlowTables, rounds: int, per_slice: int) -> None:
    sides = {
        "index=True": approver(engine, tables, True),
        "index=False": approver(engine, tables, False),
    }
    for name, run in sides.items():  # warm-up: statement caches, connections
        run(f"warm-{name}-{uuid.uuid4().hex[:6]}")
    spent = dict.fromkeys(sides, 0.0)
    done = dict.fromkeys(sides, 0)
    ratios = []
    for round_no in range(rounds):
        order = list(sides) if round_no % 2 == 0 else list(reversed(sides))
        rates: dict[str, float] = {}
        for name in order:
            tag = uuid.uuid4().hex[:6]
            started = time.perf_counter()
            for i in range(per_slice):
                sides[name](f"f-{tag}-{i}")
            elapsed = time.perf_counter() - started
            spent[name] += elapsed
            done[name] += 2 * per_slice
            rates[name] = 2 * per_slice / elapsed
        ratios.append(rates["index=True"] / rates["index=False"])
    on = done["index=True"] / spent["index=True"]
    off = done["index=False"] / spent["index=False"]
    low, high = min(ratios), max(ratios)
    print(
        f"  FORWARD approvals/s: index=True {on:7.1f}  index=False {off:7.1f}  "
        f"ratio {on / off:.2f}x (per round median {statistics.median(ratios):.2f}, "
        f"{low:.2f}..{high:.2f}; {rounds} rounds of {per_slice} instances per side)"
    )


# -- main -----------------------------------------------------------------------------------


def servers(only: str | None) -> list[Server]:
    found = []
    for name, variable in (("mysql", "FLOW_MYSQL_DSN"), ("pg", "FLOW_PG_DSN")):
        dsn = os.environ.get(variable)
        if only not in (None, name):
            continue
        if not dsn:
            print(f"{name}: skipped ({variable} is not set)")
            continue
        found.append(Server(name=name, dsn=dsn))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=100_000, help="open tasks (default 100000)")
    parser.add_argument(
        "--history", type=int, default=1_000_000, help="history rows (default 1000000)"
    )
    parser.add_argument("--rounds", type=int, default=10, help="approval rounds (default 10)")
    parser.add_argument("--slice", type=int, default=20, help="instances per slice (default 20)")
    parser.add_argument("--only", choices=("mysql", "pg"), help="one server only")
    args = parser.parse_args(argv)
    if min(args.tasks, args.history, args.rounds, args.slice) < 1 or args.tasks < 10 * PAGE:
        parser.error(f"sizes must be positive, --tasks at least {10 * PAGE}")
    for server in servers(args.only):
        with throwaway(server) as engine:
            migrations.upgrade(engine)
            tables = FlowTables()
            version = engine.dialect.server_version_info
            print(f"{server.name} ({engine.dialect.name} {'.'.join(map(str, version or ()))})")
            seconds = fill(engine, tables, args.tasks, args.history)
            print(
                f"  filled {args.tasks:,} open tasks and instances, {args.history:,} history "
                f"rows in {seconds:.1f} s"
            )
            inbox_report(engine, tables)
            forward_report(engine, tables, args.rounds, args.slice)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
