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
    Graph,
    GraphDefinitionError,
    InvalidArgumentTypeError,
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
