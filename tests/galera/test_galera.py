"""What the library must respect on a MariaDB Galera cluster, each checked on a live 3-node one:
every table has a primary key and is InnoDB, migrations take no table locks and rely on no
cross-node lock, and cross-node races of claim + submit_task_if_waiting — where the row lock is
node-local and the loser is rejected at COMMIT — give exactly one winner and typed errors."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from flow.context import FlowContext
from flow.engine import FlowEngine
from flow.errors import FlowError
from flow.graph import Graph
from flow.workflow import ActorStateController, TaskAction, WorkflowExecutor
from flow_sqla import migrations, run_in_transaction, sql_workflow

REPO = Path(__file__).resolve().parents[2]
OA = Graph.from_file(REPO / "examples" / "oa.yml")
THREAD_TIMEOUT = 120.0
ROUNDS = 10
WORKERS_PER_NODE = 2


def executor(engine: sa.Engine) -> WorkflowExecutor:
    flow_engine = FlowEngine()
    flow_engine.load(OA)
    return sql_workflow(engine, flow_engine, state_controller=ActorStateController())


def ctx(instance_id: str, actor: str, conn: Any = None, **data: Any) -> FlowContext:
    return FlowContext.of(instance_id, {"actor": actor, **data}, connection=conn)


def approve(ex: WorkflowExecutor, instance_id: str, actor: str, conn: Any = None) -> bool:
    c = ctx(instance_id, actor, conn, amount=1)
    task = ex.claim_task("oa", c)
    return task is not None and ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)


@pytest.fixture
def nodes(galera_urls: list[str]) -> Iterator[list[sa.Engine]]:
    """One engine per node on the test's database, migrated through node 1."""
    engines = [sa.create_engine(url, pool_size=8) for url in galera_urls]
    migrations.upgrade(engines[0])
    try:
        yield engines
    finally:
        for engine in engines:
            engine.dispose()


def run_threads(count: int, target: Callable[[int], Any]) -> list[Any]:
    """``target(i)`` in ``count`` threads started together; each result or exception."""
    results: list[Any] = [None] * count
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
            results[i] = target(i)
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    return results


def history_count(engine: sa.Engine, instance_id: str, node: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(
                    "SELECT COUNT(*) FROM bpm_flow_task "
                    "WHERE flow_ins_id = :i AND source_node_code = :n"
                ),
                {"i": instance_id, "n": node},
            ).scalar_one()
        )


# -- schema facts ---------------------------------------------------------------------------


def test_every_table_has_a_primary_key_and_is_innodb_on_every_node(
    nodes: list[sa.Engine],
) -> None:
    """Galera replicates InnoDB rows only, and a table without a primary key replicates
    deletes/updates slowly or not at all: checked on whatever tables exist at head."""
    for engine in nodes:
        with engine.connect() as conn:
            schema = conn.exec_driver_sql("SELECT DATABASE()").scalar_one()
            tables = dict(
                conn.execute(
                    sa.text(
                        "SELECT table_name, engine FROM information_schema.tables "
                        "WHERE table_schema = :s"
                    ),
                    {"s": schema},
                ).all()
            )
            keyed = set(
                conn.execute(
                    sa.text(
                        "SELECT table_name FROM information_schema.table_constraints "
                        "WHERE table_schema = :s AND constraint_type = 'PRIMARY KEY'"
                    ),
                    {"s": schema},
                ).scalars()
            )
        assert {"bpm_flow_repository", "bpm_flow_task"} <= set(tables)
        assert any("version" in t for t in tables)  # the migrations' own bookkeeping table
        assert set(tables) - keyed == set(), "tables without a primary key"
        assert {t for t, e in tables.items() if e != "InnoDB"} == set()


def test_migrations_take_no_table_lock_and_no_cross_node_lock(
    galera_urls: list[str],
) -> None:
    """LOCK TABLES is not replicated and GET_LOCK is node-local on Galera (checked below), so
    neither may be what keeps two migrations apart; docs/migrations.md says to run them on
    one node when the library serializes them with a node-local lock."""
    engine = sa.create_engine(galera_urls[0])
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    try:
        migrations.upgrade(engine)
    finally:
        engine.dispose()
    assert statements
    text = "\n".join(statements).upper()
    assert not re.search(r"\bLOCK\s+TABLES?\b", text)
    if re.search(r"\bGET_LOCK\b", text):
        docs = (REPO / "docs" / "migrations.md").read_text(encoding="utf-8")
        assert "one node" in docs


