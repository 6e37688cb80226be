"""The approval aggregate on the in-memory repository: open tasks, lineage, status, inbox,
withdraw, send-back and their errors (aggregate.md §1-§5)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from aggregate_walk import (
    CALLS_SUB_GRAPH,
    CHECKED,
    CHECKS,
    JUMP_TO_GATEWAY,
    SUB_GRAPH_REVIEW,
    SWITCH_A,
    SWITCH_B,
    controller,
    flow_engine,
)
from wf_support import PARALLEL_ACTORS, ListRecorder, load

from flow import FlowContext, FlowEngine, Graph, MapContainer, SimpleFlowDriver
from flow.errors import GraphNotFoundError, NodeNotFoundError
from flow.graph import Node
from flow.workflow import (
    MAX_CURSOR,
    MAX_IDENTITIES,
    MAX_PAGE_SIZE,
    ActorStateController,
    BlockStateController,
    GraphMismatchError,
    IndexUnavailableError,
    InMemoryStateRepository,
    InstanceClosedError,
    InstanceStatus,
    InstanceSummary,
    InvalidArgumentTypeError,
    InvalidInstanceIdError,
    InvalidQueryError,
    NotBlockStateController,
    OpenTask,
    SendBackError,
    Task,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)


def _ctx(instance_id: str, **data: object) -> FlowContext:
    return FlowContext.of(instance_id, {"amount": 1, **data})


@pytest.fixture
def recorder() -> ListRecorder:
    return ListRecorder()


@pytest.fixture
def ex(recorder: ListRecorder) -> WorkflowExecutor:
    return WorkflowExecutor(flow_engine(), controller(), recorder=recorder)


def _approve(ex: WorkflowExecutor, instance_id: str, graph: str = "excl", **who: str) -> None:
    ctx = _ctx(instance_id, **who)
    task = ex.claim_task(graph, ctx)
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)


def _nodes(ex: WorkflowExecutor, instance_id: str) -> list[tuple[str, TaskState, tuple[str, ...]]]:
    return [(t.node_id, t.state, t.lineage) for t in ex.open_tasks(instance_id)]


def test_forward_opens_the_next_task_with_the_lineage_of_the_submitted_one(
    ex: WorkflowExecutor,
) -> None:
    ex.claim_task("excl", _ctx("i-1", actor="alice"))
    assert _nodes(ex, "i-1") == [("apply", TaskState.WAITING, ())]
    _approve(ex, "i-1", actor="alice")
    assert _nodes(ex, "i-1") == [("manager", TaskState.UNKNOWN, ("apply",))]
    ex.claim_task("excl", _ctx("i-1", role="boss"))
    (task,) = ex.open_tasks("i-1")
    assert (task.state, task.candidates, task.node_title) == (
        TaskState.WAITING,
        ("role:boss",),
        "Manager",
    )
    _approve(ex, "i-1", role="boss")
    assert _nodes(ex, "i-1") == [("archive", TaskState.UNKNOWN, ("apply", "manager"))]
    assert ex.status("i-1") == InstanceStatus.RUNNING


def test_status_is_completed_at_end_and_running_again_after_a_back(ex: WorkflowExecutor) -> None:
    _approve(ex, "i-1", actor="alice")
    _approve(ex, "i-1", role="boss")
    _approve(ex, "i-1", role="clerk")
    assert (ex.status("i-1"), ex.open_tasks("i-1")) == (InstanceStatus.COMPLETED, [])
    (summary,) = ex.instances()
    assert summary.finished_at is not None and summary.creator == "alice"
    ex.submit_task_at("excl", "archive", TaskAction.BACK, _ctx("i-1", role="clerk"))
    assert ex.status("i-1") == InstanceStatus.RUNNING
    assert ex.instances()[0].finished_at is None
    assert [t.node_id for t in ex.open_tasks("i-1")] == ["manager"]


def test_the_queries_take_a_connection_the_memory_repository_needs_not(
    ex: WorkflowExecutor,
) -> None:
    """An app written against SQL passes its transaction's connection; in memory (its
    tests) the same calls answer alike."""
    _approve(ex, "i-1", actor="alice")
    conn = object()
    assert ex.status("i-1", connection=conn) == ex.status("i-1") == InstanceStatus.RUNNING
    assert ex.open_tasks("i-1", connection=conn) == ex.open_tasks("i-1")
    assert ex.instances(connection=conn) == ex.instances()


def test_a_repository_of_the_first_protocol_form_still_answers(ex: WorkflowExecutor) -> None:
    """A task-index repository written before the queries took a connection (no such
    parameter) keeps working when the caller passes none."""
    inner = ex.state_repository
    assert isinstance(inner, InMemoryStateRepository)

    class FirstForm(InMemoryStateRepository):
        def index_status(self, instance_id: str) -> InstanceStatus | None:  # type: ignore[override]
            return super().index_status(instance_id)

        def index_open_tasks(self, instance_id: str) -> list[OpenTask]:  # type: ignore[override]
            return super().index_open_tasks(instance_id)

        def index_instances(  # type: ignore[override]
            self,
            *,
            status: InstanceStatus | None,
            graph_id: str | None,
            creator: str | None,
            limit: int,
            after: int | None,
        ) -> list[InstanceSummary]:
            return super().index_instances(
                status=status, graph_id=graph_id, creator=creator, limit=limit, after=after
            )

    old = WorkflowExecutor(
        ex.engine, state_controller=ex.state_controller, state_repository=FirstForm()
    )
    _approve(old, "i-1", actor="alice")
    assert old.status("i-1") == InstanceStatus.RUNNING
    assert [t.node_id for t in old.open_tasks("i-1")] == ["manager"]
    assert [s.instance_id for s in old.instances()] == ["i-1"]


def test_terminate_leaving_no_open_task_terminates_the_instance(ex: WorkflowExecutor) -> None:
    ex.submit_task_at("excl", "apply", TaskAction.TERMINATE, _ctx("i-1", actor="alice"))
    assert (ex.status("i-1"), ex.open_tasks("i-1")) == (InstanceStatus.TERMINATED, [])
    ex.submit_task_at("excl", "apply", TaskAction.RESTART, _ctx("i-1", actor="alice"))
    assert ex.status("i-1") == InstanceStatus.RUNNING


def test_inbox_lists_each_task_once_oldest_first_and_pages_by_cursor(ex: WorkflowExecutor) -> None:
    for n in range(5):
        _approve(ex, f"i-{n}", actor="alice", amount=9000)  # -> director: actor carol, role boss
    carol = _ctx("x", actor="carol", role="boss")
    first = ex.inbox(carol, limit=2)
    rest = ex.inbox(carol, limit=10, after=first[-1].cursor)
    assert [t.instance_id for t in first + rest] == [f"i-{n}" for n in range(5)]
    # The caller's first matching candidate, as the SQL inbox gives it; open_tasks has all.
    assert {t.candidates for t in first + rest} == {("actor:carol",)}
    assert ex.inbox(_ctx("x", role="boss"))[0].candidates == ("role:boss",)
    assert ex.open_tasks("i-0")[0].candidates == ("actor:carol", "role:boss")
    assert ex.inbox(_ctx("x", role="boss"), graph_id="par") == []
    assert ex.inbox(_ctx("x", actor="bob")) == []
    assert ex.inbox(_ctx("x")) == []


def test_inbox_never_lists_a_closed_instance(ex: WorkflowExecutor) -> None:
    _approve(ex, "i-1", actor="alice")
    assert ex.withdraw("excl", _ctx("i-1", actor="alice"))
    assert ex.inbox(_ctx("x", role="boss")) == []


def test_withdraw_terminates_open_tasks_records_them_and_closes_the_instance(
    ex: WorkflowExecutor, recorder: ListRecorder
) -> None:
    engine = ex.engine
    load(engine, PARALLEL_ACTORS)
    wf = WorkflowExecutor(engine, ActorStateController(), recorder=recorder)
    ctx = FlowContext.of("p-1", {"actor": "user1"})
    wf.claim_task("par", ctx)
    assert {t.node_id for t in wf.open_tasks("p-1")} == {"A", "B"}
    assert wf.withdraw("par", FlowContext.of("p-1", {"actor": "boss"}), message="cancelled")
    assert wf.status("p-1") == InstanceStatus.WITHDRAWN
    assert wf.open_tasks("p-1") == []
    withdrawn = [(r.source.id, r.target.id, r.action, r.state, r.assignee, r.message)
                 for r in recorder.records]  # fmt: skip
    assert sorted(withdrawn) == [
        (n, n, TaskAction.TERMINATE, TaskState.TERMINATED, "boss", "cancelled") for n in "AB"
    ]
    assert wf.claim_task("par", ctx) is None
    assert wf.claim_task("par", FlowContext.of("p-1", {"actor": "user2"})) is None
    assert not wf.withdraw("par", ctx)
    assert len(recorder.records) == 2


def test_a_withdrawn_instance_refuses_submits_until_restart(ex: WorkflowExecutor) -> None:
    ctx = _ctx("i-1", actor="alice")
    task = ex.claim_task("excl", ctx)
    assert ex.withdraw("excl", ctx)
    states = ex.state_repository.states("i-1")  # type: ignore[attr-defined]
    with pytest.raises(InstanceClosedError, match="'i-1' is WITHDRAWN"):
        ex.submit_task_at("excl", "apply", TaskAction.FORWARD, ctx)
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx) is False
    assert ex.state_repository.states("i-1") == states  # type: ignore[attr-defined]
    ex.submit_task_at("excl", "apply", TaskAction.RESTART, ctx)
    assert ex.status("i-1") == InstanceStatus.RUNNING
    assert [t.node_id for t in ex.inbox(ctx)] == ["apply"]


_WITHDRAWS_ON_APPLY = """
id: wd
layout:
  - {id: s, type: start, link: apply}
  - {id: apply, meta: {actor: employee}, task: '@budget', link: review}
  - {id: review, meta: {actor: manager}, link: e}
  - {id: e, type: end}
