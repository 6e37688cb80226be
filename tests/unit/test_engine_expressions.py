"""Graphs written with expression conditions and script tasks (SafeEvaluation, the default)."""

from __future__ import annotations

import pytest

from flow import FlowContext, FlowEngine, Graph

_OA = """
id: oa
title: Expense approval
layout:
  - {id: start, type: start}
  - {id: apply, title: Apply, task: 'applied = true'}
  - id: check
    type: exclusive
    link:
      - {nextId: director, when: 'amount >= 100000'}
      - {nextId: manager}
  - {id: manager, task: 'approver = "manager"', link: end}
  - {id: director, task: 'approver = "director"', link: end}
  - {id: end, type: end}
"""


@pytest.mark.parametrize(("amount", "approver"), [(500, "manager"), (150000, "director")])
def test_exclusive_gateway_routes_on_an_expression(amount: int, approver: str) -> None:
    ctx = FlowEngine().eval(Graph.from_text(_OA), FlowContext.of("e-1").put("amount", amount))
    assert ctx.get("approver") == approver
    assert ctx.get("applied") is True
    assert ctx.last_node_id == "end"


def test_missing_variable_makes_a_condition_false_and_the_default_link_wins() -> None:
    ctx = FlowEngine().eval(Graph.from_text(_OA))
    assert ctx.get("approver") == "manager"


_CONDITIONAL = """
id: conditional
layout:
  - {id: s, type: start}
  - id: gw
    type: exclusive
    link:
      - {nextId: a, when: 'choice.equals("A")'}
      - {nextId: b, when: 'choice == "B" && enabled'}
      - {nextId: d}
  - {id: a, task: 'result = "A"', link: e}
  - {id: b, task: 'result = "B"', link: e}
  - {id: d, task: 'result = "default"', link: e}
  - {id: e, type: end}
"""


@pytest.mark.parametrize(
    ("data", "result"),
    [
        ({"choice": "A"}, "A"),
        ({"choice": "B", "enabled": True}, "B"),
        ({"choice": "B", "enabled": False}, "default"),
        ({"choice": "C"}, "default"),
    ],
)
def test_reference_style_conditions_pick_the_branch(data: dict[str, object], result: str) -> None:
    ctx = FlowEngine().eval(Graph.from_text(_CONDITIONAL), FlowContext.of(data=data))
    assert ctx.get("result") == result


def test_inclusive_gateway_with_expression_conditions_joins_taken_branches() -> None:
    graph = Graph.from_text(
        """
id: inc
layout:
  - {id: s, type: start}
  - id: split
    type: inclusive
    link:
      - {nextId: a, when: 'conditionA'}
      - {nextId: b, when: 'conditionB'}
      - {nextId: c, when: 'conditionC'}
  - {id: a, task: 'trace = trace + ["a"]', link: join}
  - {id: b, task: 'trace = trace + ["b"]', link: join}
  - {id: c, task: 'trace = trace + ["c"]', link: join}
  - {id: join, type: inclusive, task: 'trace = trace + ["final"]'}
"""
    )
    ctx = FlowContext.of(data={"conditionA": True, "conditionB": True, "conditionC": False})
    ctx.put("trace", [])
    FlowEngine().eval(graph, ctx)
    assert ctx.get("trace") == ["a", "b", "final"]


def test_script_can_call_context_methods() -> None:
    graph = Graph.from_text(
        "id: g\nlayout:\n  - {type: loop, meta: {'$for': itemId, '$in': [a, b, c]}}\n"
        "  - task: 'context.put(\"temp\", itemId)'\n"
    )
    assert FlowEngine().eval(graph).get("temp") == "c"


def test_context_snapshot_resume_with_expression_graph() -> None:
    graph = Graph.from_text(
        """
id: approve
layout:
  - {id: s, type: start}
  - {id: review, task: 'context.stop()', when: '!approved'}
  - {id: done, task: 'finished = true'}
"""
    )
    engine = FlowEngine()
    ctx = engine.eval(graph, FlowContext.of("i", {"approved": False}))
    assert ctx.is_stopped and ctx.last_node_id == "review"
    restored = FlowContext.from_json(ctx.to_json()).put("approved", True)
    engine.eval(graph, restored)
    assert restored.get("finished") is True
