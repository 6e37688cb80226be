"""Where the task index takes an instance's open tasks from.

A claim or a FORWARD on a graph whose walks follow one path takes the open task from where
its own walk stopped; any graph that can leave more than one branch open is walked again
(dry) to find them all. The index must list the same tasks either way (the random walks of
``test_aggregate_invariants`` check it on exclusive, parallel and inclusive graphs).
"""

from __future__ import annotations

import textwrap

import pytest
from aggregate_walk import EXCLUSIVE, controller

import flow.workflow._frontier as frontier_module
from flow import FlowContext, FlowEngine, Graph
from flow.workflow import InMemoryStateRepository, InstanceStatus, TaskAction, WorkflowExecutor

#: ``x`` (automatic: no actor) flows out on both of its links — two tasks open at once,
#: behind a gateway whose find walk stops at the first of them.
SPLIT_BY_LINKS = """
id: split
layout:
  - {id: s, type: start, link: a}
  - {id: a, meta: {actor: alice}, link: gw}
  - {id: gw, type: exclusive, link: x}
  - {id: x, link: [b, c]}
  - {id: b, meta: {actor: boss}, link: e}
  - {id: c, meta: {actor: carol}, link: e}
  - {id: e, type: end}
"""


def _executor(*texts: str) -> WorkflowExecutor:
    engine = FlowEngine()
    for text in texts:
        engine.load(Graph.from_text(textwrap.dedent(text)))
    return WorkflowExecutor(engine, controller(), InMemoryStateRepository())


def _approve(ex: WorkflowExecutor, graph_id: str, instance_id: str, **who: str) -> None:
    c = FlowContext.of(instance_id, {**who, "amount": 100})
    assert ex.submit_task_if_waiting(ex.claim_task(graph_id, c), TaskAction.FORWARD, c)


def _open(ex: WorkflowExecutor, instance_id: str) -> list[str]:
    return [t.node_id for t in ex.open_tasks(instance_id)]


def test_claims_and_forwards_on_a_one_path_graph_index_without_walking_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_dry_walk(*args: object, **kwargs: object) -> None:
        raise AssertionError("the operation's own walk showed the open task")

    monkeypatch.setattr(frontier_module, "frontier", no_dry_walk)
    ex = _executor(EXCLUSIVE)
    claimed = ex.claim_task("excl", FlowContext.of("i1", {"actor": "alice", "amount": 100}))
    assert claimed is not None and _open(ex, "i1") == ["apply"]
    _approve(ex, "excl", "i1", actor="alice")
    assert _open(ex, "i1") == ["manager"]
    assert [t.lineage for t in ex.open_tasks("i1")] == [("apply",)]
    _approve(ex, "excl", "i1", role="boss")
    assert _open(ex, "i1") == ["archive"]
    _approve(ex, "excl", "i1", role="clerk")
    assert _open(ex, "i1") == []
    assert ex.status("i1") == InstanceStatus.COMPLETED


def test_a_forward_that_opens_two_branches_without_a_split_gateway_indexes_both() -> None:
    ex = _executor(SPLIT_BY_LINKS)
    _approve(ex, "split", "i1", actor="alice")
    assert sorted(_open(ex, "i1")) == ["b", "c"]
    _approve(ex, "split", "i1", actor="boss")
    assert _open(ex, "i1") == ["c"]
    inbox = ex.inbox(FlowContext.of(None, {"actor": "carol"}))
    assert [(t.instance_id, t.node_id) for t in inbox] == [("i1", "c")]