"""


def test_a_withdraw_that_task_code_calls_back_during_a_submit_stands() -> None:
    """The applicant's task code (a budget check) withdraws its instance: the call joins the
    submit under way, and the submit must not compute the status again over it — it once
    left the instance RUNNING, its next task open, after the withdraw had returned True."""
    container = MapContainer()
    engine = FlowEngine(SimpleFlowDriver(container=container))
    engine.load(Graph.from_text(_WITHDRAWS_ON_APPLY))
    wf = WorkflowExecutor(engine, ActorStateController())
    withdrawn: list[bool] = []

    def budget(c: FlowContext, node: Node) -> None:
        withdrawn.append(wf.withdraw("wd", FlowContext.of(c.instance_id, {"actor": "budget"})))

    container.put_component("budget", budget)
    ctx = FlowContext.of("w-1", {"actor": "employee"})
    assert wf.submit_task_if_waiting(wf.claim_task("wd", ctx), TaskAction.FORWARD, ctx)
    assert withdrawn == [True]
    assert wf.status("w-1") == InstanceStatus.WITHDRAWN
    assert wf.open_tasks("w-1") == []
    manager = FlowContext.of("w-1", {"actor": "manager"})
    assert wf.claim_task("wd", manager) is None
    with pytest.raises(InstanceClosedError):
        wf.submit_task_at("wd", "review", TaskAction.FORWARD, manager)


def test_withdraw_of_an_unknown_or_closed_instance_is_false_and_writes_nothing(
    ex: WorkflowExecutor, recorder: ListRecorder
) -> None:
    assert not ex.withdraw("excl", _ctx("nobody", actor="alice"))
    assert ex.status("nobody") is None and ex.instances() == []
    ex.submit_task_at("excl", "apply", TaskAction.TERMINATE, _ctx("i-1", actor="alice"))
    recorded = len(recorder.records)
    assert not ex.withdraw("excl", _ctx("i-1", actor="alice"))
    assert (ex.status("i-1"), len(recorder.records)) == (InstanceStatus.TERMINATED, recorded)


def test_send_back_reopens_the_task_that_actually_came_before(
    ex: WorkflowExecutor, recorder: ListRecorder
) -> None:
    _approve(ex, "i-1", actor="alice", amount=9000)
    boss = _ctx("i-1", role="boss", amount=9000)
    task = ex.claim_task("excl", boss)
    assert task is not None and task.node_id == "director"
    assert ex.send_back(task, boss, message="missing receipt")
    assert _nodes(ex, "i-1") == [("apply", TaskState.WAITING, ())]
    states = ex.state_repository.states("i-1")  # type: ignore[attr-defined]
    assert states == {"excl:apply": TaskState.WAITING}
    last = recorder.records[-1]
    assert (last.source.id, last.target.id, last.action, last.state, last.message) == (
        "director", "apply", TaskAction.BACK_JUMP, TaskState.WAITING, "missing receipt"
    )  # fmt: skip
    # Forwarded again, the gateway is evaluated with the variables as they are then.
    _approve(ex, "i-1", actor="alice", amount=1)
    assert _nodes(ex, "i-1") == [("manager", TaskState.UNKNOWN, ("apply",))]


def test_send_back_accepts_an_open_task_and_is_false_when_not_waiting_for_the_caller(
    ex: WorkflowExecutor,
) -> None:
    _approve(ex, "i-1", actor="alice")
    (task,) = ex.open_tasks("i-1")
    assert ex.send_back(task, _ctx("i-1", role="boss")) is False  # not claimed: not WAITING
    ex.claim_task("excl", _ctx("i-1", role="boss"))
    assert ex.send_back(task, _ctx("i-1", actor="bob")) is False  # not a candidate
    assert ex.send_back(None, _ctx("i-1", role="boss")) is False
    _approve(ex, "i-2", actor="alice")
    assert ex.send_back(task, _ctx("i-2", role="boss")) is False  # i-1's task, i-2's context
    assert [t.node_id for t in ex.open_tasks("i-2")] == ["manager"]
    assert ex.send_back(task, _ctx("i-1", role="boss"))
    assert [t.node_id for t in ex.open_tasks("i-1")] == ["apply"]


def test_a_task_claimed_for_one_instance_does_not_act_on_another(
    ex: WorkflowExecutor, recorder: ListRecorder
) -> None:
    """A ``Task`` is bound to the instance it was claimed for, as an ``OpenTask`` is: kept in
    a web session and submitted (or sent back) with a context naming another instance, it
    completed that instance's task instead — False now, nothing written."""
    for instance_id in ("x-1", "x-2"):
        _approve(ex, instance_id, actor="alice")
    task = ex.claim_task("excl", _ctx("x-1", role="boss"))
    assert task is not None and task.node.id == "manager"
    assert ex.claim_task("excl", _ctx("x-2", role="boss")) is not None
    before = (_nodes(ex, "x-1"), _nodes(ex, "x-2"), len(recorder.records))
    other = _ctx("x-2", role="boss")
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, other) is False
    assert ex.send_back(task, other) is False
    assert (_nodes(ex, "x-1"), _nodes(ex, "x-2"), len(recorder.records)) == before
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, _ctx("x-1", role="boss"))


def test_a_restart_of_a_sub_graph_s_task_starts_the_instance_over_as_its_root_graph() -> None:
    """The instance stays its root graph's: a RESTART named on the sub-graph re-rooted it."""
    engine = FlowEngine()
    engine.load(Graph.from_text(SUB_GRAPH_REVIEW))
    engine.load(Graph.from_text(CALLS_SUB_GRAPH))
    ex = WorkflowExecutor(engine, ActorStateController())
    applicant = FlowContext.of("rs-1", {"actor": "applicant"})
    reviewer = FlowContext.of("rs-1", {"actor": "reviewer"})
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, applicant)
    check = ex.claim_task("review", reviewer)
    assert check is not None
    ex.submit_task(check, TaskAction.RESTART, reviewer)
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("rs-1", "main")]
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("rs-1")] == [("main", "apply")]
    assert ex.claim_task("main", applicant) is not None


def test_send_back_of_the_first_task_is_refused(ex: WorkflowExecutor) -> None:
    ctx = _ctx("i-1", actor="alice")
    task = ex.claim_task("excl", ctx)
    before = ex.open_tasks("i-1")
    with pytest.raises(SendBackError, match="first task"):
        ex.send_back(task, ctx)
    assert ex.open_tasks("i-1") == before


def _graded(*texts: str) -> WorkflowExecutor:
    engine = FlowEngine()
    for text in texts:
        engine.load(Graph.from_text(text))
    return WorkflowExecutor(engine, ActorStateController())


