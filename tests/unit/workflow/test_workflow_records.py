"""TaskRecord contents per action, computed without side effects, inside the unit of work."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from wf_support import LINE, ListRecorder, load

from flow import FlowContext, FlowEngine, MapContainer, Node, SimpleFlowDriver
from flow.workflow import (
    ActorStateController,
    InMemoryStateRepository,
    NotBlockStateController,
    TaskAction,
    TaskRecord,
    TaskState,
    WorkflowExecutor,
)

OA = """
id: oa
layout:
  - {id: start, type: start}
  - {id: apply, meta: {actor: employee, formId: "7"}}
  - {id: check, type: exclusive}
  - {id: approve, meta: {actor: manager, formId: 8}}
  - {id: end, type: end}
"""


@pytest.fixture
def recorder() -> ListRecorder:
    return ListRecorder()


@pytest.fixture
def wf(engine: FlowEngine, recorder: ListRecorder) -> WorkflowExecutor:
    load(engine, OA)
    load(engine, LINE)
    return WorkflowExecutor(engine, ActorStateController(), recorder=recorder)


def _submit(wf: WorkflowExecutor, node_id: str, action: TaskAction, actor: str, **kw: str) -> None:
    ctx = FlowContext.of("r1", {"actor": actor, "amount": 10})
    wf.submit_task_at("oa", node_id, action, ctx, **kw)


def test_a_forward_record_names_source_target_state_assignee_form_and_message(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    before = datetime.now(UTC)
    _submit(wf, "apply", TaskAction.FORWARD, "employee", message="please")
    (record,) = recorder.records
    assert (record.instance_id, record.graph_id, record.task_id) == ("r1", "oa", "apply")
    assert (record.source.id, record.target.id) == ("apply", "approve")
    assert (record.action, record.state) == (TaskAction.FORWARD, TaskState.COMPLETED)
    assert (record.assignee, record.form_id, record.message) == ("employee", 7, "please")
    assert record.created_at.tzinfo is UTC and record.created_at >= before


def test_record_variables_are_the_serializable_context_data_without_the_intent(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    _submit(wf, "apply", TaskAction.FORWARD, "employee")
    assert recorder.records[0].variables == {"instanceId": "r1", "actor": "employee", "amount": 10}


def test_forwarding_the_last_task_records_the_end_node_as_target(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    _submit(wf, "apply", TaskAction.FORWARD, "employee")
    _submit(wf, "approve", TaskAction.FORWARD, "manager")
    last = recorder.records[-1]
    assert (last.target.id, last.form_id) == ("end", 8)


def test_a_back_record_targets_the_earlier_task_with_state_waiting(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    _submit(wf, "apply", TaskAction.FORWARD, "employee")
    _submit(wf, "approve", TaskAction.BACK, "manager", message="fix the amount")
    back = recorder.records[-1]
    assert (back.source.id, back.target.id) == ("approve", "apply")
    assert (back.action, back.state, back.message) == (
        TaskAction.BACK,
        TaskState.WAITING,
        "fix the amount",
    )


def test_a_jump_record_targets_the_jump_target(engine: FlowEngine, recorder: ListRecorder) -> None:
    load(engine, LINE)
    wf = WorkflowExecutor(engine, recorder=recorder)
    wf.submit_task_at("line", "C", TaskAction.FORWARD_JUMP, FlowContext.of("j"))
    jump = recorder.records[-1]
    assert (jump.source.id, jump.target.id, jump.state) == ("C", "C", TaskState.COMPLETED)
    wf.submit_task_at("line", "A", TaskAction.BACK_JUMP, FlowContext.of("j"))
    back = recorder.records[-1]
    assert (back.source.id, back.target.id, back.state) == ("A", "A", TaskState.WAITING)


def test_a_terminate_record_targets_the_terminated_task(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    _submit(wf, "apply", TaskAction.TERMINATE, "employee")
    record = recorder.records[-1]
    assert (record.source.id, record.target.id, record.state) == (
        "apply",
        "apply",
        TaskState.TERMINATED,
    )


def test_a_restart_record_targets_the_first_task_with_state_unknown(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    _submit(wf, "apply", TaskAction.FORWARD, "employee")
    _submit(wf, "approve", TaskAction.RESTART, "manager")
    record = recorder.records[-1]
    assert (record.target.id, record.action, record.state) == (
        "apply",
        TaskAction.RESTART,
        TaskState.UNKNOWN,
    )


def test_assignee_falls_back_to_the_node_actor_meta_then_to_empty(
    engine: FlowEngine, recorder: ListRecorder
) -> None:
    load(engine, OA)
    load(engine, LINE)
    wf = WorkflowExecutor(engine, recorder=recorder)
    wf.submit_task_at("oa", "apply", TaskAction.FORWARD, FlowContext.of("a"))
    wf.submit_task_at("line", "A", TaskAction.FORWARD, FlowContext.of("b"))
    wf.submit_task_at("line", "B", TaskAction.FORWARD, FlowContext.of("b", {"actor": "ann"}))
    assert [r.assignee for r in recorder.records] == ["employee", "", "ann"]


def test_exactly_one_record_per_successful_submit_and_none_for_a_refused_one(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    ctx = FlowContext.of("r1", {"actor": "employee"})
    task = wf.claim_task("oa", ctx)
    assert wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)
    assert not wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)
    assert len(recorder.records) == 1


def test_computing_the_record_writes_no_state_runs_no_task_and_keeps_the_trace() -> None:
    def run(recorder: ListRecorder | None) -> tuple[dict[str, TaskState], list[str], object]:
        calls: list[str] = []
        engine = FlowEngine(
            SimpleFlowDriver(container=MapContainer({"w": lambda c, n: calls.append(n.id)}))
        )
        load(
            engine,
            """
            id: dry
            layout:
              - {id: start, type: start}
              - {id: A, task: "@w"}
              - {id: gw, type: exclusive, task: "@w"}
              - {id: B, task: "@w"}
              - {id: end, type: end}
            """,
        )
        repo = InMemoryStateRepository()
        wf = WorkflowExecutor(engine, NotBlockStateController(), repo, recorder=recorder)
        ctx = FlowContext.of("d")
        wf.claim_task("dry", ctx)
        wf.submit_task_at("dry", "gw", TaskAction.BACK, ctx)
        last = ctx.last_record
        return repo.states("d"), calls, None if last is None else last.id

    recorder = ListRecorder()
    assert run(recorder) == run(None)
    assert recorder.records[0].target.id == "end"


def test_a_failing_recorder_fails_the_submit_and_rolls_the_state_back(engine: FlowEngine) -> None:
    class Broken:
        def record(self, ctx: FlowContext, record: TaskRecord) -> None:
            raise OSError("history table is gone")

    graph = load(engine, LINE)
    repo = InMemoryStateRepository()
    wf = WorkflowExecutor(engine, state_repository=repo, recorder=Broken())
    ctx = FlowContext.of("rb")
    wf.claim_task("line", ctx)
    with pytest.raises(OSError, match="history table"):
        wf.submit_task_at("line", "A", TaskAction.FORWARD, ctx)
    assert repo.states("rb") == {"line:A": TaskState.WAITING}
    with pytest.raises(OSError):
        wf.submit_task_at(graph, "A", TaskAction.RESTART, ctx)
    assert repo.states("rb") == {"line:A": TaskState.WAITING}


def test_the_recorder_runs_inside_the_submits_unit_of_work(engine: FlowEngine) -> None:
    events: list[str] = []

    class Repo(InMemoryStateRepository):
        def unit_of_work(self, ctx: FlowContext, *, lock: bool):  # type: ignore[no-untyped-def]
            inner = super().unit_of_work(ctx, lock=lock)

            class _Frame:
                def __enter__(self) -> None:
                    events.append(f"begin lock={lock}")
                    inner.__enter__()

                def __exit__(self, *exc: object) -> None:
                    inner.__exit__(*exc)  # type: ignore[arg-type]
                    events.append("end")

            return _Frame()

    class Rec:
        def record(self, ctx: FlowContext, record: TaskRecord) -> None:
            events.append("record")

    load(engine, LINE)
    wf = WorkflowExecutor(engine, state_repository=Repo(), recorder=Rec())
    ctx = FlowContext.of("u")
    wf.claim_task("line", ctx)
    wf.submit_task_at("line", "A", TaskAction.FORWARD, ctx)
    assert events == ["begin lock=False", "end", "begin lock=True", "record", "end"]


def test_record_nodes_are_graph_nodes(wf: WorkflowExecutor, recorder: ListRecorder) -> None:
    _submit(wf, "apply", TaskAction.FORWARD, "employee")
    assert isinstance(recorder.records[0].target, Node)


def test_computing_the_record_target_calls_no_interceptor(
    wf: WorkflowExecutor, recorder: ListRecorder
) -> None:
    """The dry walk that finds a record's target is invisible to user interceptors: the only
    node callbacks seen during a submit are those of the submit's own walk."""
    from flow import FlowInterceptor

    seen: list[str] = []

    class Spy(FlowInterceptor):
        def on_node_start(self, ctx: FlowContext, node: Node) -> None:
            seen.append(node.id)

    wf.engine.add_interceptor(Spy())
    claim_ctx = FlowContext.of("r9", {"actor": "employee", "amount": 10})
    assert wf.claim_task("oa", claim_ctx) is not None
    seen.clear()
    _submit_on = FlowContext.of("r9", {"actor": "employee", "amount": 10})
    wf.submit_task_at("oa", "apply", TaskAction.FORWARD, _submit_on)
    assert len(recorder.records) == 1
    # the submit's forward walk (reverting off from the start) ends at the next human task:
    # one visit per node, never a second pass from a dry walk
    assert seen == sorted(set(seen), key=seen.index)
