"""FlowContext: data API, control no-ops, snapshots (to_json/from_json) and the value codec."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import Enum, IntEnum, StrEnum
from typing import Any
from uuid import UUID

import pytest

from flow import (
    FlowContext,
    FlowEngine,
    Graph,
    GraphSpec,
    NodeType,
    NonSerializable,
    SnapshotError,
    codec,
)


def _graph() -> Graph:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("a")
    spec.add_activity("a", title="Approve").link_add("e")
    spec.add_end("e")
    return spec.create()


class _Secret(NonSerializable):
    pass


class Color(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


class Shape(Enum):
    SQUARE = object()


# -- data API --------------------------------------------------------------------------
def test_of_prefills_instance_id_and_context_self_entry() -> None:
    ctx = FlowContext.of("i-1")
    assert ctx.instance_id == "i-1"
    assert ctx.data == {"instanceId": "i-1", "context": ctx}


def test_of_without_instance_id_uses_empty_string() -> None:
    assert FlowContext.of().instance_id == ""
    assert FlowContext.of().get("instanceId") == ""


def test_of_keeps_blank_instance_id_as_given() -> None:
    assert FlowContext.of("   ").instance_id == "   "


def test_of_copies_initial_data_ignoring_none_values() -> None:
    ctx = FlowContext.of("i", {"a": 1, "b": None})
    assert ctx.get("a") == 1
    assert "b" not in ctx


def test_put_ignores_none_value() -> None:
    ctx = FlowContext.of().put("k", 1).put("k", None)
    assert ctx.get("k") == 1
    assert len(ctx.data) == 3


def test_put_if_absent_keeps_existing_value() -> None:
    ctx = FlowContext.of().put("k", "v1")
    ctx.put_if_absent("k", "v2").put_if_absent("k2", "v3")
    assert (ctx.get("k"), ctx.get("k2")) == ("v1", "v3")


def test_put_all_adds_every_entry() -> None:
    ctx = FlowContext.of().put_all({"a": 1, "b": 2})
    assert (ctx.get("a"), ctx.get("b")) == (1, 2)


def test_get_returns_default_for_missing_key() -> None:
    assert FlowContext.of().get("missing", "dflt") == "dflt"


def test_remove_returns_value_and_deletes_key() -> None:
    ctx = FlowContext.of().put("k", 5)
    assert ctx.remove("k") == 5
    assert "k" not in ctx
    assert ctx.remove("k") is None


def test_scoped_removes_a_key_that_was_absent() -> None:
    ctx = FlowContext.of()
    with ctx.scoped("tmp", "v"):
        assert ctx.get("tmp") == "v"
    assert "tmp" not in ctx


def test_scoped_restores_the_previous_value() -> None:
    ctx = FlowContext.of().put("k", "original")
    with ctx.scoped("k", "temporary"):
        assert ctx.get("k") == "temporary"
    assert ctx.get("k") == "original"


def test_scoped_restores_also_when_the_block_raises() -> None:
    ctx = FlowContext.of().put("k", "original")
    with pytest.raises(RuntimeError), ctx.scoped("k", "temporary"):
        raise RuntimeError("boom")
    assert ctx.get("k") == "original"


def test_stop_and_interrupt_outside_an_eval_are_no_ops() -> None:
    ctx = FlowContext.of()
    ctx.stop()
    ctx.interrupt()
    assert ctx.is_stopped is False


def test_fresh_context_has_no_last_record() -> None:
    ctx = FlowContext.of()
    assert ctx.last_record is None
    assert ctx.last_node_id is None
    assert ctx.trace.enabled is True


# -- snapshots -------------------------------------------------------------------------
def test_ser_data_leaves_out_context_non_serializable_and_unrepresentable_values() -> None:
    ctx = FlowContext.of("i").put("ok", 1).put("secret", _Secret()).put("raw", {1, 2})
    assert ctx.ser_data() == {"instanceId": "i", "ok": 1}


def test_ser_data_leaves_out_non_string_keys() -> None:
    ctx = FlowContext.of("i")
    ctx.data[1] = "one"  # type: ignore[index]
    assert "1" not in ctx.to_json()


def test_to_json_has_the_go_port_shape() -> None:
    graph = _graph()
    ctx = FlowContext.of("i").put("amount", 5)
    ctx.trace.record_node(graph, graph.get_node_or_throw("a"))
    doc = json.loads(ctx.to_json())
    assert set(doc) == {"stopped", "vars", "trace"}
    assert doc["stopped"] is False
    assert doc["vars"] == {"instanceId": "i", "amount": 5}
    assert set(doc["trace"]) == {"rootGraphId", "last"}
    assert doc["trace"]["rootGraphId"] == "g"
    record = doc["trace"]["last"]["g"]
    assert {k: record[k] for k in ("graphId", "id", "title", "type")} == {
        "graphId": "g",
        "id": "a",
        "title": "Approve",
        "type": "ACTIVITY",
    }
    assert isinstance(record["timestamp"], int)


def test_connection_is_never_serialized() -> None:
    marker = object()
    ctx = FlowContext.of("i", connection=marker)
    assert "connection" not in ctx.to_json()
    restored = FlowContext.from_json(ctx.to_json(), connection="conn")
    assert restored.connection == "conn"


def test_from_json_round_trips_data_trace_and_stopped_flag() -> None:
    graph = _graph()
    ctx = FlowContext.of("i-9").put("key1", "value1").put("key2", 123).put("key3", True)
    ctx.put("key4", {"nested": [1, 2]})
    ctx.trace.record_node(graph, graph.get_node_or_throw("a"))
    ctx._set_stopped(True)
    restored = FlowContext.from_json(ctx.to_json())
    assert restored.instance_id == "i-9"
    assert restored.data["context"] is restored
    assert {k: restored.get(k) for k in ("key1", "key2", "key3", "key4")} == {
        "key1": "value1",
        "key2": 123,
        "key3": True,
        "key4": {"nested": [1, 2]},
    }
    assert restored.is_stopped is True
    assert restored.last_node_id == "a"
    assert restored.last_record is not None and restored.last_record.type == NodeType.ACTIVITY


def test_from_json_accepts_the_java_4x_shape() -> None:
    text = json.dumps(
        {
            "stopped": False,
            "data": {"instanceId": "x", "a": 1},
            "trace": {
                "rootGraphId": "g",
                "lastRecords": {"g": {"graphId": "g", "id": "a", "type": "ACTIVITY"}},
            },
        }
    )
    restored = FlowContext.from_json(text)
    assert (restored.instance_id, restored.get("a"), restored.last_node_id) == ("x", 1, "a")


def test_from_json_accepts_the_older_vars_key() -> None:
    restored = FlowContext.from_json('{"stopped": false, "vars": {"instanceId": "x", "a": 1}}')
    assert (restored.instance_id, restored.get("a")) == ("x", 1)


def test_from_json_accepts_the_go_port_shape() -> None:
    text = json.dumps(
        {
            "stopped": True,
            "vars": {"instanceId": "go-1", "n": 2},
            "trace": {
                "rootGraphId": "g",
                "last": {"g": {"graphId": "g", "id": "e", "title": "", "type": 2, "timestamp": 7}},
            },
        }
    )
    restored = FlowContext.from_json(text)
    assert restored.get("n") == 2
    assert restored.last_record is not None and restored.last_record.is_end


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"data": [1]}',
        '{"data": {}, "trace": []}',
        '{"data": {}, "trace": {"lastRecords": {"g": {"title": "no id"}}}}',
        '{"vars": {"a": 1}, "trace": {"last": {"g": {"title": "no id"}}}}',
        "[" * 5000 + "]" * 5000,
        '{"vars": {"deep": ' + "[" * 5000 + "]" * 5000 + "}}",
        '{"vars": {"big": ' + "9" * 5000 + "}}",
    ],
)
def test_from_json_rejects_undecodable_text_or_wrong_shapes(text: str) -> None:
    with pytest.raises(SnapshotError):
        FlowContext.from_json(text)


def test_from_json_pre_fills_context_entry_and_empty_instance_id() -> None:
    restored = FlowContext.from_json('{"data": {}}')
    assert restored.data == {"instanceId": "", "context": restored}


# -- codec -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (
            datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            {"$datetime": "2026-01-02T03:04:05+00:00"},
        ),
        (date(2026, 1, 2), {"$date": "2026-01-02"}),
        (time(3, 4, 5), {"$time": "03:04:05"}),
        (Decimal("1.50"), {"$decimal": "1.50"}),
        (
            UUID("12345678-1234-5678-1234-567812345678"),
            {"$uuid": "12345678-1234-5678-1234-567812345678"},
        ),
    ],
)
def test_codec_tags_round_trip(value: Any, encoded: Any) -> None:
    assert codec.encode(value) == encoded
    assert codec.decode(json.loads(json.dumps(codec.encode(value)))) == value


def test_codec_writes_enums_as_their_plain_value_and_tuples_as_lists() -> None:
    encoded = codec.encode({"c": Color.RED, "l": Level.HIGH, "t": (1, 2)})
    assert encoded == {"c": "red", "l": 3, "t": [1, 2]}
    assert type(encoded["c"]) is str and type(encoded["l"]) is int


@pytest.mark.parametrize("value", [{1, 2}, b"x", object(), Shape.SQUARE, float("nan")])
def test_codec_rejects_values_json_cannot_hold(value: Any) -> None:
    assert codec.is_representable(value) is False


def test_codec_error_names_the_key_path() -> None:
    with pytest.raises(TypeError, match=r"\$\.order\.items\[1\]"):
        codec.encode({"order": {"items": [1, {2}]}})


def test_codec_rejects_non_string_keys() -> None:
    with pytest.raises(TypeError, match="key 1"):
        codec.encode({1: "a"})


def test_snapshot_keeps_tagged_values() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ctx = FlowContext.of("i").put("when", when).put("price", Decimal("9.99"))
    restored = FlowContext.from_json(ctx.to_json())
    assert (restored.get("when"), restored.get("price")) == (when, Decimal("9.99"))


def test_a_snapshot_restores_as_its_own_instance_whatever_the_data_says() -> None:
    from flow.context import FlowContext as Context

    ctx = Context.of("attacker-1", {"amount": 5, "instanceId": "victim-42"})
    assert ctx.instance_id == "attacker-1"
    assert Context.from_json(ctx.to_json()).instance_id == "attacker-1"
    ctx.put("instanceId", "victim-43")  # as a script could
    assert Context.from_json(ctx.to_json()).instance_id == "attacker-1"


@pytest.mark.parametrize("name", ["$decimal", "$date", "$uuid", "$dict"])
def test_a_snapshot_variable_named_like_a_tag_stays_a_variable(name: str) -> None:
    """A snapshot's ``vars`` object is a set of names (a Go service may write one holding a
    single variable), never one tagged value."""
    value = {"$dict": {"amount": 9000}, "$decimal": "1.5"}.get(name, "2026-01-02")
    restored = FlowContext.from_json(json.dumps({"vars": {name: value}}))
    assert restored.get(name) == value and restored.get("amount") is None


def test_caller_data_never_replaces_the_reserved_keys() -> None:
    """A form field named ``context`` answered ``context.instance_id`` for a condition (a
    request could route itself as another instance), and made every ``context.put`` script
    fail; ``from_json`` already dropped both keys."""
    form = {"amount": 10, "context": {"instance_id": "ceo-1"}, "instanceId": "ceo-1"}
    ctx = FlowContext.of("emp-7", form)
    assert ctx.get("context") is ctx and ctx.get("instanceId") == "emp-7"
    ctx.put("context", "x").put_all({"instanceId": "other"})
    assert ctx.get("context") is ctx and ctx.get("instanceId") == "emp-7"
    assert ctx.get("amount") == 10
    graph = Graph.from_text(
        """
id: G
layout:
  - {id: s, type: start}
  - id: gate
    type: exclusive
    link: [{nextId: vip, when: "context.instance_id == 'ceo-1'"}, {nextId: normal}]
  - {id: vip, task: "route = 'vip'", link: e}
  - {id: normal, task: "context.put('route', 'normal')", link: e}
  - {id: e, type: end}
"""
    )
    assert FlowEngine().eval(graph, ctx).get("route") == "normal"
