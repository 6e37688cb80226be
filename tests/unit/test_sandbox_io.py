"""No constructor, classmethod, staticmethod or I/O is reachable from an expression, through any
object the engine exposes (context, node, graph, link, record, task, intent, meta) or the data,
Java-style getters included — and the refusal says nothing about the host."""

from __future__ import annotations

import datetime as dt
import os
import types
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from flow import FlowContext, FlowEngine, Graph
from flow.errors import ExpressionError
from flow.evaluation import SafeEvaluation
from flow.workflow._intent import IntentType, WorkflowIntent
from flow.workflow.states import TaskState
from flow.workflow.task import Task

EVALUATION = SafeEvaluation()


class Order:
    """An application object: data attributes and its own methods are reachable."""

    created = "2026"

    def __init__(self) -> None:
        self.amount = 7
        self.callback = os.getcwd  # a function stored on the instance is not a method
        self.calls = 0

    def increment_and_get(self) -> int:
        self.calls += 1
        return self.calls

    @classmethod
    def make(cls) -> Order:
        return cls()

    @staticmethod
    def helper() -> str:
        return os.getcwd()

    class Inner:
        pass


def _graph(script: str) -> Graph:
    return Graph.from_dict(
        {
            "id": "g",
            "meta": {"scripts": {"x": "y = 1"}},
            "layout": [
                {"id": "s", "type": "start", "link": [{"nextId": "t"}]},
                {"id": "t", "task": script, "meta": {"k": "v"}, "link": [{"nextId": "e"}]},
                {"id": "e", "type": "end"},
            ],
        }
    )


def _data(tmp: Path) -> dict[str, Any]:
    graph = _graph("y = 1")
    node = graph.nodes["t"]
    intent = WorkflowIntent(graph, IntentType.CLAIM_TASK)
    ctx = FlowContext.of("i-2")
    intent.task = Task(root_graph=graph, node=node, state=TaskState.WAITING, context=ctx)
    return {
        "path": tmp / "g.yml",
        "present": str(tmp / "g.yml"),
        "absent": str(tmp / "absent.yml"),
        "s": "ab",
        "b": b"ab",
        "n": 5,
        "d": Decimal("1.5"),
        "day": dt.date(2026, 1, 2),
        "moment": dt.datetime(2026, 1, 2, 3, 4, 5),
        "order": Order(),
        "ns": types.SimpleNamespace(amount=3),
        "os": os,
        "m": {"k": 1},
        "WorkflowIntent": intent,
    }


def _run(script: str, tmp: Path) -> FlowContext:
    (tmp / "g.yml").write_text("id: leaked\nlayout:\n  - {id: s, type: start}\n")
    ctx = FlowContext.of("i-1", _data(tmp))
    FlowEngine().eval(_graph(script), ctx)
    return ctx


ESCAPES = [
    # the graph: constructors, loaders, exporters, validation
    "r = node.graph.from_file(present)",
    "r = node.graph.from_text('id: x')",
    "r = node.graph.from_dict(m)",
    "r = node.graph.to_yaml()",
    "r = node.graph.to_json()",
    "r = node.graph.to_dict()",
    "r = node.graph.to_mermaid()",
    "r = node.graph.validate()",
    "r = node.graph._load_notes",
    "r = node.getGraph().from_file(present)",
    "r = node.graph.getFrom_file()",
    "r = node.next_links[0].prev_node.graph.from_file(present)",
    "r = node.graph.start.graph.from_text('id: x')",
    "r = node.graph.nodes.get('t').graph.from_file(present)",
    "r = node.task",
    "r = node.when",
    "r = node.next_links[0].when",
    # enums and records: classmethods and other members
    "r = node.type.of('start')",
    "r = node.type.START",
    "r = node.type.from_bytes(b'1', 'big')",
    "r = node.type.is_known_name('start')",
    "r = context.last_record.of(node)",
    # the context: only its data surface
    "r = context.trace",
    "r = context.exchanger",
    "r = context.connection",
    "r = context.to_json()",
    "r = context.from_json('{}')",
    "r = context.of('x')",
    "r = context.scoped('a', 1)",
    "r = context.getTrace()",
    "r = context.getExchanger()",
    # the workflow intent and its task
    "r = WorkflowIntent.root_graph.from_file(present)",
    "r = WorkflowIntent.task.context.from_json('{}')",
    "r = WorkflowIntent.task.state.of(1)",
    "r = WorkflowIntent.found(node, 1, context)",
    "r = WorkflowIntent.task.getRoot_graph().from_file(present)",
    # builtins: alternate constructors, codecs, formatting
    "r = s.maketrans('a', 'b')",
    "r = s.format(1)",
    "r = s.format_map(m)",
    "r = s.encode('idna')",
    "r = b.decode('idna')",
    "r = b.fromhex('00')",
    "r = n.from_bytes(b'1', 'big')",
    "r = (1.5).fromhex('0x1p3')",
    "r = d.from_float(1.5)",
    "r = m.fromkeys('ab')",
    "r = str(b, 'idna')",
    "r = str(os)",
    # dates: the clock, the time zone database, parsing
    "r = day.today()",
    "r = day.fromisoformat('2020-01-01')",
    "r = day.fromtimestamp(0)",
    "r = moment.now()",
    "r = moment.utcnow()",
    "r = moment.strptime('2020', '%Y')",
    "r = moment.astimezone()",
    "r = moment.timestamp()",
    "r = moment.combine(day, moment.time())",
    # standard-library objects in the data
    "r = path.read_text()",
    "r = path.exists()",
    "r = path.parent",
    "r = path.open()",
    "r = os.getcwd()",
    "r = os.environ",
    # application objects: no classmethod, staticmethod, class or stored function
    "r = order.make()",
    "r = order.helper()",
    "r = order.Inner",
    "r = order.callback()",
    "r = order.callback",
    "r = order.getCallback()",
    "r = order.getFunc_globals()",
    "r = order.getMro()",
    "r = order.increment_and_get",
    "r = ns.__dict__",
]


