"""Seeded random walks over the approval aggregate, checking aggregate.md §6 after each step.

Shared by the in-memory tests and the live SQL tests: the walker only talks to a
:class:`WorkflowExecutor`, so the same sequence of operations runs on every repository.
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flow import FlowContext, FlowEngine, Graph
from flow.workflow import (
    ActorStateController,
    InMemoryStateRepository,
    InstanceClosedError,
    InstanceStatus,
    OpenTask,
    SendBackError,
    Task,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)

EXCLUSIVE = """
id: excl
layout:
  - {id: start, type: start, link: apply}
  - {id: apply, title: Apply, meta: {actor: alice}, link: amount}
  - id: amount
    type: exclusive
    link:
      - {nextId: director, when: "amount >= 5000"}
      - {nextId: manager}
  - {id: manager, title: Manager, meta: {role: boss}, link: check}
  - {id: director, title: Director, meta: {actor: carol, role: boss}, link: check}
  - {id: check, type: exclusive, link: archive}
  - {id: archive, title: Archive, meta: {role: clerk}, link: end}
  - {id: end, type: end}
"""

#: A FORWARD_JUMP onto ``gw`` leaves the gateway WAITING (the reference's find returns it).
JUMP_TO_GATEWAY = """
id: g
layout:
  - {id: s, type: start, link: apply}
  - {id: apply, meta: {actor: alice}, link: gw}
  - id: gw
    type: exclusive
    link:
      - {nextId: mgr, when: "amount >= 50"}
      - {nextId: e}
  - {id: mgr, meta: {actor: boss}, link: e}
  - {id: e, type: end}
"""

#: Two graphs with a task of the same node id and candidate: a RESTART naming the other
#: graph starts an instance over as that graph's (any other operation naming it is refused).
SWITCH_A = """
id: switch-a
layout:
  - {id: s, type: start, link: t}
  - {id: t, meta: {role: hr}, link: e}
  - {id: e, type: end}
"""
#: A sub-graph with a human task, and a root graph calling it: the reference claims the
#: sub-graph's task on the sub-graph's own id (WorkflowMultiGraphMultiRoleTest).
SUB_GRAPH_REVIEW = """
id: review
layout:
  - {id: s, type: start}
  - {id: check, meta: {actor: reviewer}}
  - {id: e, type: end}
"""

CALLS_SUB_GRAPH = """
id: main
layout:
  - {id: start, type: start}
  - {id: apply, meta: {actor: applicant}}
  - {id: call, task: "#review"}
  - {id: done, meta: {actor: applicant}}
  - {id: end, type: end}
"""

SWITCH_B = """
id: switch-b
layout:
  - {id: s, type: start, link: t}
  - {id: t, meta: {role: hr}, link: u}
  - {id: u, meta: {role: boss}, link: e}
  - {id: e, type: end}
"""

PARALLEL = """
id: par
layout:
  - {id: start, type: start, link: draft}
  - {id: draft, meta: {actor: alice}, link: split}
  - {id: split, type: parallel, link: [legal, finance]}
  - {id: legal, meta: {role: legal}, link: sign}
  - {id: sign, meta: {actor: bob}, link: join}
  - {id: finance, meta: {role: boss}, link: join}
  - {id: join, type: parallel, link: publish}
  - {id: publish, meta: {actor: alice}, link: end}
  - {id: end, type: end}
"""

#: A root graph whose route is decided inside a sub-graph it calls between two human tasks:
#: ``grade`` sets ``lvl`` by ``amount``, ``graded`` routes on ``lvl`` (send-back must clear
#: the sub-graph's states too, or its gateway never decides again).
GRADE = """
id: grade
layout:
  - {id: gs, type: start, link: ggw}
  - id: ggw
    type: exclusive
    link:
      - {nextId: gbig, when: "amount >= 100"}
      - {nextId: gsmall}
  - {id: gbig, task: 'lvl = "big"', link: ge}
  - {id: gsmall, task: 'lvl = "small"', link: ge}
  - {id: ge, type: end}
"""
GRADED = """
id: graded
layout:
  - {id: s, type: start, link: apply}
  - {id: apply, meta: {actor: al}, link: call}
  - {id: call, task: "#grade", link: route}
  - id: route
    type: exclusive
    link:
      - {nextId: director, when: 'lvl == "big"'}
      - {nextId: manager}
  - {id: director, meta: {actor: dir}, link: e}
  - {id: manager, meta: {actor: mgr}, link: e}
  - {id: e, type: end}
