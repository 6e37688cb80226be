"""Multi-role OA flows with ActorStateController (ports of OaFlowTest, ActorStateFlowTest and
the examples/oa.yml demo)."""

from __future__ import annotations

from pathlib import Path

from aggregate_walk import CALLS_SUB_GRAPH, SUB_GRAPH_REVIEW
from wf_support import load

from flow import FlowContext, FlowEngine, MapContainer, Node, SimpleFlowDriver
from flow.workflow import ActorStateController, TaskAction, TaskState, WorkflowExecutor

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "oa.yml"

SF1 = """
id: sf1
layout:
  - {id: step1, title: apply, meta: {actor: liu, form: form1}}
  - {id: step2, title: cc, meta: {cc: lv}, task: "@cc"}
  - {id: step3, title: approve, meta: {actor: chen, cc: lv}, task: "@cc"}
  - {id: step4, type: parallel, link: [step4_1, step4_2]}
  - {id: step4_1, meta: {actor: yu}, link: step4_end}
  - {id: step4_2, meta: {actor: lv}, link: step4_end}
  - {id: step4_end, type: parallel}
  - {id: step5, title: cc, meta: {cc: lv}, task: "@cc"}
  - {id: step6, type: end}
"""


def _claim(wf: WorkflowExecutor, graph_id: str, instance: str, actor: str | None) -> str | None:
    task = wf.claim_task(graph_id, FlowContext.of(instance, {"actor": actor}))
    if task is None:
        return None
    assert task.state is TaskState.WAITING
    return task.node_id


def test_sf1_oa_flow_passes_each_task_to_its_actor_in_turn() -> None:
    copied: list[str] = []
    engine = FlowEngine(
        SimpleFlowDriver(container=MapContainer({"cc": lambda c, n: copied.append(n.id)}))
    )
    load(engine, SF1)
    wf = WorkflowExecutor(engine, ActorStateController())

    def submit(actor: str) -> None:
        ctx = FlowContext.of("oa-1", {"actor": actor})
        task = wf.claim_task("sf1", ctx)
        assert task is not None
        wf.submit_task(task, TaskAction.FORWARD, ctx)

    assert _claim(wf, "sf1", "oa-1", "liu") == "step1"
    submit("liu")
    assert copied == ["step2"]  # the cc node ran automatically after step1
    assert _claim(wf, "sf1", "oa-1", "chen") == "step3"
    assert _claim(wf, "sf1", "oa-1", "chen") == "step3"  # claiming twice is harmless
    submit("chen")
    nobody = wf.find_next_tasks("sf1", FlowContext.of("oa-1"))
    assert [(t.node_id, t.state) for t in nobody] == [
        ("step4_1", TaskState.UNKNOWN),
        ("step4_2", TaskState.UNKNOWN),
    ]
    assert _claim(wf, "sf1", "oa-1", "chen") is None
    assert _claim(wf, "sf1", "oa-1", "yu") == "step4_1"
    submit("yu")
    assert _claim(wf, "sf1", "oa-1", "lv") == "step4_2"
    submit("lv")
    assert _claim(wf, "sf1", "oa-1", "lv") is None
    assert copied == ["step2", "step3", "step5"]


def test_inclusive_countersign_needs_every_matching_manager() -> None:
    """Port of ActorStateFlowTest (graph test1, role key, amount 900000)."""
    engine = FlowEngine()
    load(
        engine,
        """
        id: test1
        layout:
          - {id: s, type: start, link: n0}
          - {id: n0, meta: {role: employee}, link: n1}
          - {id: n1, meta: {role: tl}, link: g1-s}
          - {id: g1-s, type: inclusive, link: [{nextId: n2, when: "amount>=100000"},
                                              {nextId: n3, when: "amount>=500000"},
                                              {nextId: n4, when: "amount>=900000"}]}
          - {id: n2, meta: {role: dm}, link: g1-e}
          - {id: n3, meta: {role: dm}, link: g1-e}
          - {id: n4, meta: {role: dm}, link: g1-e}
          - {id: g1-e, type: inclusive, link: n5}
          - {id: n5, link: e}
          - {id: e, type: end}
        """,
    )
    wf = WorkflowExecutor(engine, ActorStateController("role"))

    def ctx(role: str) -> FlowContext:
        return FlowContext.of("cs-1", {"role": role, "amount": 900000})

    for role, node_id in (("employee", "n0"), ("tl", "n1")):
        task = wf.claim_task("test1", ctx(role))
        assert task is not None and (task.node_id, task.state) == (node_id, TaskState.WAITING)
        wf.submit_task(task, TaskAction.FORWARD, ctx(role))
    tasks = wf.find_next_tasks("test1", ctx("dm"))
    assert [t.node_id for t in tasks] == ["n2", "n3", "n4"]
    for task in tasks:
        wf.submit_task(task, TaskAction.FORWARD, ctx("dm"))
    assert wf.claim_task("test1", ctx("oa")) is None