@pytest.mark.parametrize("attempt", ESCAPES)
def test_no_constructor_classmethod_or_io_is_reachable(attempt: str, tmp_path: Path) -> None:
    with pytest.raises(ExpressionError):
        _run(attempt, tmp_path)


@pytest.mark.parametrize(
    "attempt",
    [
        "r = node.graph.from_file({path})",
        "r = node.getGraph().getFrom_file({path})",
        "r = node.graph.start.graph.from_file({path})",
    ],
)
def test_refusal_does_not_tell_whether_a_file_exists(attempt: str, tmp_path: Path) -> None:
    messages = []
    for name in ("present", "absent"):
        with pytest.raises(ExpressionError) as info:
            _run(attempt.format(path=name), tmp_path)
        messages.append(str(info.value).replace(name, "P"))
    assert messages[0] == messages[1]
    for message in messages:
        assert "Errno" not in message and str(tmp_path) not in message


def test_refused_module_is_not_printed_with_its_host_path(tmp_path: Path) -> None:
    with pytest.raises(ExpressionError) as info:
        _run("r = str(os)", tmp_path)
    assert os.__file__ not in str(info.value)


def test_the_exposed_surface_still_works(tmp_path: Path) -> None:
    ctx = _run(
        "r = [node.id, node.type.name, node.meta.get('k'), node.meta_get('k'), "
        "node.graph.id, node.graph.get_node('e').id, node.next_nodes[0].id, "
        "node.getGraph().getId(), node.graph.meta['scripts']['x'], context.get('n'), "
        "context.instance_id, WorkflowIntent.task.node_id, WorkflowIntent.type.name, "
        "order.amount, order.getAmount(), order.created, order.increment_and_get(), "
        "ns.amount, d * 2, day.year, day.isoformat(), moment.strftime('%H:%M'), "
        "s.upper(), m.get('k')]",
        tmp_path,
    )
    assert ctx.get("r") == [
        "t",
        "ACTIVITY",
        "v",
        "v",
        "g",
        "e",
        "e",
        "g",
        "y = 1",
        5,
        "i-1",
        "t",
        "CLAIM_TASK",
        7,
        7,
        "2026",
        1,
        3,
        Decimal("3.0"),
        2026,
        "2026-01-02",
        "03:04",
        "AB",
        1,
    ]


def test_missing_attributes_of_listed_types_are_still_null(tmp_path: Path) -> None:
    ctx = _run(
        "r = [s.amount, node.nothing, order.nothing, day.getWeek(), order.getInner()]", tmp_path
    )
    assert ctx.get("r") == [None, None, None, None, None]


def test_subclass_of_a_listed_container_keeps_its_methods() -> None:
    from collections import OrderedDict

    ctx = FlowContext.of("i-1", {"m": OrderedDict(a=1)})
    EVALUATION.run_task(ctx, "m.update({'b': 2}); r = m.get('b')")
    assert ctx.get("r") == 2


def test_data_object_methods_inherited_from_the_standard_library_are_refused() -> None:
    import threading

    class Worker(threading.Thread):
        pass

    with pytest.raises(ExpressionError):
        EVALUATION.run_task(FlowContext.of("i-1", {"w": Worker()}), "w.start()")


def test_refusal_while_running_names_the_instance_graph_and_node(tmp_path: Path) -> None:
    with pytest.raises(ExpressionError) as info:
        _run("r = node.graph.from_file(present)", tmp_path)
    error = info.value
    assert (error.instance_id, error.graph_id, error.node_id) == ("i-1", "g", "t")
    assert "task of node 't' in graph 'g'" in str(error) and "instance 'i-1'" in str(error)
    assert error.expression == "r = node.graph.from_file(present)"


def test_refusal_in_a_condition_names_the_instance() -> None:
    with pytest.raises(ExpressionError) as info:
        EVALUATION.run_condition(FlowContext.of("i-9", {"s": "ab"}), "s.maketrans('a', 'b')")
    assert info.value.instance_id == "i-9" and "instance 'i-9'" in str(info.value)
