"""Every TaskAction on lines, gateways and parallel branches (ports of TaskActionTests,
WorkflowJumpActionTest, AdvancedScenarioTests, WorkflowComplexTest, JumpFlowTest)."""

from __future__ import annotations

import pytest
from wf_support import LINE, PARALLEL_ACTORS, load

from flow import FlowContext, FlowEngine, MapContainer, Node, SimpleFlowDriver
from flow.errors import GraphNotFoundError, NodeNotFoundError, TaskError
from flow.workflow import (
    ActorStateController,
    InMemoryStateRepository,
    InvalidActionError,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)

W, C, U, T = TaskState.WAITING, TaskState.COMPLETED, TaskState.UNKNOWN, TaskState.TERMINATED


def states(wf: WorkflowExecutor, ctx: FlowContext, graph_id: str, *ids: str) -> list[TaskState]:
    graph = wf.engine.get_graph_or_throw(graph_id)
    return [wf.get_state(graph.nodes[i], ctx) for i in ids]


@pytest.fixture
def wf(engine: FlowEngine) -> WorkflowExecutor:
    load(engine, LINE)
    return WorkflowExecutor(engine)


def claimed_id(wf: WorkflowExecutor, ctx: FlowContext, graph_id: str = "line") -> str | None:
    task = wf.claim_task(graph_id, ctx)
    return None if task is None else task.node_id


# -- FORWARD -------------------------------------------------------------------------------
def test_forward_completes_the_task_and_the_next_claim_makes_the_next_one_waiting(
    wf: WorkflowExecutor,
) -> None:
    ctx = FlowContext.of("i1")
    task = wf.claim_task("line", ctx)
    assert task is not None
    wf.submit_task(task, TaskAction.FORWARD, ctx)
    assert states(wf, ctx, "line", "A", "B") == [C, U]  # a human successor is not walked to
    assert claimed_id(wf, ctx) == "B"
    assert states(wf, ctx, "line", "B") == [W]


