"""Cycles end with StepBudgetError instead of hanging (issue 11 item 4).

Every workflow walk passes the nodes it has completed, so a walk that enters a cycle whose
nodes are all completed (an edge back to an earlier task), or a cycle of automatic nodes, goes
round forever — while a SQL repository holds the instance row lock. The executor's step budget
(``max_steps``) ends such a walk with a typed error naming the graph, node and instance.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from wf_support import ListRecorder, load

from flow import FlowContext, FlowEngine, FlowError, Graph, StepBudgetError
from flow.errors import ExpressionError
from flow.evaluation import SafeEvaluation
from flow.workflow import (
    ActorStateController,
    InMemoryStateRepository,
    NotBlockStateController,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)

REJECT = """
id: reject
layout:
  - {id: s, type: start}
  - {id: apply, meta: {actor: employee}}
  - {id: review, meta: {actor: manager}}
  - {id: gw, type: exclusive, link: [{nextId: e, when: "approved == true"}, {nextId: apply}]}
  - {id: e, type: end}
"""

AUTO_CYCLE = """
id: auto
layout:
  - {id: s, type: start}
  - {id: a, type: exclusive, link: b}
  - {id: b, type: inclusive, link: c}
  - {id: c, type: parallel, link: a}
"""


def _executor(text: str, **options: Any) -> tuple[WorkflowExecutor, Graph]:
    engine = FlowEngine()
    graph = load(engine, text)
    return WorkflowExecutor(engine, ActorStateController(), **options), graph


def _to_review(executor: WorkflowExecutor) -> None:
    ctx = FlowContext.of("i1", {"actor": "employee", "approved": False})
    task = executor.claim_task("reject", ctx)
    assert task is not None and task.node.id == "apply"
    executor.submit_task(task, TaskAction.FORWARD, ctx)


def test_default_budget_and_repr() -> None:
    executor = WorkflowExecutor(FlowEngine())
    assert executor.max_steps == WorkflowExecutor.MAX_STEPS == 100_000
    assert "max_steps=100000" in repr(executor)


@pytest.mark.parametrize("bad", ["5", 0, -1, 1.5, True])
def test_a_budget_that_is_no_positive_count_is_refused_when_the_executor_is_built(
    bad: object,
) -> None:
    """Not at every later walk, as a raw TypeError ("5") or a StepBudgetError on every
    operation (0, -1)."""
    with pytest.raises(ValueError, match="max_steps must be a positive int or None"):
        WorkflowExecutor(FlowEngine(), max_steps=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["5", 0, -1, 1.5, True])
def test_a_budget_assigned_later_is_checked_too(bad: object) -> None:
    """``executor.max_steps = n`` (docs/limits.md) is refused as the keyword is, and the
    executor keeps the budget it had."""
    executor = WorkflowExecutor(FlowEngine(), max_steps=500)
    with pytest.raises(ValueError, match="max_steps must be a positive int or None"):
        executor.max_steps = bad  # type: ignore[assignment]
    assert executor.max_steps == 500
    executor.max_steps = None
    assert executor.max_steps is None


def test_forward_into_an_edge_back_to_apply_raises_step_budget_error() -> None:
    recorder = ListRecorder()
    executor, _ = _executor(REJECT, recorder=recorder, max_steps=1_000)
    _to_review(executor)
    ctx = FlowContext.of("i1", {"actor": "manager", "approved": False})
    task = executor.claim_task("reject", ctx)
    assert task is not None and task.node.id == "review"
    with pytest.raises(StepBudgetError) as caught:
        executor.submit_task(task, TaskAction.FORWARD, ctx)
    error = caught.value
    assert (error.graph_id, error.instance_id, error.budget) == ("reject", "i1", 1_000)
    assert error.node_id in {"s", "apply", "review", "gw"}
    assert "graph 'reject'" in str(error) and "instance 'i1'" in str(error)
    assert isinstance(error, FlowError)
    assert len(recorder.records) == 1  # only apply's forward: the failed submit records nothing


def test_approved_path_of_the_same_graph_still_completes() -> None:
    executor, _ = _executor(REJECT, max_steps=1_000)
    _to_review(executor)
    ctx = FlowContext.of("i1", {"actor": "manager", "approved": True})
    task = executor.claim_task("reject", ctx)
    assert task is not None
    executor.submit_task(task, TaskAction.FORWARD, ctx)
    assert executor.claim_task("reject", ctx) is None
    assert executor.find_task("reject", ctx).is_end  # type: ignore[union-attr]


@pytest.mark.parametrize("operation", ["claim_task", "find_task", "find_next_tasks"])
def test_every_walk_over_a_cycle_of_automatic_nodes_raises(operation: str) -> None:
    executor, _ = _executor(AUTO_CYCLE, max_steps=500)
    with pytest.raises(StepBudgetError, match=r"graph 'auto' \(instance 'x'\)") as caught:
        getattr(executor, operation)("auto", FlowContext.of("x"))
    assert caught.value.node_id in {"a", "b", "c"}


@pytest.mark.parametrize("action", [TaskAction.FORWARD, TaskAction.FORWARD_JUMP])
def test_submits_walking_a_cycle_raise(action: TaskAction) -> None:
    text = """
    id: sub
    layout:
      - {id: s, type: start}
      - {id: t, meta: {actor: a}}
      - {id: g, type: exclusive, link: h}
      - {id: h, type: exclusive, link: g}
    """
    executor, graph = _executor(text, max_steps=300)
    ctx = FlowContext.of("i1", {"actor": "a"})
    with pytest.raises(StepBudgetError):
        executor.submit_task_at(graph, "t" if action == TaskAction.FORWARD else "h", action, ctx)


def test_a_cycle_of_automatic_activities_under_not_block_raises() -> None:
    engine = FlowEngine()
    graph = load(
        engine,
        """
        id: nb
        layout:
          - {id: s, type: start}
          - {id: a, task: "n = (n or 0) + 1"}
          - {id: b, link: a}
        """,
    )
    executor = WorkflowExecutor(engine, NotBlockStateController(), max_steps=200)
    ctx = FlowContext.of("i1")
    with pytest.raises(StepBudgetError):
        executor.claim_task(graph, ctx)
    assert ctx.get("n") == 1  # each task ran once: completed nodes are passed, not re-run


def test_the_instance_lock_is_released_after_the_error() -> None:
    executor, _ = _executor(AUTO_CYCLE, max_steps=100)
    with pytest.raises(StepBudgetError):
        executor.claim_task("auto", FlowContext.of("x"))
    outcome: list[object] = []

    def other() -> None:
        try:
            executor.find_task("auto", FlowContext.of("x"))
        except StepBudgetError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive() and len(outcome) == 1


def test_each_walk_of_an_operation_gets_the_whole_budget() -> None:
    """A forward walks several times (find walks, one per next node): the budget is per walk,
    so a graph whose single walk fits passes however many walks the submit makes."""
    lines = "\n".join(f"  - {{id: g{i}, type: exclusive}}" for i in range(150))
    text = f"""