def _keys_of(ex: WorkflowExecutor, instance_id: str, graph_id: str) -> dict[str, TaskState]:
    states = ex.state_repository.states(instance_id)  # type: ignore[attr-defined]
    return {k: v for k, v in states.items() if k.startswith(f"{graph_id}:")}


def test_send_back_across_a_sub_graph_that_splits_branches_runs_it_again() -> None:
    """A sub-graph called on the way ran to its end in the application's submit, its
    parallel split and join included: sent back, it loses its states and runs again."""
    ex = _graded(CHECKS, CHECKED)
    applicant = _ctx("sc-1", actor="al")
    ex.submit_task_at("checked", "apply", TaskAction.FORWARD, applicant)
    ran = _keys_of(ex, "sc-1", "checks")
    assert ran["checks:join"] == TaskState.COMPLETED
    manager = _ctx("sc-1", actor="mgr")
    task = ex.claim_task("checked", manager)
    assert task is not None and task.node_id == "mgr"
    assert ex.send_back(task, manager)
    assert _keys_of(ex, "sc-1", "checks") == {}
    assert [t.node_id for t in ex.open_tasks("sc-1")] == ["apply"]
    ex.submit_task_at("checked", "apply", TaskAction.FORWARD, applicant)
    assert _keys_of(ex, "sc-1", "checks") == ran
    assert [t.node_id for t in ex.open_tasks("sc-1")] == ["mgr"]


def test_send_back_across_a_sub_graph_with_a_human_task_on_a_branch_not_taken() -> None:
    """Only a human task that holds a state refuses: one on a branch the sub-graph's
    gateway did not take was never operated."""
    vet = """
id: vet
layout:
  - {id: vs, type: start, link: vgw}
  - id: vgw
    type: exclusive
    link:
      - {nextId: legal, when: "amount >= 10000"}
      - {nextId: auto}
  - {id: legal, meta: {actor: legal}, link: ve}
  - {id: auto, task: "vetted = 1", link: ve}
  - {id: ve, type: end}
"""
    vetted = CHECKED.replace("id: checked", "id: vetted").replace("#checks", "#vet")
    ex = _graded(vet, vetted)
    applicant = _ctx("sv-1", actor="al", amount=5)
    ex.submit_task_at("vetted", "apply", TaskAction.FORWARD, applicant)
    manager = _ctx("sv-1", actor="mgr", amount=5)
    task = ex.claim_task("vetted", manager)
    assert task is not None and task.node_id == "mgr"
    assert ex.send_back(task, manager)
    assert [t.node_id for t in ex.open_tasks("sv-1")] == ["apply"]
    assert _keys_of(ex, "sv-1", "vet") == {}


def test_send_back_out_of_a_parallel_split_is_refused_and_writes_nothing(
    ex: WorkflowExecutor,
) -> None:
    _approve(ex, "p-1", "par", actor="alice")
    legal = _ctx("p-1", role="legal")
    task = ex.claim_task("par", legal)
    assert task is not None and task.node_id == "legal"
    states = ex.state_repository.states("p-1")  # type: ignore[attr-defined]
    with pytest.raises(SendBackError, match="'draft' opened several tasks"):
        ex.send_back(task, legal)
    assert ex.state_repository.states("p-1") == states  # type: ignore[attr-defined]


def test_send_back_across_a_join_names_the_gateway(ex: WorkflowExecutor) -> None:
    _approve(ex, "j-1", "par", actor="alice")
    _approve(ex, "j-1", "par", role="legal")
    _approve(ex, "j-1", "par", actor="bob")
    _approve(ex, "j-1", "par", role="boss")
    alice = _ctx("j-1", actor="alice")
    task = ex.claim_task("par", alice)
    assert task is not None and task.node_id == "publish"
    with pytest.raises(SendBackError, match="the parallel gateway 'join' on the way from"):
        ex.send_back(task, alice)


def test_send_back_through_an_inclusive_split_that_took_only_its_branch(
    ex: WorkflowExecutor,
) -> None:
    """aggregate.md §5 refuses a task that is one of *several* open tasks of an inclusive
    split; one the split opened alone goes back, and forwarding P again re-evaluates the
    conditions with the variables as they are then."""
    _approve(ex, "in-1", "incl", actor="alice")  # amount 1: only the default branch, boss
    boss = _ctx("in-1", role="boss")
    task = ex.claim_task("incl", boss)
    assert task is not None and task.node_id == "boss"
    assert ex.send_back(task, boss)
    assert _nodes(ex, "in-1") == [("ask", TaskState.WAITING, ())]
    states = ex.state_repository.states("in-1")  # type: ignore[attr-defined]
    assert "incl:fork" not in states and "incl:boss" not in states
    again = FlowContext.of("in-1", {"amount": 500, "actor": "alice"})
    assert ex.submit_task_if_waiting(ex.claim_task("incl", again), TaskAction.FORWARD, again)
    assert sorted(t.node_id for t in ex.open_tasks("in-1")) == ["boss", "hr", "it"]


def test_send_back_through_an_inclusive_split_that_took_several_branches_is_refused(
    ex: WorkflowExecutor,
) -> None:
    ask = FlowContext.of("in-2", {"amount": 50, "actor": "alice"})
    assert ex.submit_task_if_waiting(ex.claim_task("incl", ask), TaskAction.FORWARD, ask)
    boss = _ctx("in-2", role="boss", amount=50)
    task = ex.claim_task("incl", boss)
    assert task is not None and task.node_id == "boss"
    with pytest.raises(SendBackError, match="'ask' opened several tasks"):
        ex.send_back(task, boss)


AUTOMATIC_BRANCH = """
id: autob
layout:
  - {id: start, type: start, link: ask}
  - {id: ask, meta: {actor: alice}, link: fork}
  - id: fork
    type: inclusive
    link:
      - {nextId: notify, when: "amount > 10"}
      - {nextId: boss}
  - {id: notify, link: merge}
  - {id: boss, meta: {role: boss}, link: merge}
  - {id: merge, type: inclusive, link: end}
  - {id: end, type: end}
"""


def test_send_back_through_an_inclusive_split_whose_other_branch_ran_is_refused() -> None:
    """The split opened one task, but its other branch settled an automatic node: going back
    would leave that behind and run it again when P is forwarded."""
    engine = FlowEngine()
    engine.load(Graph.from_text(AUTOMATIC_BRANCH))
    ex = WorkflowExecutor(engine, controller())
    ask = FlowContext.of("ab-1", {"amount": 50, "actor": "alice"})
    assert ex.submit_task_if_waiting(ex.claim_task("autob", ask), TaskAction.FORWARD, ask)
    boss = FlowContext.of("ab-1", {"amount": 50, "role": "boss"})
    task = ex.claim_task("autob", boss)
    assert task is not None and task.node_id == "boss"
    assert "autob:notify" in ex.state_repository.states("ab-1")  # type: ignore[attr-defined]
    with pytest.raises(SendBackError, match="the inclusive gateway 'fork'"):
        ex.send_back(task, boss)


TWO_WAYS_TO_THE_TASK = """
id: twoways
layout:
  - {id: start, type: start, link: ask}
  - {id: ask, meta: {actor: alice}, link: fork}
  - id: fork
    type: inclusive
    link:
      - {nextId: t, when: "amount > 10"}
      - {nextId: gw, when: "amount > 100"}
  - id: gw
    type: exclusive
    link:
      - {nextId: t, when: "amount > 1000000"}
      - {nextId: u}
  - {id: t, meta: {role: boss}, link: merge}
  - {id: u, meta: {role: hr}, link: v}
  - {id: v, meta: {role: hr}, link: merge}
  - {id: merge, type: inclusive, link: end}
  - {id: end, type: end}
"""


def test_send_back_through_an_inclusive_split_that_took_a_second_branch_is_refused() -> None:
    """The split's second branch could also lead to the task, but went elsewhere and moved
    on (u approved, v open): going back would drop v and keep u's approval for reuse."""
    engine = FlowEngine()
    engine.load(Graph.from_text(TWO_WAYS_TO_THE_TASK))
    ex = WorkflowExecutor(engine, controller())
    for who in ({"actor": "alice"}, {"role": "hr"}):
        c = FlowContext.of("tw-1", {"amount": 500, **who})
        assert ex.submit_task_if_waiting(ex.claim_task("twoways", c), TaskAction.FORWARD, c)
    boss = FlowContext.of("tw-1", {"amount": 500, "role": "boss"})
    task = ex.claim_task("twoways", boss)
    assert task is not None and task.node_id == "t"
    states = ex.state_repository.states("tw-1")  # type: ignore[attr-defined]
    with pytest.raises(SendBackError, match="the inclusive gateway 'fork'"):
        ex.send_back(task, boss)
    assert ex.state_repository.states("tw-1") == states  # type: ignore[attr-defined]
    assert sorted(t.node_id for t in ex.open_tasks("tw-1")) == ["t", "v"]