def test_forward_runs_the_task_code_of_a_human_node_at_submit_not_at_claim() -> None:
    calls: list[str] = []
    container = MapContainer()
    container.put_component("work", lambda ctx, node: calls.append(node.id))
    engine = FlowEngine(SimpleFlowDriver(container=container))
    load(
        engine,
        """
        id: code
        layout:
          - {id: start, type: start}
          - {id: A, task: "@work"}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    task = wf.claim_task("code", ctx)
    assert calls == []
    assert task is not None
    wf.submit_task(task, TaskAction.FORWARD, ctx)
    assert calls == ["A"]


def test_a_failing_task_code_fails_the_forward_with_a_task_error_and_keeps_the_state() -> None:
    def boom(ctx: FlowContext, node: Node) -> None:
        raise RuntimeError("no")

    engine = FlowEngine(SimpleFlowDriver(container=MapContainer({"boom": boom})))
    graph = load(
        engine,
        """
        id: boom
        layout:
          - {id: start, type: start}
          - {id: A, task: "@boom"}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    wf.claim_task("boom", ctx)
    with pytest.raises(TaskError, match="boom / A"):
        wf.submit_task_at("boom", "A", TaskAction.FORWARD, ctx)
    assert wf.get_state(graph.nodes["A"], ctx) is W


def test_forwarding_both_parallel_branches_finishes_the_flow(engine: FlowEngine) -> None:
    load(engine, PARALLEL_ACTORS)
    wf = WorkflowExecutor(engine, ActorStateController())
    user1, user2 = (
        FlowContext.of("i1", {"actor": "user1"}),
        FlowContext.of("i1", {"actor": "user2"}),
    )
    wf.submit_task_at("par", "A", TaskAction.FORWARD, user1)
    assert wf.claim_task("par", user1) is None
    assert claimed_id(wf, user2, "par") == "B"
    wf.submit_task_at("par", "B", TaskAction.FORWARD, user2)
    assert wf.claim_task("par", user2) is None
    assert user2.last_record is not None and user2.last_record.is_end


def test_forward_of_the_last_task_finishes_the_flow(wf: WorkflowExecutor) -> None:
    ctx = FlowContext.of("i1")
    for node_id in "ABC":
        wf.submit_task_at("line", node_id, TaskAction.FORWARD, ctx)
    assert wf.claim_task("line", ctx) is None
    assert states(wf, ctx, "line", "A", "B", "C") == [C, C, C]


# -- BACK ----------------------------------------------------------------------------------
def test_back_removes_the_node_and_its_predecessor_and_the_earlier_task_is_claimed_again(
    wf: WorkflowExecutor,
) -> None:
    ctx = FlowContext.of("i1")
    wf.claim_task("line", ctx)
    wf.submit_task_at("line", "A", TaskAction.FORWARD, ctx)
    wf.submit_task_at("line", "B", TaskAction.FORWARD, ctx)
    assert claimed_id(wf, ctx) == "C"
    wf.submit_task_at("line", "B", TaskAction.BACK, ctx)
    assert states(wf, ctx, "line", "A", "B", "C") == [U, U, W]
    assert claimed_id(wf, ctx) == "A"


def test_back_sets_nothing_waiting(wf: WorkflowExecutor) -> None:
    ctx = FlowContext.of("i1")
    wf.submit_task_at("line", "A", TaskAction.FORWARD, ctx)
    wf.submit_task_at("line", "B", TaskAction.FORWARD, ctx)
    wf.submit_task_at("line", "A", TaskAction.BACK, ctx)
    assert states(wf, ctx, "line", "A", "B") == [U, C]


def test_back_through_a_gateway_removes_the_gateways_activity_children(
    engine: FlowEngine,
) -> None:
    load(engine, PARALLEL_ACTORS.replace("id: par", "id: par2").replace(", link: end}", "}"))
    load(
        engine,
        """
        id: gwback
        layout:
          - {id: start, type: start}
          - {id: apply}
          - {id: split, type: parallel, link: [A, B]}
          - {id: A, link: join}
          - {id: B, link: join}
          - {id: join, type: parallel, link: end}
          - {id: end, type: end}
        """,
    )
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1")
    for node_id in ("apply", "A"):
        wf.submit_task_at("gwback", node_id, TaskAction.FORWARD, ctx)
    assert states(wf, ctx, "gwback", "apply", "split", "A", "B") == [C, C, C, W]
    wf.submit_task_at("gwback", "B", TaskAction.BACK, ctx)
    assert states(wf, ctx, "gwback", "apply", "split", "A", "B") == [U, U, U, U]
    assert claimed_id(wf, ctx, "gwback") == "apply"


# -- FORWARD_JUMP / BACK_JUMP ----------------------------------------------------------------
def test_forward_jump_completes_the_tasks_in_between_and_leaves_the_target_waiting(
    wf: WorkflowExecutor,
) -> None:
    ctx = FlowContext.of("i1")
    wf.claim_task("line", ctx)
    wf.submit_task_at("line", "C", TaskAction.FORWARD_JUMP, ctx)
    assert states(wf, ctx, "line", "A", "B", "C") == [C, C, W]
    assert claimed_id(wf, ctx) == "C"


def test_forward_jump_to_the_current_task_changes_nothing(wf: WorkflowExecutor) -> None:
    ctx = FlowContext.of("i1")
    wf.claim_task("line", ctx)
    wf.submit_task_at("line", "A", TaskAction.FORWARD_JUMP, ctx)
    assert states(wf, ctx, "line", "A", "B") == [W, U]


def test_forward_jump_runs_the_task_code_of_the_tasks_it_completes() -> None:
    calls: list[str] = []
    engine = FlowEngine(
        SimpleFlowDriver(container=MapContainer({"w": lambda c, n: calls.append(n.id)}))
    )
    load(
        engine,
        LINE.replace("title: Task A}", "task: '@w'}").replace("title: Task B}", "task: '@w'}"),
    )
    WorkflowExecutor(engine).submit_task_at(
        "line", "C", TaskAction.FORWARD_JUMP, FlowContext.of("i")
    )
    assert calls == ["A", "B"]


def test_forward_jump_crosses_gateways(engine: FlowEngine) -> None:
    load(engine, COMPLEX_JUMP)
    wf, ctx = WorkflowExecutor(engine), FlowContext.of("i1", {"path": 2})
    wf.submit_task_at("cj", "final", TaskAction.FORWARD_JUMP, ctx)
    assert states(wf, ctx, "cj", "path2", "path2-B", "final") == [C, C, W]


def test_forward_jump_into_another_parallel_branch_stops_at_its_task(engine: FlowEngine) -> None:
    load(engine, PARALLEL_ACTORS)
    wf, ctx = (
        WorkflowExecutor(engine, ActorStateController()),
        FlowContext.of("i1", {"actor": "user1"}),
    )
    assert claimed_id(wf, ctx, "par") == "A"
    wf.submit_task_at("par", "B", TaskAction.FORWARD_JUMP, ctx)
    assert states(wf, ctx, "par", "A", "B") == [C, W]
    assert wf.claim_task("par", ctx) is None


def test_back_jump_removes_the_tasks_in_between_and_leaves_the_target_waiting(
    wf: WorkflowExecutor,
) -> None:
    ctx = FlowContext.of("i1")
    for node_id in "ABC":
        wf.submit_task_at("line", node_id, TaskAction.FORWARD, ctx)
    wf.submit_task_at("line", "A", TaskAction.BACK_JUMP, ctx)
    assert states(wf, ctx, "line", "A", "B", "C") == [W, U, U]
    assert claimed_id(wf, ctx) == "A"


def test_back_jump_to_the_current_task_changes_nothing(wf: WorkflowExecutor) -> None:
    ctx = FlowContext.of("i1")
    wf.submit_task_at("line", "A", TaskAction.FORWARD, ctx)
    wf.claim_task("line", ctx)
    wf.submit_task_at("line", "B", TaskAction.BACK_JUMP, ctx)
    assert states(wf, ctx, "line", "A", "B") == [C, W]


def test_back_jump_then_forward_jump_then_forward_finishes(wf: WorkflowExecutor) -> None:
    ctx = FlowContext.of("i1")
    for node_id in "ABC":
        wf.submit_task_at("line", node_id, TaskAction.FORWARD, ctx)
    wf.submit_task_at("line", "A", TaskAction.BACK_JUMP, ctx)
    wf.submit_task_at("line", "C", TaskAction.FORWARD_JUMP, ctx)
    assert states(wf, ctx, "line", "A", "B", "C") == [C, C, W]
    wf.submit_task_at("line", "C", TaskAction.FORWARD, ctx)
    assert wf.claim_task("line", ctx) is None


def test_jumps_on_the_id_graph_reach_their_targets_for_an_admin(engine: FlowEngine) -> None:
    """Port of JumpFlowTest: a controller subclass lets an admin operate every node."""

    class AdminController(ActorStateController):
        def is_operatable(self, ctx: FlowContext, node: Node) -> bool:
            return ctx.get("role") == "admin" or super().is_operatable(ctx, node)

    load(
        engine,
        """
        id: test2
        layout:
          - {id: n0, meta: {role: employee}}
          - {id: n1, meta: {role: tl}}
          - {id: n2, meta: {role: dm}}
          - {id: n3, meta: {role: dm}}
          - {id: n4, meta: {role: dm}}
          - {id: n5}
          - {id: e, type: end}
        """,
    )
    wf, ctx = (
        WorkflowExecutor(engine, AdminController("role")),
        FlowContext.of("i1", {"role": "admin"}),
    )
    wf.submit_task_at("test2", "n3", TaskAction.FORWARD_JUMP, ctx)
    task = wf.claim_task("test2", ctx)
    assert task is not None and (task.node_id, task.state) == ("n3", W)
    wf.submit_task_at("test2", "n1", TaskAction.BACK_JUMP, ctx)
    task = wf.claim_task("test2", ctx)
    assert task is not None and (task.node_id, task.state) == ("n1", W)


# -- TERMINATE / RESTART -----------------------------------------------------------------------
def test_terminate_stops_the_flow_claim_returns_none_and_find_returns_the_terminated_task(
    wf: WorkflowExecutor,
) -> None:
    ctx = FlowContext.of("i1")
    wf.submit_task_at("line", "A", TaskAction.FORWARD, ctx)
    wf.submit_task_at("line", "B", TaskAction.TERMINATE, ctx)
    assert states(wf, ctx, "line", "B") == [T]
    assert wf.claim_task("line", ctx) is None
    found = wf.find_task("line", ctx)
    assert found is not None and (found.node_id, found.state) == ("B", T)


def test_terminate_runs_no_task_code() -> None:
    calls: list[str] = []
    engine = FlowEngine(
        SimpleFlowDriver(container=MapContainer({"w": lambda c, n: calls.append(n.id)}))
    )
    load(engine, LINE.replace("title: Task A}", "task: '@w'}"))
    WorkflowExecutor(engine).submit_task_at("line", "A", TaskAction.TERMINATE, FlowContext.of("i"))
    assert calls == []


def test_restart_after_terminate_clears_every_state_and_the_flow_starts_over(
    wf: WorkflowExecutor,
) -> None:
    ctx = FlowContext.of("i1")
    wf.submit_task_at("line", "A", TaskAction.FORWARD, ctx)
    wf.submit_task_at("line", "B", TaskAction.TERMINATE, ctx)
    wf.submit_task_at("line", "start", TaskAction.RESTART, ctx)
    assert states(wf, ctx, "line", "A", "B", "C") == [U, U, U]
    task = wf.claim_task("line", ctx)
    assert task is not None and (task.node_id, task.state) == ("A", W)


# -- bad input ----------------------------------------------------------------------------------
def test_an_unknown_action_raises_invalid_action_error(wf: WorkflowExecutor) -> None:
    with pytest.raises(InvalidActionError):
        wf.submit_task_at("line", "A", TaskAction.UNKNOWN, FlowContext.of("i1"))
    with pytest.raises(ValueError):
        wf.submit_task_at("line", "A", 999, FlowContext.of("i1"))  # type: ignore[arg-type]


def test_an_unknown_node_id_raises_node_not_found(wf: WorkflowExecutor) -> None:
    with pytest.raises(NodeNotFoundError, match="NON_EXISTENT"):
        wf.submit_task_at("line", "NON_EXISTENT", TaskAction.FORWARD, FlowContext.of("i1"))


@pytest.mark.parametrize("node_id", [5, None, ["A"], {"id": "A"}])
def test_a_node_id_that_is_no_string_raises_node_not_found(
    wf: WorkflowExecutor, node_id: object
) -> None:
    """A JSON list or object taken from a request used to fail the lookup with a bare
    ``TypeError`` (unhashable)."""
    with pytest.raises(NodeNotFoundError, match="in graph 'line'"):
        wf.submit_task_at("line", node_id, TaskAction.FORWARD, FlowContext.of("i1"))  # type: ignore[arg-type]


def test_an_unknown_graph_id_in_a_submit_raises_graph_not_found(wf: WorkflowExecutor) -> None:
    with pytest.raises(GraphNotFoundError):
        wf.submit_task_at("nope", "A", TaskAction.FORWARD, FlowContext.of("i1"))


# -- submit_task_if_waiting ----------------------------------------------------------------------
def test_submit_if_waiting_succeeds_once_then_refuses_the_same_task(wf: WorkflowExecutor) -> None:
    ctx = FlowContext.of("i1")
    task = wf.claim_task("line", ctx)
    assert wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx) is True
    assert wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx) is False
    assert states(wf, ctx, "line", "A", "B") == [C, U]