"""
#: ``graded`` with a sub-graph that splits and joins branches on the way instead.
CHECKS = """
id: checks
layout:
  - {id: cs, type: start, link: split}
  - {id: split, type: parallel, link: [c1, c2]}
  - {id: c1, task: "n1 = 1", link: join}
  - {id: c2, task: "n2 = 1", link: join}
  - {id: join, type: parallel, link: ce}
  - {id: ce, type: end}
"""
CHECKED = """
id: checked
layout:
  - {id: s, type: start, link: apply}
  - {id: apply, meta: {actor: al}, link: call}
  - {id: call, task: "#checks", link: mgr}
  - {id: mgr, meta: {actor: mgr}, link: e}
  - {id: e, type: end}
"""


def sent_back_twice_routes(ex: WorkflowExecutor, instance_id: str) -> list[list[str]]:
    """The open tasks after each application of 500, 5 and 500 again on ``graded``, sent
    back by the director, then the manager, in between."""

    def apply(amount: int) -> list[str]:
        c = FlowContext.of(instance_id, {"actor": "al", "amount": amount})
        assert ex.submit_task_if_waiting(ex.claim_task("graded", c), TaskAction.FORWARD, c)
        return [t.node_id for t in ex.open_tasks(instance_id)]

    def send_back(actor: str, amount: int) -> None:
        c = FlowContext.of(instance_id, {"actor": actor, "amount": amount})
        assert ex.send_back(ex.claim_task("graded", c), c)

    routes = [apply(500)]
    send_back("dir", 500)
    routes.append(apply(5))
    send_back("mgr", 5)
    routes.append(apply(500))
    return routes


INCLUSIVE = """
id: incl
layout:
  - {id: start, type: start, link: ask}
  - {id: ask, meta: {actor: alice}, link: fork}
  - id: fork
    type: inclusive
    link:
      - {nextId: hr, when: "amount > 10"}
      - {nextId: it, when: "amount > 100"}
      - {nextId: boss}
  - {id: hr, meta: {role: hr}, link: merge}
  - {id: it, meta: {actor: bob}, link: merge}
  - {id: boss, meta: {role: boss}, link: merge}
  - {id: merge, type: inclusive, link: done}
  - {id: done, meta: {actor: alice}, link: end}
  - {id: end, type: end}