def test_send_back_inside_a_parallel_branch_is_allowed(ex: WorkflowExecutor) -> None:
    _approve(ex, "p-1", "par", actor="alice")
    _approve(ex, "p-1", "par", role="legal")
    bob = _ctx("p-1", actor="bob")
    task = ex.claim_task("par", bob)
    assert task is not None and task.node_id == "sign"
    assert ex.send_back(task, bob)
    assert {t.node_id: t.lineage for t in ex.open_tasks("p-1")} == {
        "legal": ("draft",),
        "finance": ("draft",),
    }


def test_queries_check_their_arguments(ex: WorkflowExecutor) -> None:
    with pytest.raises(InvalidQueryError, match="limit"):
        ex.inbox(_ctx("x", actor="alice"), limit=0)
    with pytest.raises(InvalidQueryError, match="after"):
        ex.instances(after=-1)
    with pytest.raises(InvalidQueryError, match="status"):
        ex.instances(status=99)  # type: ignore[arg-type]
    assert ex.status("unknown") is None and ex.open_tasks("unknown") == []


def test_ids_filters_messages_and_tasks_of_the_wrong_type_are_refused(
    ex: WorkflowExecutor, recorder: ListRecorder
) -> None:
    """The same typed errors as on SQL, before anything is read or written (a driver would
    store ``b"x"`` differently per database, or compare ``["x"]`` as the text ``x``)."""
    _approve(ex, "x", actor="alice")
    for bad in (5, ["x"], None, "", " "):
        with pytest.raises(InvalidInstanceIdError):
            ex.status(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInstanceIdError):
            ex.open_tasks(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="creator"):
        ex.instances(creator=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="graph_id"):
        ex.inbox(_ctx("x", actor="alice"), graph_id=b"excl")  # type: ignore[arg-type]
    ctx = _ctx("x", role="boss")
    task = ex.claim_task("excl", ctx)
    assert task is not None
    before = (_nodes(ex, "x"), len(recorder.records))
    for message in (5, b"ok", ["ok"]):
        with pytest.raises(InvalidArgumentTypeError, match="message must be a string"):
            ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx, message=message)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentTypeError, match="message must be a string"):
            ex.withdraw("excl", ctx, message=message)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentTypeError, match="message must be a string"):
            ex.send_back(task, ctx, message=message)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match="'x'"):
        ex.send_back("approve", ctx)  # type: ignore[arg-type]
    (open_task,) = ex.open_tasks("x")
    with pytest.raises(InvalidArgumentTypeError, match="claim_task"):
        ex.submit_task_if_waiting(open_task, TaskAction.FORWARD, ctx)  # type: ignore[arg-type]
    assert (_nodes(ex, "x"), len(recorder.records)) == before


def test_a_node_of_an_unrelated_graph_is_refused_with_nothing_written(
    ex: WorkflowExecutor, recorder: ListRecorder
) -> None:
    """``excl`` calls no graph: a node of ``par`` given with it stored ``par:legal`` in the
    instance, ran that node's task code and recorded a node ``excl`` does not have."""
    _approve(ex, "x", actor="alice")
    legal = ex.engine.get_graph_or_throw("par").get_node_or_throw("legal")
    excl = ex.engine.get_graph_or_throw("excl")
    ctx = _ctx("x", role="boss")
    before = (_nodes(ex, "x"), len(recorder.records))
    with pytest.raises(NodeNotFoundError, match="'par:legal' in graph 'excl'"):
        ex.submit_task_at("excl", legal, TaskAction.FORWARD, ctx)
    forged = Task(root_graph=excl, node=legal, state=TaskState.WAITING, context=ctx)
    for action in (TaskAction.FORWARD, TaskAction.TERMINATE):
        with pytest.raises(NodeNotFoundError):
            ex.submit_task(forged, action, ctx)
        with pytest.raises(NodeNotFoundError):
            ex.submit_task_if_waiting(forged, action, ctx)
    assert (_nodes(ex, "x"), len(recorder.records)) == before


def test_a_task_built_by_hand_with_a_wrong_field_is_refused(
    ex: WorkflowExecutor, recorder: ListRecorder
) -> None:
    """Each field is checked before anything is read: they failed with a bare
    AttributeError deep in the walk."""
    _approve(ex, "x", actor="alice")
    ctx = _ctx("x", role="boss")
    task = ex.claim_task("excl", ctx)
    assert task is not None
    before = (_nodes(ex, "x"), len(recorder.records))
    for field, bad in (("node", None), ("node", "manager"), ("root_graph", None),
                       ("state", 1001), ("context", None)):  # fmt: skip
        forged = dataclasses.replace(task, **{field: bad})
        with pytest.raises(InvalidArgumentTypeError, match=rf"task\.{field} .*'x'"):
            ex.submit_task_if_waiting(forged, TaskAction.FORWARD, ctx)
        with pytest.raises(InvalidArgumentTypeError, match=rf"task\.{field}"):
            ex.submit_task(forged, TaskAction.FORWARD, ctx)
        with pytest.raises(InvalidArgumentTypeError, match=rf"task\.{field}"):
            ex.send_back(forged, ctx)
    for node in (None, "manager"):
        with pytest.raises(InvalidArgumentTypeError, match="node must be a Node"):
            ex.get_state(node, ctx)  # type: ignore[arg-type]
    assert (_nodes(ex, "x"), len(recorder.records)) == before


class _Identities(ActorStateController):
    """A controller whose callers have the identities given (a directory's groups, say)."""

    def __init__(self, identities: tuple[Any, ...]) -> None:
        super().__init__()
        self.given = identities

    def identities(self, ctx: FlowContext) -> tuple[str, ...]:
        return self.given


def test_inbox_identities_are_strings_and_at_most_max_identities_distinct() -> None:
    """The same typed error as on SQL, where a number would match on one database and fail
    on another, and where each identity is one more index range of the page's statement."""
    ex = WorkflowExecutor(flow_engine(), controller())
    _approve(ex, "x", actor="alice")
    ask = _ctx("x")
    many = tuple(f"role:r{n}" for n in range(MAX_IDENTITIES - 1))
    for given in ((5,), (None,), (["role:boss"],), ("role:boss", b"role:boss")):
        ex.state_controller = _Identities(given)
        with pytest.raises(InvalidQueryError, match="identity must be a string"):
            ex.inbox(ask)
    ex.state_controller = _Identities((*many, "role:boss", *("role:boss",) * 500))
    open_now = [t.node_id for t in ex.open_tasks("x")]  # the boss's task
    assert [t.node_id for t in ex.inbox(ask)] == open_now  # repeats count once
    ex.state_controller = _Identities((*many, "role:boss", "role:one-more"))
    with pytest.raises(InvalidQueryError, match=f"at most {MAX_IDENTITIES}"):
        ex.inbox(ask)


@pytest.mark.parametrize("answer", ["role:boss", b"role:boss", None, 5, {"role:boss": 1}])
def test_identities_that_are_not_a_collection_are_refused(answer: Any) -> None:
    """One string was matched letter by letter (an empty inbox), ``None`` failed with a bare
    ``TypeError``."""
    ex = WorkflowExecutor(flow_engine(), controller())
    _approve(ex, "x", actor="alice")
    ex.state_controller = _Identities(answer)
    with pytest.raises(InvalidQueryError, match=r"_Identities\.identities\(ctx\) must return"):
        ex.inbox(_ctx("x"))


class _Candidates(ActorStateController):
    """A controller whose candidates are the answer given, for every node."""

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer

    def candidates(self, node: Node) -> tuple[str, ...]:
        return self.answer  # type: ignore[no-any-return]