def test_submit_if_waiting_refuses_none_and_tasks_not_waiting(engine: FlowEngine) -> None:
    load(engine, ACTOR_LINE_TEXT)
    wf = WorkflowExecutor(engine, ActorStateController())
    other = FlowContext.of("i1", {"actor": "user2"})
    assert wf.submit_task_if_waiting(None, TaskAction.FORWARD, other) is False
    unknown = wf.find_task("actors", other)
    assert unknown is not None and unknown.state is U
    assert wf.submit_task_if_waiting(unknown, TaskAction.FORWARD, other) is False


def test_submit_if_waiting_rechecks_that_the_context_may_operate_the_task(
    engine: FlowEngine,
) -> None:
    load(engine, ACTOR_LINE_TEXT)
    wf = WorkflowExecutor(engine, ActorStateController())
    task = wf.claim_task("actors", FlowContext.of("i1", {"actor": "user1"}))
    other = FlowContext.of("i1", {"actor": "user2"})
    assert wf.submit_task_if_waiting(task, TaskAction.FORWARD, other) is False
    assert states(wf, other, "actors", "A") == [W]


# -- instances and recovery -----------------------------------------------------------------
def test_instances_do_not_share_states(wf: WorkflowExecutor) -> None:
    one, two = FlowContext.of("i1"), FlowContext.of("i2")
    wf.submit_task_at("line", "A", TaskAction.FORWARD, one)
    task = wf.claim_task("line", two)
    assert task is not None and (task.node_id, task.state) == ("A", W)
    assert states(wf, one, "line", "A") == [C]


def test_a_new_executor_over_the_same_repository_continues_where_the_old_one_stopped(
    engine: FlowEngine,
) -> None:
    load(engine, LINE)
    repo = InMemoryStateRepository()
    old = WorkflowExecutor(engine, state_repository=repo)
    old.submit_task_at("line", "A", TaskAction.FORWARD, FlowContext.of("p1"))
    old.submit_task_at("line", "B", TaskAction.FORWARD, FlowContext.of("p1"))
    new = WorkflowExecutor(engine, state_repository=repo)
    assert claimed_id(new, FlowContext.of("p1")) == "C"
    assert repo.states("p1") == {"line:A": C, "line:B": C, "line:C": W}


ACTOR_LINE_TEXT = """
id: actors
layout:
  - {id: start, type: start}
  - {id: A, meta: {actor: user1}}
  - {id: B, meta: {actor: user2}}
  - {id: end, type: end}
"""

COMPLEX_JUMP = """
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
"""
