"""Workflow executor benchmark: throughput, state reads per cycle, multi-instance speed-up.

Run: ``.venv/bin/python bench/workflow_bench.py``. A *cycle* is one ``claim_task`` plus one
``submit_task(FORWARD)``. Numbers are wall-clock on this machine; only the ratios travel.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from flow import FlowContext, FlowEngine, Graph, GraphSpec, MapContainer, Node, SimpleFlowDriver
from flow.workflow import (
    ActorStateController,
    InMemoryStateRepository,
    TaskAction,
    TaskRecord,
    TaskState,
    WorkflowExecutor,
)

OA_FILE = Path(__file__).resolve().parents[1] / "examples" / "oa.yml"
OA_ACTORS = ("employee", "manager", "director")


class CountingRepository(InMemoryStateRepository):
    """The in-memory repository, counting ``state_get`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def state_get(self, ctx: FlowContext, node: Node) -> TaskState:
        self.reads += 1
        return super().state_get(ctx, node)

    def vars_get(self, ctx: FlowContext, node: Node) -> Mapping[str, Any] | None:
        return None


class NullRecorder:
    def record(self, ctx: FlowContext, record: TaskRecord) -> None:
        pass


def oa_instance(wf: WorkflowExecutor, instance_id: str, amount: int) -> int:
    """Run one OA instance to its end; return the number of cycles."""
    cycles = 0
    for actor in OA_ACTORS:
        ctx = FlowContext.of(instance_id, {"actor": actor, "amount": amount})
        task = wf.claim_task("oa", ctx)
        if task is not None:
            wf.submit_task(task, TaskAction.FORWARD, ctx)
            cycles += 1
    return cycles


def line_graph(size: int, task: str | None = None) -> Graph:
    spec = GraphSpec(f"line{size}")
    spec.add_start("start").link_add("t1")
    for i in range(1, size + 1):
        spec.add_activity(f"t{i}", task=task).link_add(f"t{i + 1}" if i < size else "end")
    spec.add_end("end")
    return spec.create()


def line_instance(wf: WorkflowExecutor, graph: Graph, instance_id: str) -> int:
    ctx = FlowContext.of(instance_id)
    cycles = 0
    while (task := wf.claim_task(graph, ctx)) is not None:
        wf.submit_task(task, TaskAction.FORWARD, ctx)
        cycles += 1
    return cycles


def bench_oa_throughput(instances: int = 3000, *, recorder: bool = False) -> float:
    engine = FlowEngine()
    engine.load(OA_FILE)
    wf = WorkflowExecutor(
        engine, ActorStateController(), recorder=NullRecorder() if recorder else None
    )
    start = time.perf_counter()
    cycles = sum(oa_instance(wf, f"oa-{n}", 100 if n % 2 else 9000) for n in range(instances))
    return cycles / (time.perf_counter() - start)


def reads_per_cycle_oa() -> float:
    engine = FlowEngine()
    engine.load(OA_FILE)
    repo = CountingRepository()
    wf = WorkflowExecutor(engine, ActorStateController(), repo)
    cycles = sum(oa_instance(wf, f"r-{n}", 100) for n in range(100))
    return repo.reads / cycles


def reads_per_cycle_line(size: int) -> tuple[float, int, int]:
    """(average, first cycle, last cycle) state reads on a line of ``size`` activities."""
    graph = line_graph(size)
    repo = CountingRepository()
    wf = WorkflowExecutor(FlowEngine(), state_repository=repo)
    ctx = FlowContext.of("line")
    per_cycle: list[int] = []
    while True:
        before = repo.reads
        task = wf.claim_task(graph, ctx)
        if task is None:
            break
        wf.submit_task(task, TaskAction.FORWARD, ctx)
        per_cycle.append(repo.reads - before)
    return sum(per_cycle) / len(per_cycle), per_cycle[0], per_cycle[-1]


def sql_reads_per_cycle_line(size: int, directory: Path) -> tuple[float, float]:
    """(row reads, statements) per cycle on a line of ``size`` activities through flow_sqla on
    an SQLite file: every ``state_get`` of an operation is answered from the one row read at
    its start, so database reads stay flat while ``state_get`` calls grow with the position."""
    import sqlalchemy as sa

    from flow_sqla import migrations, sql_workflow

    db = sa.create_engine(f"sqlite:///{directory / f'line{size}.sqlite'}")
    migrations.upgrade(db)
    statements: list[str] = []
    sa.event.listen(db, "before_cursor_execute", lambda *a: statements.append(a[2]))
    wf = sql_workflow(db, FlowEngine())
    graph = line_graph(size)
    ctx = FlowContext.of("line")
    cycles = 0
    while (task := wf.claim_task(graph, ctx)) is not None:
        wf.submit_task(task, TaskAction.FORWARD, ctx)
        cycles += 1
    db.dispose()
    reads = sum(1 for sql in statements if "RETURNING" in sql or sql.lstrip().startswith("SELECT"))
    return reads / cycles, len(statements) / cycles


def bench_speedup(threads: int = 16, size: int = 10) -> tuple[float, float]:
    """Seconds to finish ``threads`` instances of a line whose tasks release the GIL for 1 ms
    (``time.sleep(0.001)``, standing in for I/O), one thread vs ``threads`` threads."""
    container = MapContainer({"io": lambda ctx, node: time.sleep(0.001)})
    engine = FlowEngine(SimpleFlowDriver(container=container))
    graph = line_graph(size, task="@io")
    engine.load(graph)

    def run(prefix: str, workers: int) -> float:
        wf = WorkflowExecutor(engine)
        barrier = threading.Barrier(workers)

        def one(n: int) -> int:
            if workers > 1:
                barrier.wait()
            return line_instance(wf, graph, f"{prefix}-{n}")

        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(threads)))
        return time.perf_counter() - start

    return run("seq", 1), run("par", threads)


def main() -> None:
    print("workflow_bench — in-memory repository, examples/oa.yml (ActorStateController)")
    print(f"  OA claim+submit cycles/s:                 {bench_oa_throughput():8.0f}")
    print(f"  OA claim+submit cycles/s (with recorder): {bench_oa_throughput(recorder=True):8.0f}")
    print(f"  state_get per cycle, OA graph:            {reads_per_cycle_oa():8.1f}")
    for size in (20, 100):
        avg, first, last = reads_per_cycle_line(size)
        print(
            f"  state_get per cycle, line of {size:3d}:       {avg:8.1f}"
            f"   (first cycle {first}, last cycle {last})"
        )
    with tempfile.TemporaryDirectory() as directory:
        for size in (20, 100):
            reads, stmts = sql_reads_per_cycle_line(size, Path(directory))
            print(
                f"  flow_sqla (SQLite), line of {size:3d}:        {reads:8.1f} row reads and"
                f" {stmts:.1f} statements per cycle"
            )
    seq, par = bench_speedup()
    print(
        f"  16 instances x 10 tasks (1 ms I/O each): 1 thread {seq:.3f}s, "
        f"16 threads {par:.3f}s, speed-up x{seq / par:.1f}"
    )


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__).parse_args()  # --help, and no stray arguments
    main()
