"""Arguments of the wrong type to the engine's API get the library's typed errors: a graph
path is refused as a graph text is (GraphDefinitionError), a context's data and eval's
arguments with InvalidArgumentTypeError (also a TypeError) — never a bare TypeError,
ValueError or AttributeError from inside Python's file or dict handling."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flow import (
    FlowContext,
    FlowEngine,
    FlowError,
    FlowInterceptor,
    Graph,
    GraphDefinitionError,
    InvalidArgumentTypeError,
    SimpleFlowDriver,
)
from flow import workflow as flow_workflow


class _BytesPath(os.PathLike[bytes]):
    def __fspath__(self) -> bytes:
        return b"/x.yml"


class _BrokenPath(os.PathLike[str]):
    def __fspath__(self) -> str:
        return 5  # type: ignore[return-value]


NOT_A_PATH = [5, None, b"/x.yml", ["/x.yml"], _BytesPath(), _BrokenPath()]
LOADERS: list[Callable[[Any], object]] = [Graph.from_file, lambda path: FlowEngine().load(path)]


@pytest.mark.parametrize("load", LOADERS, ids=["Graph.from_file", "FlowEngine.load"])
@pytest.mark.parametrize("path", NOT_A_PATH, ids=lambda v: type(v).__name__)
def test_a_path_that_is_not_text_is_a_graph_definition_error(
    load: Callable[[Any], object], path: Any
) -> None:
    with pytest.raises(GraphDefinitionError, match="graph file path must be a str or an os"):
        load(path)


@pytest.mark.parametrize("load", LOADERS, ids=["Graph.from_file", "FlowEngine.load"])
@pytest.mark.parametrize("path", ["/tmp/a\x00.yml", "graphs/\x00*.yml"], ids=["file", "glob"])
def test_a_path_holding_nul_is_a_graph_definition_error(
    load: Callable[[Any], object], path: str
) -> None:
    with pytest.raises(GraphDefinitionError, match=r"holds a NUL character") as caught:
        load(path)
    assert repr(path) in str(caught.value)


def test_a_path_object_still_loads(tmp_path: Path) -> None:
    file = tmp_path / "g.yml"
    file.write_text("id: g\nlayout: [{id: s, type: start}, {id: e, type: end}]\n")
    assert Graph.from_file(file).id == "g"
    assert [g.id for g in FlowEngine().load(file)] == ["g"]


@pytest.mark.parametrize(
    "data", [[("a", 1)], "a=1", 5, [], ("a",)], ids=["pairs", "str", "int", "empty list", "tuple"]
)
def test_context_data_that_is_not_a_mapping_is_refused_naming_the_instance(data: Any) -> None:
    with pytest.raises(InvalidArgumentTypeError, match=r"^data must be a mapping.*'exp-1'\)$"):
        FlowContext.of("exp-1", data)
    with pytest.raises(TypeError):
        FlowContext("exp-1", data)


def test_context_data_may_be_any_mapping_or_none() -> None:
    assert FlowContext.of("exp-1", None).get("a") is None
    assert FlowContext.of("exp-1", {}).get("a") is None
    assert FlowContext.of("exp-1", os.environ).get("PATH") == os.environ.get("PATH")


class _Pairs:
    """A mapping of another library that skips the ``Mapping`` ABC: ``items()`` is enough."""

    def items(self) -> list[tuple[str, int]]:
        return [("amount", 7)]

    def __len__(self) -> int:
        return 1


def test_context_data_that_only_looks_like_a_mapping_is_refused() -> None:
    """What a ``Mapping`` promises is what the context reads: an object that merely has
    ``items()`` may yield anything (``dict(obj)`` converts one that is a mapping)."""
    for data in (_Pairs(), dict):
        with pytest.raises(InvalidArgumentTypeError, match="data must be a mapping"):
            FlowContext.of("exp-1", data)  # type: ignore[arg-type]
    assert FlowContext.of("exp-1", dict(_Pairs().items())).get("amount") == 7


GRAPH = "id: g\nlayout: [{id: s, type: start}, {id: e, type: end}]"


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ({"graph": 5}, "graph"),
        ({"graph": None}, "graph"),
        ({"ctx": {"x": 1}}, "ctx"),
        ({"steps": "5"}, "steps"),
        ({"steps": 2.5}, "steps"),
    ],
    ids=repr,
)
def test_eval_arguments_of_the_wrong_type_are_the_typed_argument_error(
    call: dict[str, Any], name: str
) -> None:
    engine = FlowEngine()
    engine.load(Graph.from_text(GRAPH))
    arguments: dict[str, Any] = {"graph": "g", "ctx": FlowContext.of("exp-1"), **call}
    with pytest.raises(InvalidArgumentTypeError, match=rf"^{name} must be ") as caught:
        engine.eval(arguments.pop("graph"), arguments.pop("ctx"), **arguments)
    assert isinstance(caught.value, FlowError) and isinstance(caught.value, TypeError)
    assert caught.value.name == name
    if name != "ctx":
        assert str(caught.value).endswith("(instance 'exp-1')")


def test_the_argument_error_is_one_class_for_engine_and_workflow() -> None:
    assert flow_workflow.InvalidArgumentTypeError is InvalidArgumentTypeError
    assert flow_workflow.errors.InvalidArgumentTypeError is InvalidArgumentTypeError


# -- a context's keys, an engine's drivers and interceptors --------------------------------
UNHASHABLE_KEYS = [["amount"], {"a": 1}, {"amount"}]

KEY_CALLS: list[tuple[str, Callable[[FlowContext, Any], object]]] = [
    ("put", lambda ctx, key: ctx.put(key, 1)),
    ("put_if_absent", lambda ctx, key: ctx.put_if_absent(key, 1)),
    ("get", lambda ctx, key: ctx.get(key)),
    ("remove", lambda ctx, key: ctx.remove(key)),
    ("in", lambda ctx, key: key in ctx),
    ("scoped", lambda ctx, key: ctx.scoped(key, 1).__enter__()),
]


@pytest.mark.parametrize("call", [c for _, c in KEY_CALLS], ids=[n for n, _ in KEY_CALLS])
@pytest.mark.parametrize("key", UNHASHABLE_KEYS, ids=lambda v: type(v).__name__)
def test_a_context_key_no_variable_can_have_is_the_typed_argument_error(
    call: Callable[[FlowContext, Any], object], key: Any
) -> None:
    ctx = FlowContext.of("leave-7", {"amount": 5})
    with pytest.raises(InvalidArgumentTypeError, match=r"key must be a variable name") as caught:
        call(ctx, key)
    assert "'leave-7'" in str(caught.value)
    assert ctx.data["amount"] == 5 and len(ctx.data) == 3  # nothing changed


def test_put_all_with_pairs_is_the_typed_argument_error() -> None:
    ctx = FlowContext.of("leave-7")
    with pytest.raises(InvalidArgumentTypeError, match=r"mapping must be a mapping.*'leave-7'"):
        ctx.put_all([("amount", 5)])  # type: ignore[arg-type]


def test_context_keys_of_any_hashable_kind_still_work() -> None:
    ctx = FlowContext.of("leave-7").put("amount", 5).put_if_absent("days", 2)
    with ctx.scoped("actor", "bob"):
        assert ctx.get("actor") == "bob" and "actor" in ctx
    assert "actor" not in ctx and ctx.remove("days") == 2 and ctx.get("amount") == 5


class _NoHooks:
    pass


# None, an object without the callbacks, the class instead of an instance, a name.
NOT_A_DRIVER = [None, _NoHooks(), SimpleFlowDriver, "driver"]
NOT_AN_INTERCEPTOR = [None, _NoHooks(), FlowInterceptor, print]


@pytest.mark.parametrize("driver", NOT_A_DRIVER[1:], ids=lambda v: type(v).__name__)
def test_an_engine_refuses_a_default_driver_without_its_callbacks(driver: Any) -> None:
    with pytest.raises(InvalidArgumentTypeError, match=r"driver must be a FlowDriver"):
        FlowEngine(driver)


@pytest.mark.parametrize("driver", NOT_A_DRIVER, ids=lambda v: type(v).__name__)
def test_register_driver_refuses_a_driver_without_its_callbacks(driver: Any) -> None:
    engine = FlowEngine()
    with pytest.raises(InvalidArgumentTypeError, match=r"driver must be a FlowDriver"):
        engine.register_driver("mine", driver)
    assert engine.eval(Graph.from_text("id: g\nlayout: [{type: start}, {type: end}]"))


@pytest.mark.parametrize("name", [5, ["mine"], b"mine"], ids=lambda v: type(v).__name__)
def test_register_driver_refuses_a_name_that_is_not_text(name: Any) -> None:
    with pytest.raises(InvalidArgumentTypeError, match=r"name must be a driver name"):
        FlowEngine().register_driver(name, SimpleFlowDriver())


@pytest.mark.parametrize("graph", ["g", None, 5], ids=lambda v: type(v).__name__)
def test_get_driver_refuses_anything_but_a_graph(graph: Any) -> None:
    with pytest.raises(InvalidArgumentTypeError, match=r"graph must be a Graph"):
        FlowEngine().get_driver(graph)


@pytest.mark.parametrize("interceptor", NOT_AN_INTERCEPTOR, ids=lambda v: type(v).__name__)
def test_add_interceptor_refuses_an_object_without_its_hooks(interceptor: Any) -> None:
    engine = FlowEngine()
    with pytest.raises(InvalidArgumentTypeError, match=r"interceptor must be a FlowInterceptor"):
        engine.add_interceptor(interceptor)
    assert engine.interceptors == ()
    assert engine.eval(Graph.from_text("id: g\nlayout: [{type: start}, {type: end}]"))


@pytest.mark.parametrize("index", ["1", 1.5, None, True], ids=lambda v: type(v).__name__)
def test_add_interceptor_refuses_an_index_that_is_not_an_integer(index: Any) -> None:
    engine = FlowEngine()
    with pytest.raises(InvalidArgumentTypeError, match=r"index must be an integer"):
        engine.add_interceptor(FlowInterceptor(), index)
    engine.add_interceptor(FlowInterceptor(), 3)  # the next one is not refused for it
    assert len(engine.interceptors) == 1


@pytest.mark.parametrize("depth", ["10", 2.0, True], ids=lambda v: type(v).__name__)
def test_an_engine_refuses_a_max_depth_that_is_not_an_integer(depth: Any) -> None:
    with pytest.raises(InvalidArgumentTypeError, match=r"max_depth must be an integer"):
        FlowEngine(max_depth=depth)


_ONE_TASK = """
id: g
layout: [{id: s, type: start, link: a}, {id: a, meta: {actor: bob}, link: e}, {id: e, type: end}]
"""


@pytest.mark.parametrize("method", ["meta_get", "meta_as_str", "meta_as_bool", "meta_as_number"])
def test_a_meta_key_no_meta_can_have_is_the_typed_argument_error_naming_the_node(
    method: str,
) -> None:
    node = Graph.from_text(_ONE_TASK).get_node_or_throw("a")
    with pytest.raises(InvalidArgumentTypeError, match=r"meta key .* of node 'a' of graph 'g'"):
        getattr(node, method)(["actor"])
    assert getattr(node, method)("missing") is None
    assert node.meta_as_str("actor") == "bob"


def test_a_trace_asked_for_a_graph_id_no_graph_can_have_answers_as_for_a_missing_one() -> None:
    ctx = FlowEngine().eval(Graph.from_text(_ONE_TASK), FlowContext.of("leave-7"))
    trace = ctx.trace
    assert trace.last_record(["g"]) is None  # type: ignore[arg-type]
    assert trace.last_node_id(["g"]) is None  # type: ignore[arg-type]
    assert trace.is_end(["g"]) is False  # type: ignore[arg-type]
    assert trace.is_end("g") and trace.last_node_id() == "e"


# -- the workflow executor's collaborators ----------------------------------------------
class _NoMethods:
    pass


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("engine", None),  # sql_workflow(url, None) was built, and failed at every claim
        ("engine", "oa"),
        ("engine", FlowEngine),  # the class, not an instance
        ("engine", _NoMethods()),  # e.g. a SQLAlchemy Engine where the FlowEngine goes
        ("state_controller", 5),  # failed every claim as a TaskError blaming the first task
        ("state_controller", flow_workflow.ActorStateController),
        ("state_repository", "sqlite://"),
        ("state_repository", _NoMethods()),
        ("recorder", print),  # a function, not an object with record()
        ("recorder", _NoMethods()),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_an_executor_refuses_collaborators_without_the_methods_it_calls(
    argument: str, value: Any
) -> None:
    arguments: dict[str, Any] = {"engine": FlowEngine(), argument: value}
    with pytest.raises(InvalidArgumentTypeError, match=rf"^{argument} must be a "):
        flow_workflow.WorkflowExecutor(**arguments)


def test_an_executor_takes_collaborators_that_only_have_the_methods() -> None:
    class Everyone:
        def is_operatable(self, ctx: FlowContext, node: Any) -> bool:
            return True

        def is_auto_forward(self, ctx: FlowContext, node: Any) -> bool:
            return False

    class Records:
        def __init__(self) -> None:
            self.records: list[Any] = []

        def record(self, ctx: FlowContext, record: Any) -> None:
            self.records.append(record)

    engine = FlowEngine()
    engine.load(Graph.from_text(_ONE_TASK))
    recorder = Records()
    ex = flow_workflow.WorkflowExecutor(engine, Everyone(), recorder=recorder)
    ctx = FlowContext.of("dt-1")
    task = ex.claim_task("g", ctx)
    assert task is not None
    assert ex.submit_task_if_waiting(task, flow_workflow.TaskAction.FORWARD, ctx)
    assert len(recorder.records) == 1


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("as_of", "2024-01-01"), ("as_of", 1700000000), ("unindexed_only", "no")],
)
def test_reindex_refuses_an_as_of_or_flag_of_the_wrong_type_before_any_read(
    keyword: str, value: Any
) -> None:
    """``as_of="2024-01-01"`` failed inside the operation with an AttributeError;
    ``unindexed_only="no"`` was taken for true."""
    ex = flow_workflow.WorkflowExecutor(FlowEngine())  # no index: the check comes first
    with pytest.raises(InvalidArgumentTypeError, match=rf"{keyword} must be .*'r-1'"):
        ex.reindex("g", FlowContext.of("r-1"), **{keyword: value})
