"""Per-instance serialization in one process; different instances in parallel."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from wf_support import LINE, ListRecorder, load

from flow import FlowContext, FlowEngine, MapContainer, Node, SimpleFlowDriver
from flow.workflow import InMemoryStateRepository, TaskAction, TaskState, WorkflowExecutor
from flow.workflow._locks import INSTANCE_LOCKS

THREADS = 16
GATED = """
id: gated
layout:
  - {id: start, type: start}
  - {id: A, task: "@gate"}
  - {id: end, type: end}
"""


def test_sixteen_threads_racing_submit_if_waiting_on_one_task_let_exactly_one_win(
    engine: FlowEngine,
) -> None:
    load(engine, LINE)
    recorder = ListRecorder()
    wf = WorkflowExecutor(engine, recorder=recorder)
    task = wf.claim_task("line", FlowContext.of("race"))
    barrier = threading.Barrier(THREADS)

    def attempt(_: int) -> bool:
        ctx = FlowContext.of("race")
        barrier.wait()
        return wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(attempt, range(THREADS)))
    assert results.count(True) == 1
    assert len(recorder.records) == 1


def test_sixteen_threads_on_sixteen_instances_all_finish(engine: FlowEngine) -> None:
    load(engine, LINE)
    repo = InMemoryStateRepository()
    wf = WorkflowExecutor(engine, state_repository=repo)
    barrier = threading.Barrier(THREADS)

    def run(n: int) -> bool:
        ctx = FlowContext.of(f"inst-{n}")
        barrier.wait()
        while (task := wf.claim_task("line", ctx)) is not None:
            wf.submit_task(task, TaskAction.FORWARD, ctx)
        return ctx.last_record is not None and ctx.last_record.is_end

    with ThreadPoolExecutor(THREADS) as pool:
        assert all(pool.map(run, range(THREADS)))
    assert all(
        repo.states(f"inst-{n}") == {f"line:{x}": TaskState.COMPLETED for x in "ABC"}
        for n in range(THREADS)
    )


def test_a_submit_blocked_on_one_instance_does_not_block_another_instance() -> None:
    """Instance A's task waits until instance B's task has run; with one global lock B could
    never run while A holds it and the wait would time out."""
    b_ran = threading.Event()
    outcome: dict[str, bool] = {}

    def gate(ctx: FlowContext, node: Node) -> None:
        if ctx.instance_id == "A":
            outcome["A saw B"] = b_ran.wait(timeout=30)
        else:
            b_ran.set()

    engine = FlowEngine(SimpleFlowDriver(container=MapContainer({"gate": gate})))
    load(engine, GATED)
    wf = WorkflowExecutor(engine)
    worker = threading.Thread(
        target=wf.submit_task_at, args=("gated", "A", TaskAction.FORWARD, FlowContext.of("A"))
    )
    worker.start()
    wf.submit_task_at("gated", "A", TaskAction.FORWARD, FlowContext.of("B"))
    worker.join()
    assert outcome == {"A saw B": True}


def test_a_claim_waits_for_a_submit_on_the_same_instance() -> None:
    entered, release = threading.Event(), threading.Event()

    def gate(ctx: FlowContext, node: Node) -> None:
        entered.set()
        release.wait(timeout=30)

    engine = FlowEngine(SimpleFlowDriver(container=MapContainer({"gate": gate})))
    repo = InMemoryStateRepository()
    load(engine, GATED)
    wf = WorkflowExecutor(engine, state_repository=repo)
    submitter = threading.Thread(
        target=wf.submit_task_at, args=("gated", "A", TaskAction.FORWARD, FlowContext.of("S"))
    )
    submitter.start()
    entered.wait(timeout=30)
    claims: list[object] = []
    claimer = threading.Thread(
        target=lambda: claims.append(wf.claim_task("gated", FlowContext.of("S")))
    )
    claimer.start()
    entry = INSTANCE_LOCKS._entries[(id(repo), "S")]
    while claimer.is_alive() and entry.refs < 2:  # until the claim is queued on the lock
        threading.Event().wait(0)
    assert claims == []
    release.set()
    submitter.join()
    claimer.join()
    assert claims == [None]  # it saw the finished flow, not a half-done submit


def test_instance_locks_do_not_outlive_the_operations(engine: FlowEngine) -> None:
    load(engine, LINE)
    wf = WorkflowExecutor(engine)
    for n in range(50):
        wf.claim_task("line", FlowContext.of(f"leak-{n}"))
    assert len(INSTANCE_LOCKS) == 0


class _FailingUnitOfWork(InMemoryStateRepository):
    """A repository whose unit of work fails when it starts or when it ends (its flush)."""

    def __init__(self, fail_on: str) -> None:
        super().__init__()
        self.fail_on = fail_on

    @contextmanager
    def unit_of_work(self, ctx: FlowContext, *, lock: bool = True) -> Iterator[None]:
        if self.fail_on == "start":
            raise ConnectionError("database down")
        yield
        if self.fail_on == "end":
            raise ConnectionError("flush failed")


@pytest.mark.parametrize("fail_on", ["start", "end"])
def test_a_failing_unit_of_work_releases_the_instance_lock(
    engine: FlowEngine, fail_on: str
) -> None:
    load(engine, LINE)
    repo = _FailingUnitOfWork(fail_on)
    wf = WorkflowExecutor(engine, state_repository=repo)
    with pytest.raises(ConnectionError):
        wf.claim_task("line", FlowContext.of("F"))
    assert len(INSTANCE_LOCKS) == 0
    repo.fail_on = "never"
    other_thread = ThreadPoolExecutor(1)
    claimed = other_thread.submit(wf.claim_task, "line", FlowContext.of("F")).result(timeout=30)
    other_thread.shutdown()
    assert claimed is not None and claimed.node.id == "A"