def test_get_lock_is_node_local(galera_urls: list[str]) -> None:
    """The fact behind the test above: two nodes both get the same named lock at once."""
    engines = [sa.create_engine(url, poolclass=sa.NullPool) for url in galera_urls[:2]]
    try:
        with engines[0].connect() as first, engines[1].connect() as second:
            got = [
                c.exec_driver_sql("SELECT GET_LOCK('flow_galera_probe', 0)").scalar_one()
                for c in (first, second)
            ]
            for c in (first, second):
                c.exec_driver_sql("SELECT RELEASE_LOCK('flow_galera_probe')")
    finally:
        for engine in engines:
            engine.dispose()
    assert got == [1, 1]


# -- cross-node races -----------------------------------------------------------------------


def race_rounds(
    nodes: list[sa.Engine], attempt: Callable[[WorkflowExecutor, sa.Engine, str], bool]
) -> tuple[list[list[Any]], list[str]]:
    """ROUNDS rounds: an instance waits for the manager, then WORKERS_PER_NODE threads per
    node run ``attempt(executor, engine, instance_id)`` together. Returns each round's results
    and instance ids."""
    executors = [executor(engine) for engine in nodes]
    workers = [(executors[i], nodes[i]) for i in range(len(nodes)) for _ in range(WORKERS_PER_NODE)]
    rounds, ids = [], []
    for r in range(ROUNDS):
        instance_id = f"race-{r}"
        # Set up through node 1 only: the other nodes apply its writesets a moment later
        # (reads are not causal by default), and the race must be the only conflict.
        assert approve(executors[0], instance_id, "employee")
        executors[0].claim_task("oa", ctx(instance_id, "manager"))

        def work(i: int, instance_id: str = instance_id) -> bool:
            ex, engine = workers[i]
            return attempt(ex, engine, instance_id)

        rounds.append(run_threads(len(workers), work))
        ids.append(instance_id)
    return rounds, ids


def test_cross_node_race_through_the_helper_has_one_winner_and_no_errors(
    nodes: list[sa.Engine],
) -> None:
    retries: list[FlowError] = []

    def attempt(ex: WorkflowExecutor, engine: sa.Engine, instance_id: str) -> bool:
        return run_in_transaction(
            engine,
            lambda conn: approve(ex, instance_id, "manager", conn),
            attempts=10,
            idempotent=True,
            on_retry=lambda n, e: retries.append(e),
        )

    rounds, ids = race_rounds(nodes, attempt)
    for results, instance_id in zip(rounds, ids, strict=True):
        assert sorted(results, key=repr) == [False] * (len(results) - 1) + [True], results
        for engine in nodes:  # every node has exactly one manager approval
            assert history_count(engine, instance_id, "manager") == 1
    assert all(type(e).__name__ == "ConcurrentSubmitError" for e in retries)


def test_cross_node_race_of_library_owned_units_gives_typed_errors(
    nodes: list[sa.Engine],
) -> None:
    """Without the helper (each operation its own transaction): a loser rejected at COMMIT
    by certification gets ConcurrentSubmitError, never a driver error; still one winner."""

    def attempt(ex: WorkflowExecutor, engine: sa.Engine, instance_id: str) -> bool:
        return approve(ex, instance_id, "manager")

    rounds, ids = race_rounds(nodes, attempt)
    for results, instance_id in zip(rounds, ids, strict=True):
        assert results.count(True) == 1, results
        others = [r for r in results if r is not True]
        assert all(r is False or type(r).__name__ == "ConcurrentSubmitError" for r in others), (
            others
        )
        assert history_count(nodes[0], instance_id, "manager") == 1


# -- causal reads ---------------------------------------------------------------------------
CAUSAL_ROUNDS = 150


def test_with_sync_wait_5_the_next_request_on_another_node_sees_the_last_commit(
    nodes: list[sa.Engine], galera_urls: list[str]
) -> None:
    """docs/scaling.md: ``wsrep_sync_wait = 5`` gives read-your-writes across nodes. The
    manager's claim commits on node 1, their next request approves on node 2 — in a process
    that has not met the instance, whose operation begins with an insert-if-absent of the row,
    which ``wsrep_sync_wait = 1`` (reads only) does not hold back: there, some of these
    approvals found no task waiting (about 2 in 100) although nobody had decided it."""
    causal = sa.create_engine(
        galera_urls[1], connect_args={"init_command": "SET SESSION wsrep_sync_wait = 5"}
    )
    try:
        first = executor(nodes[0])
        missed = []
        for n in range(CAUSAL_ROUNDS):
            instance_id = f"causal-{n}"
            assert approve(first, instance_id, "employee")
            assert first.claim_task("oa", ctx(instance_id, "manager")) is not None
            if not approve(executor(causal), instance_id, "manager"):
                missed.append(instance_id)
        assert missed == []
    finally:
        causal.dispose()