@pytest.mark.parametrize("answer", ["actor:bob", b"actor:bob", None, 5, {"actor:bob": 1}])
def test_candidates_that_are_not_a_collection_are_refused_with_nothing_written(
    answer: Any,
) -> None:
    """One string made one task per letter: the task in the inbox of whoever one letter
    names, never in the candidate's."""
    repository = InMemoryStateRepository()
    ex = WorkflowExecutor(flow_engine(), _Candidates(answer), repository)
    with pytest.raises(InvalidArgumentTypeError, match=r"candidates\(\) of node excl:"):
        ex.claim_task("excl", _ctx("x", actor="alice"))
    assert ex.status("x") is None
    assert ex.inbox(_ctx("y", actor="alice")) == []


class _OldStyleSequence:
    """A sequence with ``__getitem__`` only (iterable, though not an ``Iterable``)."""

    def __init__(self, *items: str) -> None:
        self.items = items

    def __getitem__(self, index: int) -> str:
        return self.items[index]


@pytest.mark.parametrize(
    "answer",
    [
        lambda: ["actor:carol"],
        lambda: frozenset({"actor:carol"}),
        lambda: (c for c in ["actor:carol"]),
        lambda: _OldStyleSequence("actor:carol"),
    ],
    ids=["list", "frozenset", "generator", "getitem-only"],
)
def test_candidates_may_be_any_collection_of_strings(answer: Callable[[], Any]) -> None:
    class Fresh(_Candidates):
        def candidates(self, node: Node) -> Any:
            return answer()

    ex = WorkflowExecutor(flow_engine(), Fresh(None))
    assert ex.claim_task("excl", _ctx("x", actor="alice")) is not None
    assert {t.candidates for t in ex.open_tasks("x")} == {("actor:carol",)}


@pytest.mark.parametrize("bad", [None, {"actor": "alice"}, "x"])
def test_every_operation_refuses_a_context_that_is_not_a_flow_context(
    ex: WorkflowExecutor, bad: Any
) -> None:
    """Not a bare ``AttributeError`` from deep inside the walk or the controller."""
    _approve(ex, "x", actor="alice")
    task = ex.claim_task("excl", _ctx("x", role="boss"))
    assert task is not None
    calls: list[Callable[[], object]] = [
        lambda: ex.claim_task("excl", bad),
        lambda: ex.find_task("excl", bad),
        lambda: ex.find_next_tasks("excl", bad),
        lambda: ex.submit_task(task, TaskAction.FORWARD, bad),
        lambda: ex.submit_task_at("excl", "approve", TaskAction.FORWARD, bad),
        lambda: ex.submit_task_if_waiting(task, TaskAction.FORWARD, bad),
        lambda: ex.inbox(bad),
        lambda: ex.withdraw("excl", bad),
        lambda: ex.send_back(task, bad),
        lambda: ex.reindex("excl", bad),
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentTypeError, match="ctx must be a FlowContext"):
            call()
    assert ex.status("x") == InstanceStatus.RUNNING


def test_send_back_of_an_open_task_built_with_a_bad_node_id_is_refused(
    ex: WorkflowExecutor,
) -> None:
    _approve(ex, "x", actor="alice")
    (open_task,) = ex.open_tasks("x")
    bad = dataclasses.replace(open_task, node_id=["approve"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match=r"task\.node_id"):
        ex.send_back(bad, _ctx("x", role="boss"))


@pytest.mark.parametrize(
    "page",
    [
        {"limit": MAX_PAGE_SIZE + 1},
        {"limit": 10**30},
        {"after": MAX_CURSOR + 1},
        {"after": 10**23},
        {"limit": True},
        {"after": 2.5},
    ],
)
def test_a_page_past_what_a_query_can_serve_is_refused(
    ex: WorkflowExecutor, page: dict[str, Any]
) -> None:
    """Beyond a 64-bit row id or the page-size cap a driver would overflow or fetch without
    bound: the executor refuses first, on every repository."""
    with pytest.raises(InvalidQueryError):
        ex.inbox(_ctx("x", actor="alice"), **page)
    with pytest.raises(InvalidQueryError):
        ex.instances(**page)
    assert ex.instances(limit=MAX_PAGE_SIZE, after=MAX_CURSOR) == []


class _PlainRepository:
    """The StateRepository protocol alone: no unit of work, no task index."""

    def vars_get(self, ctx: FlowContext, node: object) -> None:
        return None

    def state_get(self, ctx: FlowContext, node: object) -> TaskState:
        return TaskState.UNKNOWN

    def state_put(self, ctx: FlowContext, node: object, state: TaskState) -> None: ...

    def state_remove(self, ctx: FlowContext, node: object) -> None: ...

    def state_clear(self, ctx: FlowContext) -> None: ...


def test_a_repository_without_the_index_gets_a_clear_error(engine: FlowEngine) -> None:
    ex = WorkflowExecutor(flow_engine(), controller(), _PlainRepository())
    ctx = _ctx("i-1", actor="alice")
    assert ex.claim_task("excl", ctx) is not None  # the old operations keep working
    calls = [
        lambda: ex.inbox(ctx),
        lambda: ex.open_tasks("i-1"),
        lambda: ex.status("i-1"),
        lambda: ex.instances(),
        lambda: ex.withdraw("excl", ctx),
        lambda: ex.send_back(ex.claim_task("excl", ctx), ctx),
        # Whatever the task: a False would read as "nothing to send back".
        lambda: ex.send_back(None, ctx),
        lambda: ex.send_back(ex.claim_task("excl", _ctx("i-2", actor="alice")), ctx),
    ]
    for call in calls:
        with pytest.raises(IndexUnavailableError, match="keeps the task index"):
            call()


def test_controllers_name_candidates_and_identities() -> None:
    graph = Graph.from_text(
        "id: g\nlayout:\n - {id: s, type: start}\n"
        " - {id: a, meta: {actor: ann, role: fin}}\n - {id: e, type: end}"
    )
    node = graph.get_node_or_throw("a")
    ctx = FlowContext.of("i", {"actor": "ann", "role": 7})
    actor = ActorStateController("actor", "role")
    assert actor.candidates(node) == ("actor:ann", "role:fin")
    assert actor.identities(ctx) == ("actor:ann",)  # a non-text value never matches
    assert ActorStateController().candidates(node) == ("actor:ann",)
    assert BlockStateController().candidates(node) == ("*",)
    assert BlockStateController().identities(ctx) == ("*",)
    assert NotBlockStateController().candidates(node) == ()
    assert NotBlockStateController().identities(ctx) == ()


def test_block_controller_inbox_is_everyones(engine: FlowEngine) -> None:
    load(engine, "id: line\nlayout:\n - {id: s, type: start}\n - {id: A}\n - {id: e, type: end}")
    ex = WorkflowExecutor(engine)
    ex.claim_task("line", FlowContext.of("b-1"))
    assert [(t.node_id, t.candidates) for t in ex.inbox(FlowContext.of())] == [("A", ("*",))]


def test_withdraw_or_send_back_naming_another_graph_is_refused(ex: WorkflowExecutor) -> None:
    _approve(ex, "g-1", actor="alice")
    before = ex.open_tasks("g-1")
    with pytest.raises(GraphMismatchError, match="'g-1' runs graph 'excl', not graph 'par'"):
        ex.withdraw("par", _ctx("g-1", actor="alice"))
    boss = _ctx("g-1", role="boss")
    task = ex.claim_task("excl", boss)
    assert task is not None
    with pytest.raises(GraphMismatchError):
        ex.send_back(dataclasses.replace(before[0], graph_id="par", node_id="legal"), boss)
    assert ex.status("g-1") == InstanceStatus.RUNNING
    assert [t.node_id for t in ex.open_tasks("g-1")] == ["manager"]


_OTHER_GRAPH_OPERATIONS: dict[str, Callable[[WorkflowExecutor, FlowContext, Task], object]] = {
    "claim_task": lambda ex, c, task: ex.claim_task("par", c),
    "find_task": lambda ex, c, task: ex.find_task("par", c),
    "find_next_tasks": lambda ex, c, task: ex.find_next_tasks("par", c),
    "submit_task_at": lambda ex, c, task: ex.submit_task_at("par", "draft", TaskAction.FORWARD, c),
    # par's task as claimed for the instance (one claimed for another is refused before).
    "submit_task_if_waiting": lambda ex, c, task: ex.submit_task_if_waiting(
        dataclasses.replace(task, context=c), TaskAction.FORWARD, c
    ),
    "submit_task": lambda ex, c, task: ex.submit_task(task, TaskAction.FORWARD, c),
}


@pytest.mark.parametrize("operation", sorted(_OTHER_GRAPH_OPERATIONS))
def test_an_operation_naming_another_graph_is_refused_with_nothing_changed(
    ex: WorkflowExecutor, recorder: ListRecorder, operation: str
) -> None:
    """The instance runs ``excl``: a claim, find or submit naming ``par`` would rewrite its
    open tasks for ``par`` (its manager task gone from the boss's inbox) and merge the two
    graphs' states in one instance."""
    _approve(ex, "g-2", actor="alice")
    par_task = ex.claim_task("par", _ctx("g-fresh", actor="alice"))  # a WAITING task of par
    assert par_task is not None
    repository = ex.state_repository
    assert isinstance(repository, InMemoryStateRepository)
    before = (repository.states("g-2"), ex.open_tasks("g-2"), ex.status("g-2"))
    records = list(recorder.records)
    with pytest.raises(GraphMismatchError, match="'g-2' runs graph 'excl', not graph 'par'"):
        _OTHER_GRAPH_OPERATIONS[operation](ex, _ctx("g-2", actor="alice"), par_task)
    assert (repository.states("g-2"), ex.open_tasks("g-2"), ex.status("g-2")) == before
    assert recorder.records == records
    boss = [(t.instance_id, t.node_id) for t in ex.inbox(_ctx(None, role="boss"))]
    assert boss == [("g-2", "manager")]


def test_a_restart_naming_another_graph_starts_the_instance_over_as_that_graph_s(
    ex: WorkflowExecutor,
) -> None:
    _approve(ex, "g-3", actor="alice")
    ex.submit_task_at("par", "draft", TaskAction.RESTART, _ctx("g-3", actor="alice"))
    ex.claim_task("par", _ctx("g-3", actor="alice"))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("g-3")] == [("par", "draft")]
    with pytest.raises(GraphMismatchError):
        ex.claim_task("excl", _ctx("g-3", actor="alice"))


