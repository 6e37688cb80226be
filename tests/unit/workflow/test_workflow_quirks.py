"""The reference quirks of semantics.md §5, matched on purpose."""

from __future__ import annotations

from wf_support import LINE, PARALLEL_ACTORS, load

from flow import FlowContext, FlowEngine
from flow.workflow import ActorStateController, TaskAction, TaskState, WorkflowExecutor


def test_claim_on_a_fresh_instance_returns_the_completed_gateway_when_no_branch_is_operatable(
    engine: FlowEngine,
) -> None:
    load(engine, PARALLEL_ACTORS)
    wf = WorkflowExecutor(engine, ActorStateController())
    task = wf.claim_task("par", FlowContext.of("fresh", {"actor": "user3"}))
    assert task is not None and (task.node_id, task.state) == ("split", TaskState.COMPLETED)
    assert wf.claim_task("par", FlowContext.of("fresh", {"actor": "user3"})) is None


def test_forward_does_not_check_that_the_task_was_waiting(engine: FlowEngine) -> None:
    graph = load(engine, LINE)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    wf.submit_task_at("line", "B", TaskAction.FORWARD, ctx)  # never claimed, A not done
    assert wf.get_state(graph.nodes["B"], ctx) is TaskState.COMPLETED
    task = wf.claim_task("line", ctx)
    assert task is not None and task.node_id == "A"


def test_forward_jump_off_the_current_path_forwards_every_task_met_and_leaves_the_target_unknown(
    engine: FlowEngine,
) -> None:
    graph = load(
        engine,
        """
        id: cj
        layout:
          - {id: start, type: start, link: gateway}
          - {id: gateway, type: exclusive, link: [{nextId: path1, when: "path == 1"},
                                                  {nextId: path2, when: "path == 2"}]}
          - {id: path1, link: path1-B}
          - {id: path1-B, link: merge}
          - {id: path2, link: path2-B}
          - {id: path2-B, link: merge}
          - {id: merge, type: exclusive, link: final}
          - {id: final, link: end}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1", {"path": 1})
    wf.submit_task_at("cj", "path2-B", TaskAction.FORWARD_JUMP, ctx)
    state = {n: wf.get_state(graph.nodes[n], ctx) for n in ("path1", "path1-B", "final", "path2-B")}
    assert state == {
        "path1": TaskState.COMPLETED,
        "path1-B": TaskState.COMPLETED,
        "final": TaskState.COMPLETED,
        "path2-B": TaskState.UNKNOWN,
    }


def test_a_parallel_join_whose_branches_cannot_all_arrive_never_fires(engine: FlowEngine) -> None:
    graph = load(
        engine,
        """
        id: stuck
        layout:
          - {id: start, type: start, link: pick}
          - {id: pick, type: exclusive, link: [{nextId: A, when: "x > 0"}, {nextId: B}]}
          - {id: A, link: join}
          - {id: B, link: join}
          - {id: join, type: parallel, link: C}
          - {id: C, link: end}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1", {"x": 1})
    wf.submit_task_at("stuck", "A", TaskAction.FORWARD, ctx)
    assert wf.claim_task("stuck", ctx) is None
    assert ctx.last_record is not None and not ctx.last_record.is_end
    assert wf.get_state(graph.nodes["C"], ctx) is TaskState.UNKNOWN
