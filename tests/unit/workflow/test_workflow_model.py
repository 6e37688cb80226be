"""Codes, controllers and the in-memory repository, without walking a graph."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from wf_support import LINE, load

from flow import FlowContext, FlowEngine, GraphSpec, Node
from flow.errors import FlowError
from flow.workflow import (
    ActorStateController,
    BlockStateController,
    InMemoryStateRepository,
    InvalidActionError,
    NotBlockStateController,
    StateController,
    StateRepository,
    SupportsUnitOfWork,
    TaskAction,
    TaskState,
)


def test_task_state_codes_are_the_reference_codes() -> None:
    assert [int(s) for s in TaskState] == [0, 1001, 1002, 1003]


def test_task_action_codes_are_the_reference_codes() -> None:
    assert [int(a) for a in TaskAction] == [0, 1010, 1011, 1020, 1021, 1030, 1040]


def test_unknown_codes_map_to_unknown() -> None:
    assert TaskState.of(1002) is TaskState.COMPLETED
    assert TaskState.of(4242) is TaskState.UNKNOWN
    assert TaskState.of(None) is TaskState.UNKNOWN
    assert TaskAction.of(1021) is TaskAction.FORWARD_JUMP
    assert TaskAction.of(7) is TaskAction.UNKNOWN


def test_action_target_states_follow_the_reference_table() -> None:
    assert {a: a.target_state for a in TaskAction} == {
        TaskAction.UNKNOWN: TaskState.UNKNOWN,
        TaskAction.BACK: TaskState.WAITING,
        TaskAction.BACK_JUMP: TaskState.WAITING,
        TaskAction.FORWARD: TaskState.COMPLETED,
        TaskAction.FORWARD_JUMP: TaskState.COMPLETED,
        TaskAction.TERMINATE: TaskState.TERMINATED,
        TaskAction.RESTART: TaskState.UNKNOWN,
    }


def test_invalid_action_error_is_a_flow_error_and_a_value_error() -> None:
    err = InvalidActionError(TaskAction.UNKNOWN, graph_id="g", node_id="n")
    assert isinstance(err, FlowError)
    assert isinstance(err, ValueError)
    assert "'g'" in str(err) and "'n'" in str(err)


def _nodes() -> Mapping[str, Node]:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("a")
    spec.add_activity("a", meta={"role": "tl"}).link_add("x")
    spec.add_exclusive("x", meta={"actor": "boss"}).link_add("plain")
    spec.add_activity("plain").link_add("e")
    spec.add_end("e", meta={"actor": "boss"})
    return spec.create().nodes


def test_block_controller_makes_every_activity_a_human_task_anyone_may_operate() -> None:
    nodes, ctl, ctx = _nodes(), BlockStateController(), FlowContext.of("i")
    assert ctl.is_operatable(ctx, nodes["plain"]) and not ctl.is_auto_forward(ctx, nodes["a"])
    assert ctl.is_auto_forward(ctx, nodes["x"]) and not ctl.is_operatable(ctx, nodes["x"])


def test_not_block_controller_auto_forwards_every_node_like_java() -> None:
    nodes, ctl, ctx = _nodes(), NotBlockStateController(), FlowContext.of("i")
    assert all(ctl.is_auto_forward(ctx, n) for n in nodes.values())
    assert all(ctl.is_operatable(ctx, n) for n in nodes.values())


def test_actor_controller_matches_meta_value_against_context_value() -> None:
    nodes, ctl = _nodes(), ActorStateController("role")
    assert ctl.is_operatable(FlowContext.of("i", {"role": "tl"}), nodes["a"])
    assert not ctl.is_operatable(FlowContext.of("i", {"role": "dm"}), nodes["a"])


def test_actor_controller_never_matches_a_missing_meta_with_a_missing_context_value() -> None:
    ctl = ActorStateController("role", "dept")
    assert not ctl.is_operatable(FlowContext.of("i", {"role": "tl"}), _nodes()["plain"])
    assert not ctl.is_operatable(FlowContext.of("i"), _nodes()["a"])


def test_actor_controller_auto_forwards_end_and_nodes_without_its_keys() -> None:
    nodes, ctl, ctx = _nodes(), ActorStateController(), FlowContext.of("i")
    assert ctl.is_auto_forward(ctx, nodes["plain"]) and ctl.is_auto_forward(ctx, nodes["e"])
    assert not ctl.is_auto_forward(ctx, nodes["x"])  # a gateway with an actor is a human task


def test_actor_controller_defaults_to_the_actor_key() -> None:
    assert ActorStateController().keys == ("actor",)


def test_controllers_and_repository_satisfy_their_protocols() -> None:
    for ctl in (BlockStateController(), NotBlockStateController(), ActorStateController()):
        assert isinstance(ctl, StateController)
    assert isinstance(InMemoryStateRepository(), StateRepository)
    assert isinstance(InMemoryStateRepository(), SupportsUnitOfWork)


@pytest.fixture
def line_nodes(engine: FlowEngine) -> Mapping[str, Node]:
    return load(engine, LINE).nodes


def test_in_memory_repository_keys_states_by_graph_and_node_id(
    line_nodes: Mapping[str, Node],
) -> None:
    repo, ctx = InMemoryStateRepository(), FlowContext.of("i1")
    repo.state_put(ctx, line_nodes["A"], TaskState.WAITING)
    assert repo.states("i1") == {"line:A": TaskState.WAITING}
    assert repo.state_get(ctx, line_nodes["B"]) is TaskState.UNKNOWN


def test_in_memory_repository_isolates_instances(line_nodes: Mapping[str, Node]) -> None:
    repo = InMemoryStateRepository()
    repo.state_put(FlowContext.of("i1"), line_nodes["A"], TaskState.COMPLETED)
    assert repo.state_get(FlowContext.of("i2"), line_nodes["A"]) is TaskState.UNKNOWN
    repo.state_clear(FlowContext.of("i2"))
    assert repo.states("i1") == {"line:A": TaskState.COMPLETED}


def test_in_memory_unit_of_work_undoes_every_change_when_the_block_raises(
    line_nodes: Mapping[str, Node],
) -> None:
    repo, ctx = InMemoryStateRepository(), FlowContext.of("i1")
    repo.state_put(ctx, line_nodes["A"], TaskState.WAITING)
    with pytest.raises(RuntimeError), repo.unit_of_work(ctx, lock=True):
        repo.state_put(ctx, line_nodes["A"], TaskState.COMPLETED)
        repo.state_put(ctx, line_nodes["B"], TaskState.WAITING)
        repo.state_clear(ctx)
        repo.state_put(ctx, line_nodes["C"], TaskState.WAITING)
        raise RuntimeError("boom")
    assert repo.states("i1") == {"line:A": TaskState.WAITING}


def test_in_memory_unit_of_work_keeps_changes_when_the_block_succeeds(
    line_nodes: Mapping[str, Node],
) -> None:
    repo, ctx = InMemoryStateRepository(), FlowContext.of("i1")
    with repo.unit_of_work(ctx, lock=False):
        repo.state_put(ctx, line_nodes["A"], TaskState.COMPLETED)
    assert repo.states("i1") == {"line:A": TaskState.COMPLETED}


def test_failed_outer_unit_of_work_also_undoes_a_finished_inner_one(
    line_nodes: Mapping[str, Node],
) -> None:
    repo, ctx = InMemoryStateRepository(), FlowContext.of("i1")
    with pytest.raises(RuntimeError), repo.unit_of_work(ctx, lock=True):
        with repo.unit_of_work(ctx, lock=False):
            repo.state_put(ctx, line_nodes["A"], TaskState.COMPLETED)
        raise RuntimeError("boom")
    assert repo.states("i1") == {}