LINEAR = """
id: lin
layout:
  - {id: start, type: start, link: a}
  - {id: a, meta: {actor: u}, link: b}
  - {id: b, meta: {actor: u}, link: c}
  - {id: c, meta: {actor: u}, link: end}
  - {id: end, type: end}
"""


def _linear() -> WorkflowExecutor:
    engine = FlowEngine()
    engine.load(Graph.from_text(LINEAR))
    return WorkflowExecutor(engine, ActorStateController())


def test_a_forward_jump_opens_its_target_with_every_task_it_forwarded_in_the_lineage() -> None:
    ex = _linear()
    u = _ctx("j-1", actor="u")
    ex.submit_task_at("lin", "c", TaskAction.FORWARD_JUMP, u)
    assert [(t.node_id, t.lineage) for t in ex.open_tasks("j-1")] == [("c", ("a", "b"))]
    task = ex.claim_task("lin", u)
    assert ex.send_back(task, u)  # back to b, the task that actually sent c
    assert [(t.node_id, t.lineage) for t in ex.open_tasks("j-1")] == [("b", ("a",))]


def test_a_back_jump_reopens_its_target_with_the_lineage_before_it() -> None:
    ex = _linear()
    u = _ctx("j-2", actor="u")
    for _ in range(2):
        assert ex.submit_task_if_waiting(ex.claim_task("lin", u), TaskAction.FORWARD, u)
    assert [(t.node_id, t.lineage) for t in ex.open_tasks("j-2")] == [("c", ("a", "b"))]
    ex.submit_task_at("lin", "b", TaskAction.BACK_JUMP, u)
    assert [(t.node_id, t.lineage) for t in ex.open_tasks("j-2")] == [("b", ("a",))]
    ex.submit_task_at("lin", "c", TaskAction.FORWARD_JUMP, u)
    assert [(t.node_id, t.lineage) for t in ex.open_tasks("j-2")] == [("c", ("a", "b"))]


def test_a_forward_jump_onto_a_gateway_leaves_the_aggregate_its_states_give() -> None:
    """The jump leaves the gateway WAITING (the reference's find returns it as the last node
    met); a gateway has no task code to wait on, so every walk passes it: the instance is
    complete — never RUNNING with no open task, in no inbox yet listed as running."""
    engine = FlowEngine()
    engine.load(Graph.from_text(JUMP_TO_GATEWAY))
    ex = WorkflowExecutor(engine, ActorStateController())
    alice = _ctx("gj", actor="alice")
    ex.claim_task("g", alice)
    ex.submit_task_at("g", "gw", TaskAction.FORWARD_JUMP, alice)
    assert (
        ex.state_repository.state_get(alice, engine.get_graph_or_throw("g").get_node_or_throw("gw"))
        == TaskState.WAITING
    )
    assert (ex.status("gj"), ex.open_tasks("gj")) == (InstanceStatus.COMPLETED, [])
    ex.find_task("g", _ctx("gj"))  # a real walk passes the gateway: the same answer
    assert (ex.status("gj"), ex.open_tasks("gj")) == (InstanceStatus.COMPLETED, [])


class _HoldingDriver(SimpleFlowDriver):
    """An application's driver: a node with ``hold`` in its meta (no task of its own) waits
    for an outside event."""

    def post_handle_task(self, exchanger: Any, node: Any) -> None:
        if node.meta.get("hold") and not exchanger.context.get("released"):
            exchanger.stop()
            return
        super().post_handle_task(exchanger, node)


def test_a_node_an_applications_driver_parks_stays_parked_without_task_code() -> None:
    """The dry walk cannot run the driver: a task-less node it left WAITING stays where the
    instance waits, as every claim finds it — the next task is not open yet."""
    engine = FlowEngine(_HoldingDriver())
    engine.load(
        Graph.from_text(
            "id: h\nlayout:\n  - {id: s, type: start}\n  - {id: a, meta: {actor: alice}}\n"
            "  - {id: hold, meta: {hold: true}}\n  - {id: b, meta: {actor: bob}}\n"
            "  - {id: e, type: end}\n"
        )
    )
    ex = WorkflowExecutor(engine, ActorStateController())
    alice = _ctx("hd", actor="alice")
    assert ex.submit_task_if_waiting(ex.claim_task("h", alice), TaskAction.FORWARD, alice)
    bob = _ctx("hd", actor="bob")
    assert (ex.status("hd"), ex.open_tasks("hd"), ex.inbox(bob)) == (
        InstanceStatus.RUNNING,
        [],
        [],
    )
    claimed = ex.claim_task("h", bob)
    assert claimed is not None and claimed.node.id == "hold"


ROUTED = """
id: routed
layout:
  - {id: s, type: start, link: gw}
  - id: gw
    type: exclusive
    link:
      - {nextId: a, when: "amount >= 50"}
      - {nextId: b}
  - {id: a, meta: {actor: bob}, link: e}
  - {id: b, meta: {actor: carol}, link: e}
  - {id: e, type: end}
"""


def test_a_forward_that_changes_no_state_but_the_routing_variables_opens_what_they_route_to(
    engine: FlowEngine,
) -> None:
    """The gateway stays COMPLETED, but the submit's variables now route elsewhere: the open
    tasks follow them, as on SQL (which stores the submit's variables) — what a claim would
    return now."""
    engine.load(Graph.from_text(ROUTED))
    ex = WorkflowExecutor(engine, ActorStateController())
    ex.submit_task_at("routed", "gw", TaskAction.FORWARD, FlowContext.of("r-1", {"amount": 900}))
    assert [t.node_id for t in ex.open_tasks("r-1")] == ["a"]
    ex.submit_task_at("routed", "gw", TaskAction.FORWARD, FlowContext.of("r-1", {"amount": 1}))
    assert [t.node_id for t in ex.open_tasks("r-1")] == ["b"]
    carol = FlowContext.of("r-1", {"actor": "carol", "amount": 1})
    task = ex.claim_task("routed", carol)
    assert task is not None and task.node.id == "b"