def _oa() -> tuple[FlowEngine, WorkflowExecutor]:
    engine = FlowEngine()
    engine.load(EXAMPLE)
    return engine, WorkflowExecutor(engine, ActorStateController())


def _walk_oa(wf: WorkflowExecutor, instance: str, amount: int) -> list[str]:
    done: list[str] = []
    for actor in ("employee", "manager", "director"):
        ctx = FlowContext.of(instance, {"actor": actor, "amount": amount})
        task = wf.claim_task("oa", ctx)
        if task is not None:
            wf.submit_task(task, TaskAction.FORWARD, ctx)
            done.append(task.node_id)
    return done


def test_oa_example_sends_small_amounts_to_the_manager() -> None:
    _, wf = _oa()
    assert _walk_oa(wf, "small", 1200) == ["apply", "manager"]
    assert wf.state_repository.states("small") == {  # type: ignore[attr-defined]
        "oa:apply": 1002,
        "oa:amount": 1002,
        "oa:manager": 1002,
    }


def test_oa_example_sends_large_amounts_to_the_director() -> None:
    _, wf = _oa()
    assert _walk_oa(wf, "large", 8000) == ["apply", "director"]


def test_oa_example_manager_cannot_claim_before_the_employee_applied() -> None:
    _, wf = _oa()
    assert wf.claim_task("oa", FlowContext.of("x", {"actor": "manager", "amount": 1})) is None
    found = wf.find_task("oa", FlowContext.of("x", {"actor": "manager", "amount": 1}))
    assert found is not None and (found.node_id, found.state) == ("apply", TaskState.UNKNOWN)


def test_oa_rejection_sends_the_request_back_to_the_applicant() -> None:
    _, wf = _oa()
    employee = FlowContext.of("r", {"actor": "employee", "amount": 100})
    manager = FlowContext.of("r", {"actor": "manager", "amount": 100})
    wf.submit_task_at("oa", "apply", TaskAction.FORWARD, employee)
    task = wf.claim_task("oa", manager)
    assert task is not None and task.node_id == "manager"
    wf.submit_task(task, TaskAction.BACK, manager)
    assert wf.claim_task("oa", manager) is None
    again = wf.claim_task("oa", employee)
    assert again is not None and again.node_id == "apply"


def test_oa_graph_text_is_valid() -> None:
    engine, _ = _oa()
    graph = engine.get_graph_or_throw("oa")
    assert [p for p in graph.validate() if p.severity == "error"] == []
    assert isinstance(graph.nodes["apply"], Node)


def test_a_sub_graph_review_is_claimed_on_the_sub_graph_and_then_the_main_flow_continues() -> None:
    """Like WorkflowMultiGraphMultiRoleTest: a key-less activity runs ``#review`` as a
    sub-graph; the sub-graph's task is claimed on the sub-graph's own id."""
    engine = FlowEngine()
    load(engine, SUB_GRAPH_REVIEW)
    load(engine, CALLS_SUB_GRAPH)
    wf = WorkflowExecutor(engine, ActorStateController())
    applicant = FlowContext.of("m1", {"actor": "applicant"})
    reviewer = FlowContext.of("m1", {"actor": "reviewer"})
    wf.submit_task_at("main", "apply", TaskAction.FORWARD, applicant)
    assert wf.state_repository.states("m1")["main:call"] is TaskState.WAITING  # type: ignore[attr-defined]
    waiting = wf.claim_task("main", applicant)  # the calling node waits for its sub-graph
    assert waiting is not None and (waiting.node_id, waiting.state) == ("call", TaskState.WAITING)
    check = wf.claim_task("review", reviewer)
    assert check is not None and (check.node_id, check.state) == ("check", TaskState.WAITING)
    wf.submit_task(check, TaskAction.FORWARD, reviewer)
    done = wf.claim_task("main", applicant)
    assert done is not None and (done.node_id, done.state) == ("done", TaskState.WAITING)
    assert wf.state_repository.states("m1")["main:call"] is TaskState.COMPLETED  # type: ignore[attr-defined]
