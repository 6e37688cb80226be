"""Failures: TaskError / ConditionError wrap with the cause chained; FlowErrors pass through."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flow import (
    ComponentNotFoundError,
    ConditionError,
    ExpressionError,
    FlowContext,
    FlowEngine,
    FlowError,
    FlowInterceptor,
    Graph,
    GraphDefinitionError,
    GraphSpec,
    MapContainer,
    Node,
    NodeNotFoundError,
    SimpleFlowDriver,
    TaskError,
)


def _one_task(task: object, *, when: object = None) -> GraphSpec:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("n1")
    spec.add_activity("n1", task=task, when=when).link_add("e")
    spec.add_end("e")
    return spec


def _boom(ctx: FlowContext, node: Node) -> None:
    raise ValueError("boom")


def test_exception_in_a_task_becomes_task_error_with_the_cause_chained() -> None:
    with pytest.raises(TaskError) as info:
        FlowEngine().eval(_one_task(_boom).create())
    assert (info.value.graph_id, info.value.node_id) == ("g", "n1")
    assert str(info.value) == "The task handle failed: g / n1"
    assert isinstance(info.value.__cause__, ValueError)


def test_task_and_condition_errors_name_the_instance_they_were_raised_in() -> None:
    """A one-line report must say which instance to look at (the workflow's claim, find and
    withdraw raised them without it)."""
    with pytest.raises(TaskError) as task_info:
        FlowEngine().eval(_one_task(_boom).create(), FlowContext.of("exp-7"))
    assert task_info.value.instance_id == "exp-7"
    assert str(task_info.value) == "The task handle failed: g / n1 (instance 'exp-7')"
    error = _condition_failure(
        "id: g\nlayout:\n- {id: s, type: start, link: a}\n"
        "- {id: a, when: amount >= 1000, task: 'x = 1', link: e}\n- {id: e, type: end}"
    )
    assert error.instance_id == "i"
    assert "instance 'i'" in str(error)


def test_exception_in_a_link_condition_becomes_condition_error() -> None:
    def bad(ctx: FlowContext) -> bool:
        raise KeyError("missing")

    spec = GraphSpec("g")
    spec.add_start("s").link_add("a", when=bad)
    spec.add_activity("a")
    with pytest.raises(ConditionError) as info:
        FlowEngine().eval(spec.create())
    assert info.value.graph_id == "g"
    assert isinstance(info.value.__cause__, KeyError)


def test_exception_in_a_node_when_becomes_condition_error() -> None:
    def bad(ctx: FlowContext) -> bool:
        raise RuntimeError("x")

    with pytest.raises(ConditionError):
        FlowEngine().eval(_one_task(None, when=bad).create())


def test_expression_condition_failure_names_the_expression() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("a", when="1 / zero > 0")
    spec.add_activity("a")
    with pytest.raises(ConditionError, match="g / 1 / zero > 0"):
        FlowEngine().eval(spec.create(), FlowContext.of().put("zero", 0))


def test_flow_errors_raised_by_a_task_pass_through_unchanged() -> None:
    error = FlowError("business rule")

    def raise_flow_error(ctx: FlowContext, node: Node) -> None:
        raise error

    with pytest.raises(FlowError) as info:
        FlowEngine().eval(_one_task(raise_flow_error).create())
    assert info.value is error


def test_unparsable_expression_raises_expression_error_not_condition_error() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("a", when="a >")
    spec.add_activity("a")
    with pytest.raises(ExpressionError):
        FlowEngine().eval(spec.create())


def test_missing_task_component_raises_component_not_found() -> None:
    with pytest.raises(ComponentNotFoundError, match="'nope'"):
        FlowEngine().eval(_one_task("@nope").create())


def test_component_of_the_wrong_kind_raises_component_not_found() -> None:
    container = MapContainer({"thing": object()})
    engine = FlowEngine(SimpleFlowDriver(container=container))
    with pytest.raises(ComponentNotFoundError, match="not a task component"):
        engine.eval(_one_task("@thing").create())


def test_missing_condition_component_raises_component_not_found() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("a", when="@nope")
    spec.add_activity("a")
    with pytest.raises(ComponentNotFoundError, match="condition component 'nope'"):
        FlowEngine().eval(spec.create())


def test_missing_meta_script_path_raises_graph_definition_error_naming_it() -> None:
    with pytest.raises(GraphDefinitionError, match=r"'scripts\.approve'"):
        FlowEngine().eval(_one_task("$scripts.approve").create())


def test_snapshot_pointing_at_an_unknown_node_raises_node_not_found() -> None:
    graph = _one_task(None).create()
    doc = {
        "data": {},
        "trace": {"rootGraphId": "g", "lastRecords": {"g": {"graphId": "g", "id": "gone"}}},
    }
    with pytest.raises(NodeNotFoundError, match="gone"):
        FlowEngine().eval(graph, FlowContext.from_json(json.dumps(doc)))


# -- a failing condition says where it is and why (one log line is enough) ------------------
_COMPARE = "TypeError: '>=' not supported between instances of 'str' and 'int'"


def _condition_failure(text: str) -> ConditionError:
    with pytest.raises(ConditionError) as info:
        FlowEngine().eval(Graph.from_text(text), FlowContext.of("i", {"amount": "abc"}))
    assert isinstance(info.value.__cause__, TypeError)
    return info.value


def test_failing_exclusive_link_condition_names_the_link_and_the_cause() -> None:
    error = _condition_failure(
        "id: g\nlayout:\n- {id: s, type: start, link: gw}\n"
        "- {id: gw, type: exclusive, link: [{nextId: big, when: amount >= 1000}, e]}\n"
        "- {id: big, link: e}\n- {id: e, type: end}"
    )
    assert (error.node_id, error.link_to) == ("gw", "big")
    assert str(error) == (
        "The condition handle failed: g / amount >= 1000 "
        f"(at link gw -> big, instance 'i', {_COMPARE})"
    )


@pytest.mark.parametrize("node_type", ["start", "activity", "inclusive"])
def test_failing_link_condition_of_every_node_type_names_the_link_and_the_cause(
    node_type: str,
) -> None:
    first = "" if node_type == "start" else "- {id: s, type: start, link: n}\n"
    error = _condition_failure(
        f"id: g\nlayout:\n{first}"
        f"- {{id: n, type: {node_type}, link: [{{nextId: e, when: amount >= 1000}}]}}\n"
        "- {id: e, type: end}"
    )
    assert (error.node_id, error.link_to) == ("n", "e")
    assert f"(at link n -> e, instance 'i', {_COMPARE})" in str(error)


def test_failing_node_when_names_the_node_and_the_cause() -> None:
    error = _condition_failure(
        "id: g\nlayout:\n- {id: s, type: start, link: a}\n"
        "- {id: a, when: amount >= 1000, task: 'x = 1', link: e}\n- {id: e, type: end}"
    )
    assert (error.node_id, error.link_to) == ("a", None)
    assert str(error) == (
        f"The condition handle failed: g / amount >= 1000 (at node 'a', instance 'i', {_COMPARE})"
    )


@pytest.mark.parametrize("task", ["#", "@", " # "])
def test_a_task_naming_no_sub_graph_or_component_is_refused_by_validate_and_at_run_time(
    task: str,
) -> None:
    from flow.errors import GraphDefinitionError

    text = f"""
    id: empty-ref
    layout:
      - {{id: s, type: start, link: a}}
      - {{id: a, task: "{task}", link: e}}
      - {{id: e, type: end}}
    """
    graph = Graph.from_text(text)
    assert [p.node_id for p in graph.validate() if p.severity == "error"] == ["a"]
    with pytest.raises(GraphDefinitionError):
        Graph.from_text(text, strict=True)
    engine = FlowEngine()
    engine.load(graph)
    with pytest.raises(GraphDefinitionError, match="Node 'a' of graph 'empty-ref'"):
        engine.eval("empty-ref", FlowContext.of("i-1"))


def test_an_interceptor_re_entering_the_evaluation_it_is_in_gets_a_flow_error() -> None:
    """Nothing bounded it (max_depth counts sub-graph calls): a bare RecursionError."""

    graph = Graph.from_text(
        "id: G\nlayout:\n  - {id: s, type: start}\n  - {id: a, task: 'x = 1'}\n"
        "  - {id: e, type: end}\n"
    )
    engine = FlowEngine()
    engine.load(graph)

    class Audit(FlowInterceptor):
        def on_node_start(self, ctx: FlowContext, node: Node) -> None:
            if node.id == "a":
                engine.eval("G", ctx)

    audit = Audit()
    engine.add_interceptor(audit)
    with pytest.raises(FlowError, match=r"Evaluations of graph 'G' nest deeper.*'inst-1'") as e:
        engine.eval("G", FlowContext.of("inst-1"))
    assert isinstance(e.value.__cause__, RecursionError)
    engine.remove_interceptor(audit)
    assert engine.eval("G", FlowContext.of("inst-2")).get("x") == 1


def test_evaluations_nested_seventy_deep_still_run() -> None:
    """No cap of the library's own below Python's: a task re-entering eval 70 times ran
    before the overflow check, and still does."""
    graph = Graph.from_text(
        "id: h\nlayout:\n  - {id: s, type: start}\n  - {id: a, task: '@again'}\n"
        "  - {id: e, type: end}\n"
    )
    container = MapContainer()
    engine = FlowEngine(SimpleFlowDriver(container=container))
    engine.load(graph)

    def again(ctx: FlowContext, node: Node) -> None:
        depth = ctx.get("depth", 0)
        if depth < 70:
            engine.eval("h", FlowContext.of("inner", {"depth": depth + 1, "seen": ctx.get("seen")}))
        ctx.get("seen").append(depth)

    container.put_component("again", again)
    seen: list[int] = []
    engine.eval("h", FlowContext.of("outer", {"seen": seen}))
    assert len(seen) == 71


@pytest.mark.parametrize(
    ("call", "named"),
    [
        ({"graph": None}, "graph must be a Graph or a graph id"),
        ({"graph": 5}, "graph must be a Graph or a graph id"),
        ({"ctx": {"x": 1}}, "ctx must be a FlowContext"),
        ({"steps": None}, "steps must be an integer"),
        ({"steps": "5"}, "steps must be an integer"),
        ({"steps": True}, "steps must be an integer"),
    ],
    ids=repr,
)
def test_eval_arguments_of_the_wrong_type_are_named(call: dict[str, object], named: str) -> None:
    """They failed with an AttributeError (or a comparison's TypeError) from inside the walk."""
    engine = FlowEngine()
    graph = Graph.from_text("id: G\nlayout: [{id: s, type: start}, {id: e, type: end}]")
    engine.load(graph)
    arguments: dict[str, Any] = {"graph": graph, "ctx": None, "steps": -1, **call}
    with pytest.raises(TypeError, match=named):
        engine.eval(arguments.pop("graph"), arguments.pop("ctx"), **arguments)


def test_steps_may_be_any_integer_type() -> None:
    """numpy's integers are not ``int`` subclasses: anything ``operator.index`` takes is an
    integer."""

    class NumpyLikeInt:
        def __index__(self) -> int:
            return 1

    graph = Graph.from_text("id: G\nlayout: [{id: s, type: start}, {id: a}, {id: e, type: end}]")
    ctx = FlowEngine().eval(graph, FlowContext.of("i"), steps=NumpyLikeInt())  # type: ignore[arg-type]
    assert ctx.is_stopped