def test_a_task_of_the_graph_an_instance_was_driven_on_through_sorts_as_newly_opened(
    engine: FlowEngine,
) -> None:
    """As SQL's todo rows do: the instance restarted through another graph whose task has
    the same node id opens that task anew (the inbox lists it after tasks opened meanwhile)."""
    engine.load(Graph.from_text(SWITCH_A))
    engine.load(Graph.from_text(SWITCH_B))
    ex = WorkflowExecutor(engine, ActorStateController("actor", "role"))
    for instance_id in ("sw-x", "sw-y"):
        ex.claim_task("switch-a", FlowContext.of(instance_id, {"role": "hr"}))
    ex.submit_task_at("switch-b", "t", TaskAction.RESTART, FlowContext.of("sw-x", {"role": "hr"}))
    ex.claim_task("switch-b", FlowContext.of("sw-x", {"role": "hr"}))
    inbox = ex.inbox(FlowContext.of(None, {"role": "hr"}))
    assert [(t.instance_id, t.graph_id) for t in inbox] == [
        ("sw-y", "switch-a"),
        ("sw-x", "switch-b"),
    ]


def test_a_sub_graph_s_task_claimed_on_its_own_id_leaves_the_instance_on_its_root_graph(
    engine: FlowEngine,
) -> None:
    """The reference claims a sub-graph's task on the sub-graph's id; the instance still runs
    its root graph — its index is the root graph's throughout, and an unrelated graph is
    still refused."""
    load(engine, SUB_GRAPH_REVIEW)
    load(engine, CALLS_SUB_GRAPH)
    load(engine, LINEAR)
    ex = WorkflowExecutor(engine, ActorStateController())
    applicant = FlowContext.of("m1", {"actor": "applicant"})
    reviewer = FlowContext.of("m1", {"actor": "reviewer"})
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, applicant)
    check = ex.claim_task("review", reviewer)
    assert check is not None and check.node.id == "check"
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("m1", "main")]
    ex.submit_task(check, TaskAction.FORWARD, reviewer)
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("m1", "main")]
    with pytest.raises(GraphMismatchError, match="'m1' runs graph 'main', not graph 'lin'"):
        ex.claim_task("lin", applicant)
    done = ex.claim_task("main", applicant)
    assert done is not None and done.node.id == "done"
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("m1")] == [("main", "done")]


_SUB_GRAPH_IN_TWO_STEPS = """
id: review2
layout:
  - {id: s, type: start}
  - {id: check, meta: {actor: reviewer}}
  - {id: sign, meta: {actor: signer}}
  - {id: e, type: end}
"""
_CALLS_TWO_STEPS = """
id: main2
layout:
  - {id: start, type: start}
  - {id: apply, meta: {actor: applicant}}
  - {id: call, task: "#review2"}
  - {id: done, meta: {actor: applicant}}
  - {id: end, type: end}
"""


def test_a_sub_graph_s_tasks_are_open_tasks_and_the_task_after_it_opens_when_it_ends(
    engine: FlowEngine,
) -> None:
    """A claim on the root graph would return the sub-graph's task: it is an open task, in
    its candidates' inbox, under the sub-graph's id (the graph to name for its node). Once
    the sub-graph's last task is submitted on the sub-graph's own id, the root graph's next
    task is open at once — not only after someone claims on the root graph (the calling node
    stays WAITING in the row until a walk of the root graph completes it)."""
    load(engine, _SUB_GRAPH_IN_TWO_STEPS)
    load(engine, _CALLS_TWO_STEPS)
    ex = WorkflowExecutor(engine, ActorStateController())

    def as_(actor: str) -> FlowContext:
        return FlowContext.of("m2", {"actor": actor})

    ex.submit_task_at("main2", "apply", TaskAction.FORWARD, as_("applicant"))
    for actor, node_id in (("reviewer", "check"), ("signer", "sign")):
        assert [(t.graph_id, t.node_id) for t in ex.open_tasks("m2")] == [("review2", node_id)]
        assert [(t.graph_id, t.node_id) for t in ex.inbox(as_(actor))] == [("review2", node_id)]
        assert ex.inbox(as_("applicant")) == []
        assert ex.status("m2") == InstanceStatus.RUNNING
        task = ex.claim_task("review2", as_(actor))
        assert task is not None and task.node.id == node_id
        assert [t.state for t in ex.open_tasks("m2")] == [TaskState.WAITING]
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, as_(actor))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("m2")] == [("main2", "done")]
    assert [(t.instance_id, t.node_id) for t in ex.inbox(as_("applicant"))] == [("m2", "done")]
    done = ex.claim_task("main2", as_("applicant"))
    assert done is not None
    assert ex.submit_task_if_waiting(done, TaskAction.FORWARD, as_("applicant"))
    assert ex.status("m2") == InstanceStatus.COMPLETED
    assert ex.open_tasks("m2") == []


def test_a_sub_graph_s_open_task_is_withdrawn_and_not_sent_back(engine: FlowEngine) -> None:
    """A withdraw terminates a sub-graph's open task (its history record under the
    sub-graph's id); a send-back of it refuses, nothing written (its lineage starts at the
    sub-graph's boundary)."""
    load(engine, _SUB_GRAPH_IN_TWO_STEPS)
    load(engine, _CALLS_TWO_STEPS)
    recorder = ListRecorder()
    ex = WorkflowExecutor(engine, ActorStateController(), recorder=recorder)

    def as_(actor: str) -> FlowContext:
        return FlowContext.of("m5", {"actor": actor})

    ex.submit_task_at("main2", "apply", TaskAction.FORWARD, as_("applicant"))
    check = ex.claim_task("review2", as_("reviewer"))
    assert check is not None
    assert [(t.graph_id, t.node_id, t.state) for t in ex.open_tasks("m5")] == [
        ("review2", "check", TaskState.WAITING)
    ]
    states = ex.state_repository.states("m5")
    with pytest.raises(SendBackError, match="lineage is empty"):
        ex.send_back(ex.open_tasks("m5")[0], as_("reviewer"))
    with pytest.raises(SendBackError, match="lineage is empty"):
        ex.send_back(check, as_("reviewer"))
    assert ex.state_repository.states("m5") == states
    assert ex.withdraw("main2", as_("applicant"))
    assert ex.status("m5") == InstanceStatus.WITHDRAWN
    assert ex.state_repository.states("m5")["review2:check"] == TaskState.TERMINATED
    last = recorder.records[-1]
    assert (last.graph_id, last.task_id, last.action) == ("review2", "check", TaskAction.TERMINATE)
    assert ex.claim_task("review2", as_("reviewer")) is None


def test_a_task_sent_back_inside_a_sub_graph_reopens_the_one_before_it(
    engine: FlowEngine,
) -> None:
    """Inside the sub-graph the lineage holds: the signer's task (opened by the reviewer's)
    sent back — as the inbox lists it, under the sub-graph's id — re-opens the reviewer's,
    WAITING; the history record names the sub-graph."""
    load(engine, _SUB_GRAPH_IN_TWO_STEPS)
    load(engine, _CALLS_TWO_STEPS)
    recorder = ListRecorder()
    ex = WorkflowExecutor(engine, ActorStateController(), recorder=recorder)

    def as_(actor: str) -> FlowContext:
        return FlowContext.of("m6", {"actor": actor})

    ex.submit_task_at("main2", "apply", TaskAction.FORWARD, as_("applicant"))
    check = ex.claim_task("review2", as_("reviewer"))
    assert check is not None and ex.submit_task_if_waiting(
        check, TaskAction.FORWARD, as_("reviewer")
    )
    assert ex.claim_task("review2", as_("signer")) is not None
    (sign,) = ex.inbox(as_("signer"))
    assert (sign.graph_id, sign.node_id, sign.lineage) == ("review2", "sign", ("check",))
    assert ex.send_back(sign, as_("signer"), message="again")
    assert [(t.graph_id, t.node_id, t.state) for t in ex.open_tasks("m6")] == [
        ("review2", "check", TaskState.WAITING)
    ]
    last = recorder.records[-1]
    assert (last.graph_id, last.task_id, last.target.id) == ("review2", "sign", "check")
    again = ex.claim_task("review2", as_("reviewer"))
    assert again is not None and again.node.id == "check"


_REVIEW_WITH_CHECK = SUB_GRAPH_REVIEW.replace("id: review", "id: review3")
_MAIN_WITH_CHECK = """
id: main3
layout:
  - {id: start, type: start}
  - {id: check, meta: {actor: applicant}}
  - {id: call, task: "#review3"}
  - {id: done, meta: {actor: applicant}}
  - {id: end, type: end}
"""


