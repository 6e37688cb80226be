"""Error messages quote a caller's bad value without ever failing themselves: an integer past
Python's digit limit, a ``__repr__`` that raises or a huge string gets the typed error that
names it (cut short, or by its type), never the builtin exception ``repr()`` raised."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from flow import (
    ContextValueError,
    FlowContext,
    FlowEngine,
    FlowError,
    Graph,
    GraphNotFoundError,
    NodeNotFoundError,
)
from flow._text import SHOWN_CHARS, safe_repr
from flow.workflow import (
    ActorStateController,
    InvalidActionError,
    InvalidInstanceIdError,
    InvalidQueryError,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)
from flow_sqla import InvalidArgumentError, TaskHistoryRecorder, migrations, sql_workflow

GRAPH = """
id: g
layout:
  - {id: start, type: start}
  - {id: A, meta: {actor: boss}}
  - {id: end, type: end}
"""


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _NamelessMeta(type):
    @property
    def __name__(cls) -> str:  # type: ignore[override]
        raise RuntimeError("no name")


class Nameless(metaclass=_NamelessMeta):
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


HUGE_INT = 10**5000
NO_TEXT = [HUGE_INT, BrokenRepr()]
NO_TEXT_IDS = ["huge int", "broken repr"]
HOSTILE = [*NO_TEXT, "x" * 1_000_000]
HOSTILE_IDS = [*NO_TEXT_IDS, "huge str"]


def test_safe_repr_is_repr_for_ordinary_values() -> None:
    for value in ("exp-1", 7, None, ["a", 1], {"k": b"v"}):
        assert safe_repr(value) == repr(value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [(HUGE_INT, "<int>"), (BrokenRepr(), "<BrokenRepr>"), (Nameless(), "<object>")],
    ids=["huge int", "broken repr", "nameless type"],
)
def test_safe_repr_shows_the_type_when_repr_fails(value: object, shown: str) -> None:
    assert safe_repr(value) == shown


@pytest.mark.parametrize("value", ["x" * 1_000_000, ["y" * 100] * 10_000], ids=["str", "list"])
def test_safe_repr_is_cut_short(value: object) -> None:
    shown = safe_repr(value)
    assert len(shown) <= SHOWN_CHARS + 5 and shown.endswith("...")
    assert shown.startswith(repr(value)[:20])


@pytest.fixture
def graph() -> Graph:
    return Graph.from_text(GRAPH)


@pytest.fixture
def wf(graph: Graph) -> WorkflowExecutor:
    engine = FlowEngine()
    engine.load(graph)
    return WorkflowExecutor(engine, ActorStateController())


@pytest.fixture
def sql_wf(graph: Graph) -> Iterator[WorkflowExecutor]:
    engine = FlowEngine()
    engine.load(graph)
    db = sa.create_engine("sqlite://")
    migrations.upgrade(db)
    yield sql_workflow(db, engine, state_controller=ActorStateController())
    db.dispose()  # Python 3.13 warns of a SQLite connection left to the garbage collector


def _ctx() -> FlowContext:
    return FlowContext.of("exp-1", {"actor": "boss"})


def _raises(error: type[FlowError], call: Callable[[], Any]) -> FlowError:
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    assert len(message) < 1000, message[:300]
    return caught.value


@pytest.mark.parametrize("bad", HOSTILE, ids=HOSTILE_IDS)
@pytest.mark.parametrize("repository", ["memory", "sql"])
def test_executor_arguments(
    wf: WorkflowExecutor, sql_wf: WorkflowExecutor, graph: Graph, bad: Any, repository: str
) -> None:
    ex = wf if repository == "memory" else sql_wf
    _raises(NodeNotFoundError, lambda: ex.submit_task_at(graph, bad, TaskAction.FORWARD, _ctx()))
    _raises(GraphNotFoundError, lambda: ex.claim_task(bad, _ctx()))
    _raises(InvalidQueryError, lambda: ex.inbox(_ctx(), limit=bad))
    _raises(InvalidQueryError, lambda: ex.inbox(_ctx(), after=bad))
    _raises(InvalidQueryError, lambda: ex.instances(after=bad))
    _raises(InvalidQueryError, lambda: ex.instances(status=bad))
    action = _raises(InvalidActionError, lambda: ex.submit_task_at(graph, "A", bad, _ctx()))
    assert "(graph 'g', node 'A')" in str(action)


@pytest.mark.parametrize("bad", NO_TEXT, ids=NO_TEXT_IDS)
@pytest.mark.parametrize("repository", ["memory", "sql"])
def test_executor_ids_and_filters_that_are_no_text(
    wf: WorkflowExecutor, sql_wf: WorkflowExecutor, graph: Graph, bad: Any, repository: str
) -> None:
    ex = wf if repository == "memory" else sql_wf
    _raises(InvalidInstanceIdError, lambda: ex.claim_task(graph, FlowContext.of(bad)))
    _raises(InvalidInstanceIdError, lambda: ex.status(bad))
    _raises(InvalidQueryError, lambda: ex.instances(graph_id=bad))
    _raises(InvalidQueryError, lambda: ex.instances(creator=bad))


@pytest.mark.parametrize("bad", HOSTILE, ids=HOSTILE_IDS)
def test_graph_lookups(graph: Graph, bad: Any) -> None:
    error = _raises(NodeNotFoundError, lambda: graph.get_node_or_throw(bad))
    assert str(error).endswith("in graph 'g'")
    _raises(GraphNotFoundError, lambda: FlowEngine().get_graph_or_throw(bad))


@pytest.mark.parametrize("bad", HOSTILE, ids=HOSTILE_IDS)
def test_history_reads(sql_wf: WorkflowExecutor, bad: Any) -> None:
    recorder = sql_wf.recorder
    assert isinstance(recorder, TaskHistoryRecorder)
    if not isinstance(bad, str):
        _raises(InvalidInstanceIdError, lambda: recorder.history(bad))
    _raises(InvalidArgumentError, lambda: recorder.history("exp-1", limit=bad))
    _raises(InvalidArgumentError, lambda: recorder.history("exp-1", after_id=bad))


@pytest.mark.parametrize("bad", NO_TEXT, ids=NO_TEXT_IDS)
def test_a_context_key_that_is_no_text_is_named_by_its_type(
    sql_wf: WorkflowExecutor, graph: Graph, bad: Any
) -> None:
    ctx = FlowContext.of("exp-1", {"actor": "boss", bad: 1})
    error = _raises(ContextValueError, lambda: sql_wf.claim_task(graph, ctx))
    assert f"<{type(bad).__name__}>" in str(error) and "'exp-1'" in str(error)


@pytest.mark.parametrize("bad", HOSTILE, ids=HOSTILE_IDS)
def test_codes_that_are_no_state_or_action_are_unknown(bad: Any) -> None:
    assert TaskState.of(bad) is TaskState.UNKNOWN
    assert TaskAction.of(bad) is TaskAction.UNKNOWN


@pytest.mark.parametrize(
    "bad", [BrokenRepr(), "x" * 1_000_000, 2.5], ids=["broken repr", "huge str", "float"]
)
def test_eval_steps_that_are_no_integer(graph: Graph, bad: Any) -> None:
    with pytest.raises(TypeError, match=r"^steps must be an integer, not .{1,210}$"):
        FlowEngine().eval(graph, FlowContext.of("exp-1"), steps=bad)
