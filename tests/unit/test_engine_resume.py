"""The resume walk (from the start to the node the trace last recorded, running nothing) is
bounded: one that cannot arrive raises a typed error naming graph, node and instance instead of
walking forever — and one that can, through a long loop, still arrives."""

from __future__ import annotations

import pytest

from flow import FlowContext, FlowEngine, Graph
from flow.errors import ResumeError
from flow.workflow import WorkflowExecutor

COUNTER_LOOP = """
id: sub
layout:
  - {id: s, type: start, link: a}
  - {id: a, task: "n = n + 1", link: b}
  - {id: b, type: exclusive, link: [{nextId: a, when: "n < 3"}, {nextId: e}]}
  - {id: e, type: end}
"""
CALLS_IT_TWICE = """
id: main
layout:
  - {id: s, type: start}
  - {id: p1, task: "n = 0"}
  - {id: c1, task: "#sub"}
  - {id: p2, task: "n = 0"}
  - {id: c2, task: "#sub"}
  - {id: e, type: end}
"""


def _engine(*texts: str) -> FlowEngine:
    engine = FlowEngine()
    for text in texts:
        engine.load(Graph.from_text(text, strict=True))
    return engine


def test_a_sub_graph_whose_loop_only_a_task_leaves_called_twice_is_a_resume_error() -> None:
    """The second call resumes the sub-graph at its END with the counter reset: the walk,
    running no task, went round a -> b -> a forever (steps= does not count it)."""
    engine = _engine(COUNTER_LOOP, CALLS_IT_TWICE)
    with pytest.raises(ResumeError) as raised:
        engine.eval("main", FlowContext.of("i-1"), steps=1000)
    error = raised.value
    assert (error.graph_id, error.node_id, error.instance_id) == ("sub", "e", "i-1")
    assert error.passed > 100_000 and f"passed {error.passed} nodes" in str(error)
    assert "'sub'" in str(error) and "'e'" in str(error) and "'i-1'" in str(error)


def test_a_snapshot_naming_a_node_the_walk_cannot_reach_is_a_resume_error() -> None:
    ghost = "  - {id: e, type: end}\n  - {id: ghost, link: e}"
    graph = Graph.from_text(COUNTER_LOOP.replace("  - {id: e, type: end}", ghost))
    engine = FlowEngine()
    engine.load(graph)
    snapshot = (
        '{"vars":{"n":0},"trace":{"rootGraphId":"sub",'
        '"last":{"sub":{"id":"ghost","type":"ACTIVITY"}}}}'
    )
    with pytest.raises(ResumeError, match="'ghost'"):
        engine.eval(graph, FlowContext.from_json(snapshot), steps=10)


def test_a_workflow_walk_resuming_in_a_cycle_ends() -> None:
    """Held the instance lock forever: sub-graph copies resume, and their resume walk
    counted against no bound (the flag the second call's cycle waits for is set after the
    first call, by an automatic node)."""
    engine = _engine(
        """
id: sub
layout:
  - {id: s, type: start, link: x}
  - {id: x, type: exclusive, link: [{nextId: y, when: "flag"}, {nextId: e}]}
  - {id: y, type: exclusive, link: x}
  - {id: e, type: end}
""",
        """
id: main
layout:
  - {id: s, type: start}
  - {id: c1, type: exclusive, task: "#sub"}
  - {id: p2, type: exclusive, task: "flag = True"}
  - {id: c2, type: exclusive, task: "#sub"}
  - {id: h, title: human}
  - {id: e, type: end}
""",
    )
    ex = WorkflowExecutor(engine, max_steps=1000)
    with pytest.raises(ResumeError) as raised:
        ex.claim_task("main", FlowContext.of("i-1", {"flag": False}))
    assert (raised.value.graph_id, raised.value.instance_id) == ("sub", "i-1")


def test_resuming_deep_in_a_long_loop_still_arrives() -> None:
    """Each loop item taken on the way earns the resume walk more room: stepping through a
    loop of 60,000 items resumes past 110,000 nodes (the floor alone is about 100,000)."""
    graph = Graph.from_text(
        """
id: lp
layout:
  - {id: s, type: start, link: for}
  - {id: for, type: loop, meta: {$for: item, $in: "0...60000"}, link: body}
  - {id: body, task: "seen = item", link: next}
  - {id: next, type: loop, link: e}
  - {id: e, type: end}
""",
        strict=True,
    )
    engine = FlowEngine()
    ctx = engine.eval(graph, FlowContext.of("i-1"), steps=110_000)
    assert ctx.is_stopped and 50_000 < ctx.get("seen") < 60_000
    engine.eval(graph, ctx)  # resumes: replays ~110,000 nodes, then runs the rest
    assert ctx.get("seen") == 59_999 and ctx.trace.is_end("lp")
