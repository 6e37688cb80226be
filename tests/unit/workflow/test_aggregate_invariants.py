"""aggregate.md §6 on the in-memory repository, by seeded random walks over graphs with
exclusive, inclusive and parallel gateways."""

from __future__ import annotations

import pytest
from aggregate_walk import check_invariants, controller, flow_engine, new_walker

from flow import FlowContext
from flow.workflow import InMemoryStateRepository, TaskAction, WorkflowExecutor


class FailingRecorder:
    """Fails every submit whose context says so: the submit's unit of work is undone."""

    def record(self, ctx: FlowContext, record: object) -> None:
        if ctx.get("fail"):
            raise RuntimeError("recorder down")


def _executor() -> WorkflowExecutor:
    return WorkflowExecutor(flow_engine(), controller(), InMemoryStateRepository())


# 24 and 173 jump onto a gateway, which the jump leaves WAITING.
@pytest.mark.parametrize("seed", [*range(12), 24, 173])
def test_invariants_hold_after_every_operation_of_a_random_walk(seed: int) -> None:
    walker = new_walker(_executor(), seed)
    for _ in range(150):
        walker.step()
        check_invariants(walker)


def test_a_failed_submit_leaves_index_and_status_untouched() -> None:
    ex = WorkflowExecutor(flow_engine(), controller(), recorder=FailingRecorder())
    ctx = FlowContext.of("i-1", {"actor": "alice", "amount": 1})
    task = ex.claim_task("excl", ctx)
    before = (ex.open_tasks("i-1"), ex.status("i-1"), ex.instances())
    ctx.put("fail", True)
    with pytest.raises(RuntimeError):
        ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)
    with pytest.raises(RuntimeError):
        ex.withdraw("excl", ctx)
    assert (ex.open_tasks("i-1"), ex.status("i-1"), ex.instances()) == before


def test_an_operation_that_writes_no_state_stores_nothing() -> None:
    ex = _executor()
    assert ex.find_task("excl", FlowContext.of("nobody", {"amount": 1})) is not None
    assert ex.status("nobody") is None
    assert (ex.open_tasks("nobody"), ex.instances()) == ([], [])