"""

GRAPHS = {"excl": EXCLUSIVE, "par": PARALLEL, "incl": INCLUSIVE}
ACTORS = ("alice", "bob", "carol", None)
ROLES = ("boss", "legal", "hr", "clerk", None)
AMOUNTS = (1, 7, 50, 500, 9000)
SUBMIT_ACTIONS = (
    TaskAction.FORWARD,
    TaskAction.FORWARD,
    TaskAction.FORWARD,
    TaskAction.BACK,
    TaskAction.BACK_JUMP,
    TaskAction.FORWARD_JUMP,
    TaskAction.TERMINATE,
    TaskAction.RESTART,
)


def controller() -> ActorStateController:
    return ActorStateController("actor", "role")


def flow_engine() -> FlowEngine:
    engine = FlowEngine()
    for text in GRAPHS.values():
        engine.load(Graph.from_text(textwrap.dedent(text)))
    return engine


def identities() -> list[dict[str, str]]:
    """Every identity the walks use, as context data."""
    found = [{"actor": a} for a in ACTORS if a] + [{"role": r} for r in ROLES if r]
    return found


@dataclass
class Instance:
    instance_id: str
    graph_id: str
    amount: int


@dataclass
class Walker:
    """Runs random operations on a few instances through ``executor``; ``context`` builds
    the context of one operation (the SQL tests add nothing, a caller transaction could)."""

    executor: WorkflowExecutor
    rng: random.Random
    instances: list[Instance]
    context: Callable[[str, dict[str, Any]], FlowContext] = field(
        default=lambda instance_id, data: FlowContext.of(instance_id, data)
    )
    log: list[str] = field(default_factory=list)

    def ctx(self, inst: Instance) -> FlowContext:
        data: dict[str, Any] = {"amount": inst.amount}
        actor, role = self.rng.choice(ACTORS), self.rng.choice(ROLES)
        if actor:
            data["actor"] = actor
        if role:
            data["role"] = role
        return self.context(inst.instance_id, data)

    def step(self) -> None:
        """One random operation; checks what the operation itself promises."""
        ex = self.executor
        inst = self.rng.choice(self.instances)
        c = self.ctx(inst)
        kind = self.rng.choice(
            ["claim", "claim", "claim", "submit", "submit", "submit", "at", "find", "next",
             "withdraw", "send_back", "send_back"]
        )  # fmt: skip
        self.log.append(f"{kind} {inst.instance_id} {dict(c.data)}")
        before = {t.node_id: t for t in ex.open_tasks(inst.instance_id)}
        status = ex.status(inst.instance_id)
        if kind == "claim":
            task = ex.claim_task(inst.graph_id, c)
            if status == InstanceStatus.WITHDRAWN:
                assert task is None
        elif kind == "find":
            ex.find_task(inst.graph_id, c)
        elif kind == "next":
            ex.find_next_tasks(inst.graph_id, c)
        elif kind == "submit":
            self._submit_claimed(inst, c, before)
        elif kind == "at":
            self._submit_at(inst, c, status)
        elif kind == "withdraw":
            done = ex.withdraw(inst.graph_id, c, message="changed my mind")
            assert done == (status == InstanceStatus.RUNNING), (done, status)
            if done:
                assert ex.status(inst.instance_id) == InstanceStatus.WITHDRAWN
                assert ex.open_tasks(inst.instance_id) == []
        else:
            self._send_back(inst, c, before)

    def _submit_claimed(
        self, inst: Instance, c: FlowContext, before: Mapping[str, OpenTask]
    ) -> None:
        ex = self.executor
        task = ex.claim_task(inst.graph_id, c)
        action = self.rng.choice(SUBMIT_ACTIONS)
        if task is None or action in (TaskAction.FORWARD_JUMP, TaskAction.BACK_JUMP):
            action = TaskAction.FORWARD
        opened = {t.node_id: t for t in ex.open_tasks(inst.instance_id)}
        done = ex.submit_task_if_waiting(task, action, c, message="ok")
        if not done or task is None or action != TaskAction.FORWARD:
            return
        source = opened.get(task.node_id)
        if source is None:
            return
        after = ex.open_tasks(inst.instance_id)
        for new in after:
            if new.node_id not in opened:
                assert new.lineage == (*source.lineage, source.node_id)[-32:], (new, source)

    def _submit_at(self, inst: Instance, c: FlowContext, status: InstanceStatus | None) -> None:
        ex = self.executor
        graph = ex.engine.get_graph_or_throw(inst.graph_id)
        # Gateways too: a jump onto one leaves it WAITING (the reference's find returns it).
        node = self.rng.choice(
            [n for n in graph.nodes.values() if n.type.name == "ACTIVITY" or n.type.is_gateway]
        )
        action = self.rng.choice(SUBMIT_ACTIONS)
        try:
            ex.submit_task_at(graph, node, action, c)
        except InstanceClosedError:
            assert status == InstanceStatus.WITHDRAWN and action != TaskAction.RESTART
            return
        assert status != InstanceStatus.WITHDRAWN or action == TaskAction.RESTART

    def _send_back(self, inst: Instance, c: FlowContext, before: Mapping[str, OpenTask]) -> None:
        ex = self.executor
        if not before:
            assert ex.send_back(_fake_task(ex, inst), c) is False
            return
        task = self.rng.choice(list(before.values()))
        states = self.states(inst.instance_id)
        try:
            done = ex.send_back(task, c, message="back")
        except SendBackError:
            assert self.states(inst.instance_id) == states
            assert {t.node_id: t for t in ex.open_tasks(inst.instance_id)} == before
            return
        if not done:
            assert self.states(inst.instance_id) == states
            return
        after = {t.node_id: t for t in ex.open_tasks(inst.instance_id)}
        previous = task.lineage[-1]
        assert task.node_id not in after or task.node_id == previous
        assert after[previous].state == TaskState.WAITING
        assert after[previous].lineage == task.lineage[:-1]

    def states(self, instance_id: str) -> dict[str, TaskState]:
        repo = self.executor.state_repository
        return dict(repo.states(instance_id))  # type: ignore[attr-defined]


def _fake_task(ex: WorkflowExecutor, inst: Instance) -> Task:
    graph = ex.engine.get_graph_or_throw(inst.graph_id)
    node = next(n for n in graph.nodes.values() if n.type.name == "ACTIVITY")
    return Task(root_graph=graph, node=node, state=TaskState.WAITING, context=FlowContext.of())


# -- the invariants --------------------------------------------------------------------------
def expected_aggregate(
    ex: WorkflowExecutor, inst: Instance, states: Mapping[str, TaskState], *, known: bool
) -> tuple[dict[str, tuple[TaskState, tuple[str, ...]]], InstanceStatus | None]:
    """Open tasks {node: (state, candidates)} and status computed from ``states`` alone: a
    real FIND_NEXT walk (task code runs, states written) on a private in-memory copy, with
    every human node operatable — independent of the index code under test. ``known``: the
    instance was ever written (a RESTART leaves no state but a RUNNING instance)."""
    if not states and not known:
        return {}, None
    graph = ex.engine.get_graph_or_throw(inst.graph_id)
    copy = InMemoryStateRepository()
    probe = FlowContext.of(inst.instance_id, {"amount": inst.amount})
    for key, state in states.items():
        node_id = key.split(":", 1)[1]
        copy.state_put(probe, graph.get_node_or_throw(node_id), state)
    inner = controller()

    class Everyone:
        def is_operatable(self, ctx: FlowContext, node: Any) -> bool:
            return True

        def is_auto_forward(self, ctx: FlowContext, node: Any) -> bool:
            return inner.is_auto_forward(ctx, node)

    oracle = WorkflowExecutor(ex.engine, Everyone(), _NoIndex(copy))
    tasks = oracle.find_next_tasks(graph, probe)
    found: dict[str, tuple[TaskState, tuple[str, ...]]] = {}
    for task in tasks:
        if task.node.graph is graph and task.node_id not in found:
            stored = states.get(f"{graph.id}:{task.node_id}", TaskState.UNKNOWN)
            state = TaskState.WAITING if stored == TaskState.WAITING else TaskState.UNKNOWN
            found[task.node_id] = (state, inner.candidates(task.node))
    if found:
        return found, InstanceStatus.RUNNING
    ended = any(r.graph_id == graph.id and r.is_end for r in probe.trace.last_records())
    if ended:
        return found, InstanceStatus.COMPLETED
    if TaskState.TERMINATED in states.values():
        return found, InstanceStatus.TERMINATED
    return found, InstanceStatus.RUNNING


class _NoIndex:
    """A repository with the protocol only (no unit of work, no index) over ``inner``."""

    def __init__(self, inner: InMemoryStateRepository) -> None:
        self._inner = inner

    def vars_get(self, ctx: FlowContext, node: Any) -> Any:
        return None

    def state_get(self, ctx: FlowContext, node: Any) -> TaskState:
        return self._inner.state_get(ctx, node)

    def state_put(self, ctx: FlowContext, node: Any, state: TaskState) -> None:
        self._inner.state_put(ctx, node, state)

    def state_remove(self, ctx: FlowContext, node: Any) -> None:
        self._inner.state_remove(ctx, node)

    def state_clear(self, ctx: FlowContext) -> None:
        self._inner.state_clear(ctx)


def check_invariants(walker: Walker) -> None:
    """aggregate.md §6, 1 and 2, for every instance of the walk."""
    ex = walker.executor
    running: dict[tuple[str, str], OpenTask] = {}
    for inst in walker.instances:
        states = walker.states(inst.instance_id)
        stored_status = ex.status(inst.instance_id)
        stored = {t.node_id: (t.state, t.candidates) for t in ex.open_tasks(inst.instance_id)}
        if stored_status == InstanceStatus.WITHDRAWN:
            assert stored == {}, (inst, stored)
        else:
            known = stored_status is not None
            tasks, status = expected_aggregate(ex, inst, states, known=known)
            assert (stored, stored_status) == (tasks, status), (inst, states, walker.log[-3:])
        if stored_status == InstanceStatus.RUNNING:
            for task in ex.open_tasks(inst.instance_id):
                running[(inst.instance_id, task.node_id)] = task
    listed: dict[tuple[str, str], OpenTask] = {}
    for data in identities():
        page = _whole_inbox(ex, FlowContext.of(None, data))
        keys = [(t.instance_id, t.node_id) for t in page]
        assert len(keys) == len(set(keys)), f"an inbox lists a task twice: {keys}"
        for task in page:
            assert ex.status(task.instance_id) == InstanceStatus.RUNNING
            listed[(task.instance_id, task.node_id)] = task
    assert set(listed) == {k for k, t in running.items() if t.candidates}


def _whole_inbox(ex: WorkflowExecutor, ctx: FlowContext) -> list[OpenTask]:
    """Every page of an inbox, three tasks a page (so paging is exercised)."""
    found: list[OpenTask] = []
    after = None
    while True:
        page = ex.inbox(ctx, limit=3, after=after)
        found.extend(page)
        if len(page) < 3:
            return found
        after = page[-1].cursor
        assert [t.cursor for t in page] == sorted(t.cursor for t in page)


def new_walker(executor: WorkflowExecutor, seed: int, *, instances: int = 6) -> Walker:
    rng = random.Random(seed)
    graph_ids = list(GRAPHS)
    chosen = [
        Instance(f"w{seed}-{n}", graph_ids[n % len(graph_ids)], rng.choice(AMOUNTS))
        for n in range(instances)
    ]
    return Walker(executor=executor, rng=rng, instances=chosen)


__all__ = [
    "GRAPHS",
    "Instance",
    "Walker",
    "check_invariants",
    "controller",
    "expected_aggregate",
    "flow_engine",
    "identities",
    "new_walker",
]