def test_send_back_does_not_cross_a_sub_graph_s_boundary(engine: FlowEngine) -> None:
    """The task after a sub-graph was opened by the sub-graph's last task, whose node id
    (``check``) the root graph has too: its lineage starts afresh — sending it back refuses,
    nothing written, instead of re-opening the root graph's ``check`` (whose submit did not
    lead here) and skipping the review when it is forwarded again."""
    load(engine, _REVIEW_WITH_CHECK)
    load(engine, _MAIN_WITH_CHECK)
    ex = WorkflowExecutor(engine, ActorStateController())

    def as_(actor: str) -> FlowContext:
        return FlowContext.of("m3", {"actor": actor})

    ex.submit_task_at("main3", "check", TaskAction.FORWARD, as_("applicant"))
    check = ex.claim_task("review3", as_("reviewer"))
    assert check is not None and check.node.graph.id == "review3"
    assert ex.submit_task_if_waiting(check, TaskAction.FORWARD, as_("reviewer"))
    assert [(t.node_id, t.lineage) for t in ex.open_tasks("m3")] == [("done", ())]
    done = ex.claim_task("main3", as_("applicant"))
    assert done is not None and done.node.id == "done"
    states = ex.state_repository.states("m3")
    with pytest.raises(SendBackError, match="lineage is empty"):
        ex.send_back(done, as_("applicant"))
    assert ex.state_repository.states("m3") == states


_CALLS_A_GRAPH_NOT_LOADED = """
id: half-loaded
layout:
  - {id: start, type: start, link: split}
  - {id: split, type: parallel, link: [h, call]}
  - {id: h, meta: {actor: x}, link: join}
  - {id: call, task: "#not-loaded", link: join}
  - {id: join, type: parallel, link: end}
  - {id: end, type: end}
"""


def test_a_sub_graph_the_engine_lacks_leaves_the_other_branches_open(engine: FlowEngine) -> None:
    """The claim's walk stops at the first branch's task before it reaches the call of a
    graph the engine does not have: the claim works and its task is open — the open tasks'
    walk leaves the missing graph for the real walks to report, as before sub-graphs were
    walked."""
    load(engine, _CALLS_A_GRAPH_NOT_LOADED)
    ex = WorkflowExecutor(engine, ActorStateController())
    x = FlowContext.of("h-1", {"actor": "x"})
    task = ex.claim_task("half-loaded", x)
    assert task is not None and task.node.id == "h"
    assert [t.node_id for t in ex.open_tasks("h-1")] == ["h"]


_SUB_WITH_CHECK = """
id: sub-check
layout:
  - {id: s, type: start}
  - {id: check, meta: {actor: reviewer}}
  - {id: sign, meta: {actor: signer}}
  - {id: e, type: end}
"""
_ROOT_CHECK_BESIDE_THE_CALL = """
id: beside
layout:
  - {id: start, type: start, link: apply}
  - {id: apply, meta: {actor: applicant}, link: split}
  - {id: split, type: parallel, link: [call, x]}
  - {id: call, task: "#sub-check", link: join}
  - {id: x, meta: {actor: bob}, link: check}
  - {id: check, meta: {actor: bob}, link: join}
  - {id: join, type: parallel, link: end}
  - {id: end, type: end}
"""


def test_a_root_task_is_listed_before_a_sub_graph_s_task_of_the_same_node_id(
    engine: FlowEngine,
) -> None:
    """The root graph's ``check`` and the sub-graph's ``check`` are open at once: the task
    table keys an instance's tasks by node id, and the root graph's is the one listed (with
    its lineage, in bob's inbox, terminated by a withdraw); the sub-graph's is listed again
    once the root's closes. A send-back that would re-open the hidden one refuses."""
    load(engine, _SUB_WITH_CHECK)
    load(engine, _ROOT_CHECK_BESIDE_THE_CALL)
    ex = WorkflowExecutor(engine, ActorStateController())

    def as_(actor: str, instance_id: str = "b-1") -> FlowContext:
        return FlowContext.of(instance_id, {"actor": actor})

    def opened(instance_id: str = "b-1") -> list[tuple[str, str, tuple[str, ...]]]:
        return [(t.graph_id, t.node_id, t.lineage) for t in ex.open_tasks(instance_id)]

    for instance_id in ("b-1", "b-2"):
        ex.submit_task_at("beside", "apply", TaskAction.FORWARD, as_("applicant", instance_id))
        ex.submit_task_at("beside", "x", TaskAction.FORWARD, as_("bob", instance_id))
    assert opened() == [("beside", "check", ("apply", "x"))]  # the sub-graph's check hidden
    assert ex.inbox(as_("reviewer")) == []
    check = ex.claim_task("sub-check", as_("reviewer"))
    assert check is not None and ex.submit_task_if_waiting(
        check, TaskAction.FORWARD, as_("reviewer")
    )
    assert opened() == [("beside", "check", ("apply", "x")), ("sub-check", "sign", ("check",))]
    assert ex.claim_task("sub-check", as_("signer")) is not None
    (sign,) = ex.inbox(as_("signer"))
    states = ex.state_repository.states("b-1")
    with pytest.raises(SendBackError, match="would not make 'check' the open task again"):
        ex.send_back(sign, as_("signer"))
    assert ex.state_repository.states("b-1") == states
    assert [(t.graph_id, t.node_id) for t in ex.inbox(as_("bob"))] == [("beside", "check")] * 2
    root_check = ex.claim_task("beside", as_("bob"))
    assert root_check is not None and root_check.node.graph.id == "beside"
    assert ex.send_back(root_check, as_("bob"))  # back to x, its own lineage
    assert ("beside", "x", ("apply",)) in opened()
    ex.withdraw("beside", as_("applicant", "b-2"))
    assert ex.state_repository.states("b-2")["beside:check"] == TaskState.TERMINATED


def test_a_withdraw_that_cannot_terminate_a_sub_graph_s_task_writes_nothing(
    engine: FlowEngine,
) -> None:
    """An executor whose engine lacks the sub-graph (the CLI has only the instance's own
    graph) cannot terminate the sub-graph's open task: GraphNotFoundError naming it and the
    instance, nothing written — it withdrew the instance and left that task WAITING, with
    no history record."""
    load(engine, _SUB_GRAPH_IN_TWO_STEPS)
    load(engine, _CALLS_TWO_STEPS)
    ex = WorkflowExecutor(engine, ActorStateController())
    ex.submit_task_at(
        "main2", "apply", TaskAction.FORWARD, FlowContext.of("w-1", {"actor": "applicant"})
    )
    assert ex.claim_task("review2", FlowContext.of("w-1", {"actor": "reviewer"})) is not None
    root_only = FlowEngine()
    load(root_only, _CALLS_TWO_STEPS)
    recorder = ListRecorder()
    other = WorkflowExecutor(
        root_only, ActorStateController(), state_repository=ex.state_repository, recorder=recorder
    )
    states = ex.state_repository.states("w-1")
    with pytest.raises(GraphNotFoundError, match="'review2' \\(instance 'w-1'\\)"):
        other.withdraw("main2", FlowContext.of("w-1", {"actor": "applicant"}))
    assert ex.state_repository.states("w-1") == states
    assert (ex.status("w-1"), recorder.records) == (InstanceStatus.RUNNING, [])


_PARKS = """
id: park
layout:
  - {id: s, type: start, link: a}
  - {id: a, meta: {actor: alice}, link: wait}
  - {id: wait, task: "ran = (ran or 0) + 1; go or context.stop()", link: h2}
  - {id: h2, meta: {actor: bob}, link: e}
  - {id: e, type: end}
"""


def test_finds_on_a_withdrawn_instance_walk_nothing_and_run_no_task_code() -> None:
    """The automatic node stopped itself (the instance RUNNING with no open task), then the
    instance was withdrawn: a find walked on, ran the node's task code again and opened the
    next task in a withdrawn instance."""
    engine = FlowEngine()
    engine.load(Graph.from_text(_PARKS))
    repository = InMemoryStateRepository()
    ex = WorkflowExecutor(engine, ActorStateController(), state_repository=repository)
    _approve(ex, "w", "park", actor="alice")
    assert ex.withdraw("park", _ctx("w", actor="alice"))
    before = repository.states("w")
    bob = _ctx("w", actor="bob", go=True)
    assert ex.find_task("park", bob) is None
    assert ex.find_next_tasks("park", bob) == []
    assert ex.claim_task("park", bob) is None
    assert bob.get("ran") is None
    assert repository.states("w") == before
    assert ex.status("w") == InstanceStatus.WITHDRAWN
