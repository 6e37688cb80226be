"""SimpleFlowDriver: task and condition forms, components, meta scripts, the ``node`` variable."""

from __future__ import annotations

from flow import (
    FlowContext,
    FlowEngine,
    GraphSpec,
    MapContainer,
    Node,
    SafeEvaluation,
    SimpleFlowDriver,
)


class _Task:
    def run(self, ctx: FlowContext, node: Node) -> None:
        ctx.put("ran", node.id)


class _Condition:
    def __init__(self, answer: bool) -> None:
        self.answer = answer

    def test(self, ctx: FlowContext) -> bool:
        return self.answer


def _graph(task: object, when: object = None) -> GraphSpec:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("n1", when=when)
    spec.add_activity("n1", task=task).link_add("e")
    spec.add_end("e")
    return spec


def _engine(**components: object) -> FlowEngine:
    return FlowEngine(SimpleFlowDriver(container=MapContainer(dict(components))))


def test_task_component_object_from_the_container_runs() -> None:
    ctx = _engine(job=_Task()).eval(_graph("@job").create())
    assert ctx.get("ran") == "n1"


def test_callable_task_component_from_the_container_runs() -> None:
    ctx = _engine(job=lambda c, n: c.put("ran", n.id)).eval(_graph("@job").create())
    assert ctx.get("ran") == "n1"


def test_task_component_given_in_code_runs() -> None:
    ctx = FlowEngine().eval(_graph(_Task()).create())
    assert ctx.get("ran") == "n1"


def test_condition_component_object_from_the_container_decides() -> None:
    engine = _engine(job=_Task(), no=_Condition(False))
    assert engine.eval(_graph("@job", "@no").create()).get("ran") is None


def test_callable_condition_component_decides() -> None:
    engine = _engine(job=_Task(), yes=lambda ctx: True)
    assert engine.eval(_graph("@job", "@yes").create()).get("ran") == "n1"


def test_condition_component_given_in_code_decides() -> None:
    assert FlowEngine().eval(_graph(_Task(), _Condition(False)).create()).get("ran") is None


def test_map_container_put_get_remove() -> None:
    container = MapContainer()
    task = _Task()
    container.put_component("t", task)
    assert container.get_component("t") is task
    container.remove_component("t")
    assert container.get_component("t") is None


def test_meta_script_is_taken_from_the_graph_meta_by_dotted_path() -> None:
    spec = _graph("$scripts.approve")
    spec.meta_put("scripts", {"approve": "approved = amount < 100"})
    ctx = FlowEngine().eval(spec.create(), FlowContext.of().put("amount", 50))
    assert ctx.get("approved") is True


def test_script_task_sees_the_current_node_as_node() -> None:
    ctx = FlowEngine().eval(_graph("seen = node.id").create())
    assert ctx.get("seen") == "n1"


def test_node_variable_is_removed_after_the_script_when_it_was_absent() -> None:
    ctx = FlowEngine().eval(_graph("x = 1").create())
    assert "node" not in ctx


def test_node_variable_is_restored_after_the_script_when_it_was_present() -> None:
    ctx = FlowEngine().eval(_graph("x = 1").create(), FlowContext.of().put("node", "mine"))
    assert ctx.get("node") == "mine"


def test_default_evaluation_is_safe_evaluation() -> None:
    assert isinstance(SimpleFlowDriver().evaluation, SafeEvaluation)


def test_custom_evaluation_is_used_for_scripts_and_conditions() -> None:
    calls: list[str] = []

    class Recording:
        def run_condition(self, ctx: FlowContext, expression: str) -> bool:
            calls.append(f"cond:{expression}")
            return True

        def run_task(self, ctx: FlowContext, script: str) -> None:
            calls.append(f"task:{script}")

    engine = FlowEngine(SimpleFlowDriver(evaluation=Recording()))
    engine.eval(_graph("do it", "ok?").create())
    assert calls == ["cond:ok?", "task:do it"]