id: long
layout:
  - {{id: s, type: start}}
  - {{id: t, meta: {{actor: a}}, link: [g0, p]}}
  - {{id: p, type: parallel, link: g0}}
{lines}
  - {{id: u, meta: {{actor: a}}}}
  - {{id: e, type: end}}
"""
    executor, graph = _executor(text, max_steps=200)
    ctx = FlowContext.of("i1", {"actor": "a"})
    task = executor.claim_task(graph, ctx)
    assert task is not None and task.node.id == "t"
    executor.submit_task(task, TaskAction.FORWARD, ctx)
    assert executor.claim_task(graph, ctx).node.id == "u"  # type: ignore[union-attr]
    tight, _ = _executor(text, max_steps=100)
    with pytest.raises(StepBudgetError):
        tight.submit_task_at(graph, "t", TaskAction.FORWARD, FlowContext.of("i2", {"actor": "a"}))


def test_unlimited_budget_walks_long_acyclic_graphs() -> None:
    lines = "\n".join(f"  - {{id: g{i}, type: exclusive}}" for i in range(3_000))
    text = f"id: big\nlayout:\n  - {{id: s, type: start}}\n{lines}\n  - {{id: e, type: end}}\n"
    unlimited, graph = _executor(text, max_steps=None)
    assert unlimited.claim_task(graph, FlowContext.of("i1")) is None
    default, _ = _executor(text)
    assert default.claim_task(graph, FlowContext.of("i2")) is None
    tight, _ = _executor(text, max_steps=1_000)
    with pytest.raises(StepBudgetError):
        tight.claim_task(graph, FlowContext.of("i3"))


def test_a_loop_over_an_endless_iterator_raises_in_the_workflow() -> None:
    engine = FlowEngine()
    graph = load(
        engine,
        """
        id: endless
        layout:
          - {id: s, type: start}
          - {id: l, type: loop, meta: {$for: i, $in: items}, link: []}
          - {id: e, type: end}
        """,
    )
    executor = WorkflowExecutor(engine, NotBlockStateController(), max_steps=1_000)
    with pytest.raises(StepBudgetError, match="node 'l'"):
        executor.claim_task(graph, FlowContext.of("i1", {"items": itertools.count()}))


def test_states_written_before_the_error_are_those_of_the_in_memory_repository() -> None:
    """Without a unit of work the in-memory repository keeps what the walk wrote before
    the error (as for any error); a transactional repository keeps nothing."""
    repo = InMemoryStateRepository()
    engine = FlowEngine()
    load(engine, AUTO_CYCLE)
    executor = WorkflowExecutor(engine, ActorStateController(), repo, max_steps=50)
    with pytest.raises(StepBudgetError):
        executor.claim_task("auto", FlowContext.of("x"))
    assert set(repo.states("x").values()) <= {TaskState.COMPLETED}


HEAVY_CYCLE = """
id: heavy
layout:
  - {id: s, type: start, link: a}
  - {id: a, type: exclusive, link: [{nextId: b, when: '([1] * 20000).count(2) == 0'}]}
  - {id: b, type: exclusive, link: [{nextId: a, when: '([1] * 20000).count(2) == 0'}]}
"""

# A submit's forward runs the automatic node after the task in a walk of its own.
HEAVY_AUTO_CYCLE = """
id: heavy-auto
layout:
  - {id: s, type: start, link: t}
  - {id: t, meta: {actor: alice}, link: auto}
  - {id: auto, link: g}
  - {id: g, type: exclusive, link: [{nextId: auto, when: '([1] * 20000).count(2) == 0'}]}
"""


def test_a_cycle_of_costly_conditions_ends_at_the_operations_work_budget() -> None:
    """Each lap evaluates the conditions again, each within its own max_work; the step budget
    counts nodes only (100,000 laps of these conditions took minutes holding the row lock).
    The operation's expressions share max_operation_work, so it ends long before its steps."""
    from flow._expression.limits import METER

    ex = WorkflowExecutor(FlowEngine(), ActorStateController(), InMemoryStateRepository())
    with pytest.raises(ExpressionError, match="max_operation_work") as raised:
        ex.claim_task(Graph.from_text(HEAVY_CYCLE, strict=True), FlowContext.of("hc-1", {}))
    assert raised.value.instance_id == "hc-1"
    assert METER.operation_left is None  # the budget ends with the operation
    # Outside an operation a condition keeps its own budget only: the same text evaluates.
    assert SafeEvaluation().run_condition(FlowContext.of("hc-2"), "([1] * 20000).count(2) == 0")


def test_a_submit_whose_automatic_successors_cycle_ends_at_the_same_budget() -> None:
    ex = WorkflowExecutor(FlowEngine(), ActorStateController(), InMemoryStateRepository())
    graph = Graph.from_text(HEAVY_AUTO_CYCLE)
    alice = FlowContext.of("ha-1", {"actor": "alice"})
    task = ex.claim_task(graph, alice)
    assert task is not None and task.node.id == "t"
    with pytest.raises(ExpressionError, match="max_operation_work"):
        ex.submit_task(task, TaskAction.FORWARD, alice)
    assert ex.claim_task(graph, alice).node.id == "t"  # nothing of the submit was kept


def test_the_open_task_walk_gets_a_budget_that_does_not_grow_with_the_graph() -> None:
    """The claim's own walk stops at `h`; the walk that computes the open tasks follows the
    parallel sibling into a cycle of gateways. Its budget is the executor's plus two passes
    over the nodes — once it was the executor's per node (20 M steps here, a minute holding
    the row lock)."""
    chain = "\n".join(
        f"  - {{id: q{i}, meta: {{actor: clerk}}, link: q{i + 1}}}" for i in range(200)
    )
    text = f"""
id: hidden
layout:
  - {{id: s, type: start, link: p}}
  - {{id: p, type: parallel, link: [h, c1]}}
  - {{id: h, meta: {{actor: boss}}, link: q0}}
  - {{id: c1, type: exclusive, link: c2}}
  - {{id: c2, type: exclusive, link: c1}}
{chain}
  - {{id: q200, meta: {{actor: clerk}}, link: e}}
  - {{id: e, type: end}}
"""
    executor, graph = _executor(text, max_steps=1_000)
    with pytest.raises(StepBudgetError) as raised:
        executor.claim_task(graph, FlowContext.of("i1", {"actor": "boss"}))
    assert raised.value.budget == 1_000 + 2 * len(graph.nodes)


def test_splits_without_a_join_in_a_row_end_like_a_cycle_and_say_so() -> None:
    """30 parallel splits in a row, each branch running into the next split: 2^30 paths. No
    cycle, nothing `validate()` flags; the budget ends the walk and its message names both
    causes."""
    layers = []
    for i in range(30):
        layers += [
            f"  - {{id: p{i}, type: parallel, link: [a{i}, b{i}]}}",
            f"  - {{id: a{i}, link: m{i}}}",
            f"  - {{id: b{i}, link: m{i}}}",
            f"  - {{id: m{i}, link: {'p' + str(i + 1) if i < 29 else 'h'}}}",
        ]
    text = "id: fan\nlayout:\n  - {id: s, type: start, link: p0}\n" + "\n".join(layers)
    text += "\n  - {id: h, meta: {actor: boss}, link: e}\n  - {id: e, type: end}\n"
    executor, graph = _executor(text, max_steps=5_000)
    with pytest.raises(StepBudgetError, match="fan out into more paths"):
        executor.claim_task(graph, FlowContext.of("i1", {"actor": "boss"}))
