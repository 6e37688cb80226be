"""Hostile and odd context values: user dicts never pass for tags, limits give typed errors.

Classes (issue 11 items 5 and 9): tag injection (user dicts shaped like tags), integers past
the digit limit, nesting (deep or cyclic), lone surrogates in text and keys, non-finite
floats, non-string keys, oversized documents, and stored JSON that cannot be walked. The only
error that may escape is the library's (``ContextValueError`` / ``SnapshotError``).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flow import CodecLimits, ContextValueError, FlowContext, SnapshotError, codec
from flow_sqla._vars import VarsPolicy

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TAGS = ["$datetime", "$date", "$time", "$decimal", "$uuid", "$dict"]


def _via_json(value: Any, **kw: Any) -> Any:
    """Encode, go through JSON text as a database would, decode."""
    return codec.decode(json.loads(json.dumps(codec.encode(value, **kw))))


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _as_plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_as_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_plain(v) for k, v in value.items()}
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


# -- tag injection -----------------------------------------------------------------------
USER_DICTS: list[Any] = [
    {"$decimal": "approx. 12 EUR"},
    {"$date": "2026-01-02"},  # parseable: must still come back as a dict, not a date
    {"$datetime": "2026-01-02T03:04:05"},
    {"$time": "03:04"},
    {"$uuid": "12345678-1234-5678-1234-567812345678"},
    {"$uuid": "not a uuid"},
    {"$dict": {"a": 1}},
    {"$dict": {"$decimal": "1"}},
    {"$dict": "x"},
    {"$ref": 1},
    {"$": None},
    {"$date": 5},
    {"$date": "2026-01-02", "other": 1},
    {"$date": {"$date": "2026-01-02"}},
    {"outer": {"$decimal": "approx"}},
    [{"$decimal": "x"}, {"$date": "2026-01-02"}],
    {"$date": date(2026, 1, 2)},  # a user dict holding a real date
    {"$dict": {"$dict": {"$dict": {}}}},
    {"$$date": "2026-01-02"},
    {"": {"$date": "2026-01-02"}},
]


@pytest.mark.parametrize("value", USER_DICTS, ids=repr)
def test_user_dicts_shaped_like_tags_round_trip_exactly(value: Any) -> None:
    assert _via_json(value) == value
    assert _via_json(value, plain_json=True) == _as_plain(value)


@pytest.mark.parametrize("value", USER_DICTS, ids=repr)
def test_user_dicts_round_trip_through_stored_vars_and_snapshots(value: Any) -> None:
    policy = VarsPolicy()
    stored = json.loads(json.dumps(policy.encode("i-1", {"form": value})))
    assert policy.decode("i-1", stored) == {"form": value}
    restored = FlowContext.from_json(FlowContext.of("i-1", {"form": value}).to_json())
    assert restored.get("form") == value


def test_a_one_key_dollar_dict_is_written_inside_the_escape_object() -> None:
    assert codec.encode({"$decimal": "approx. 12 EUR"}) == {"$dict": {"$decimal": "approx. 12 EUR"}}
    # dicts with more keys or keys without `$` are written as they are
    assert codec.encode({"$decimal": "1", "b": 2}) == {"$decimal": "1", "b": 2}
    assert codec.encode({"decimal": "1"}) == {"decimal": "1"}


def test_real_typed_values_inside_escaped_dicts_keep_their_types() -> None:
    value = {"$date": {"when": date(2026, 1, 2), "price": Decimal("1.50")}}
    assert _via_json(value) == value


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ({"$decimal": "approx. 12 EUR"}, {"$decimal": "approx. 12 EUR"}),
        ({"$date": "someday"}, {"$date": "someday"}),
        ({"$uuid": "x"}, {"$uuid": "x"}),
        ({"$date": "2026-01-02"}, date(2026, 1, 2)),
        ({"$decimal": "1.50"}, Decimal("1.50")),
    ],
)
def test_rows_written_before_escaping_still_read(stored: Any, read: Any) -> None:
    """An unparseable tag can only be a user dict from before the escape: it reads as that
    dict (the instance keeps working); a parseable one reads as its type, as it always did."""
    assert VarsPolicy().decode("old-1", {"v": stored}) == {"v": read}
    assert FlowContext.from_json(json.dumps({"data": {"v": stored}})).get("v") == read


_keys = st.text(alphabet="$dateimcluoxr", max_size=9) | st.sampled_from(TAGS)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(TAGS)
    | st.dates()
    | st.decimals(allow_nan=False, allow_infinity=False, places=2)
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=15,
)


@FAST
@given(_values)
def test_any_value_of_dicts_with_dollar_keys_round_trips(value: Any) -> None:
    assert _via_json(value) == value


@FAST
@given(_values)
def test_plain_json_reads_back_typed_values_as_their_strings_and_the_rest_exactly(
    value: Any,
) -> None:
    assert _via_json(value, plain_json=True) == _as_plain(value)


# -- plain JSON strings for dates and decimals ------------------------------------------
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "2026-01-02T03:04:05+00:00"),
        (date(2026, 1, 2), "2026-01-02"),
        (time(3, 4, 5), "03:04:05"),
        (Decimal("12.50"), "12.50"),
        (uuid.UUID(int=7), "00000000-0000-0000-0000-000000000007"),
    ],
)
def test_plain_json_writes_typed_values_as_strings_and_reads_strings(value: Any, text: str) -> None:
    assert codec.encode({"v": value}, plain_json=True) == {"v": text}
    policy = VarsPolicy(plain_json=True)
    assert policy.decode("i", json.loads(json.dumps(policy.encode("i", {"v": value})))) == {
        "v": text
    }
    doc = json.loads(FlowContext.of("i", {"v": value}).to_json(plain_json=True))
    assert doc["vars"]["v"] == text


def test_plain_json_still_reads_tagged_values_written_before() -> None:
    policy = VarsPolicy(plain_json=True)
    assert policy.decode("i", {"d": {"$date": "2026-01-02"}}) == {"d": date(2026, 1, 2)}


# -- limits: typed errors on write -------------------------------------------------------
class Big(IntEnum):
    HUGE = 10**5000


def _cyclic_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


BAD_VALUES: list[Any] = [
    10**4300,  # 4,301 digits
    -(10**5000),
    [1, 10**4400],
    Big.HUGE,
    _nested(5000),
    _nested(31),
    _nested(33, "x"),
    [_nested(30, date(2026, 1, 2))],
    _cyclic_list(),
    _cyclic_dict(),
    "bad \ud800 text",
    "\udfff",
    ["ok", {"k": "x\udc80"}],
    {"k\ud800": 1},
    {1: "a"},
    {None: "a"},
    {("t",): "a"},
    float("nan"),
    float("inf"),
    [float("-inf")],
    {b"bytes": 1},
    {1, 2},
]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=lambda v: type(v).__name__)
def test_values_past_the_limits_raise_a_typed_error_naming_instance_and_key(bad: Any) -> None:
    policy = VarsPolicy()
    with pytest.raises(ContextValueError, match=r"'form'.*'inv-7'"):
        policy.encode("inv-7", {"days": 3, "title": "Büro", "form": bad})
    if type(bad) not in (str, int):  # plain text and ints are left to encode by the check
        with pytest.raises(ContextValueError, match=r"'form'.*'inv-7'"):
            policy.check("inv-7", {"days": 3, "title": "Büro", "form": bad})
    with pytest.raises(ContextValueError):
        codec.encode(bad)
    assert codec.is_representable(bad) is False


@pytest.mark.parametrize("bad", BAD_VALUES, ids=lambda v: type(v).__name__)
def test_snapshots_leave_out_what_cannot_be_represented(bad: Any) -> None:
    ctx = FlowContext.of("inv-7", {"days": 3, "form": bad})
    restored = FlowContext.from_json(ctx.to_json())
    assert restored.get("days") == 3
    assert "form" not in restored


@pytest.mark.parametrize("key", ["k\ud800", 7, None, ("t",)], ids=repr)
@pytest.mark.parametrize("value", ["x", 1, True, [1]], ids=repr)
def test_bad_top_level_keys_are_rejected_naming_the_instance(key: Any, value: Any) -> None:
    with pytest.raises(ContextValueError, match="'inv-7'"):
        VarsPolicy().encode("inv-7", {key: value})
    assert FlowContext.from_json(FlowContext.of("inv-7", {key: value}).to_json()).data.keys() == {
        "instanceId",
        "context",
    }


def test_the_limits_hold_exactly_at_their_boundaries() -> None:
    codec.encode(10**4300 - 1)  # 4,300 digits
    codec.encode(-(10**4300) + 1)
    codec.encode(_nested(30))
    with pytest.raises(ContextValueError, match="nested deeper than 30"):
        codec.encode(_nested(31))
    codec.encode(_nested(29, date(2026, 1, 2)))  # the tag object is the 30th level
    with pytest.raises(ContextValueError, match="nested deeper than 30"):
        codec.encode(_nested(30, date(2026, 1, 2)))
    with pytest.raises(ContextValueError, match="nested deeper than 30"):
        codec.encode(_nested(29, {"$ref": 1}))  # the escape object takes a level too
    codec.encode(_nested(28, {"$ref": 1}))


def test_limits_are_configurable() -> None:
    small = CodecLimits(max_depth=2, max_int_digits=3, max_bytes=40)
    policy = VarsPolicy(limits=small)
    policy.encode("i", {"a": [[1]], "n": 999})
    with pytest.raises(ContextValueError, match="nested deeper than 2"):
        policy.encode("i", {"a": [[[1]]]})
    with pytest.raises(ContextValueError, match="more than 3 digits"):
        policy.encode("i", {"n": [1000]})
    with pytest.raises(ContextValueError, match=r"over the limit of 40.*'i'"):
        policy.encode("i", {"a": "x" * 40})
    big = CodecLimits(max_depth=150)
    assert codec.encode(_nested(150), limits=big) == _nested(150)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_depth": 0}, {"max_depth": 201}, {"max_int_digits": -1}, {"max_bytes": 1.5}],
)
def test_limits_reject_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="CodecLimits"):
        CodecLimits(**kwargs)


def test_the_document_size_counts_utf8_bytes_of_the_compact_json() -> None:
    limits = CodecLimits(max_bytes=100)
    text = "é" * 44  # 88 bytes; {"t":"é…"} is 96
    policy = VarsPolicy(limits=limits)
    policy.encode("i", {"t": text})
    policy.encode("i", {"t": text + "éé"})  # exactly 100
    with pytest.raises(ContextValueError, match="102 bytes"):
        policy.encode("i", {"t": text + "ééé"})
    with pytest.raises(SnapshotError, match="'i'"):
        FlowContext.of("i", {"t": "x" * 200}).to_json(limits=limits)


def test_the_default_size_limit_is_one_mebibyte() -> None:
    VarsPolicy().encode("i", {"doc": "x" * 1_000_000})
    with pytest.raises(ContextValueError, match="1048576"):
        VarsPolicy().encode("i", {"doc": ["x" * 600_000, "y" * 600_000]})


def test_many_valid_values_stay_representable() -> None:
    """Non-ASCII text, astral characters, escapes and big-but-fine ints are not rejected."""
    fine = {
        "t": 'Grüße 👋 \u2028 "q" \\ \n',
        "n": 10**4000,
        "f": -0.0,
        "k€y": {"ключ": ["值"]},
        "e": [],
        "o": {},
    }
    policy = VarsPolicy()
    policy.check("i", fine)
    assert policy.decode("i", json.loads(json.dumps(policy.encode("i", fine)))) == fine


# -- reading stored JSON that cannot be walked ------------------------------------------
def test_stored_vars_nested_too_deeply_raise_snapshot_error_naming_the_instance() -> None:
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(SnapshotError, match="'old-9'"):
        VarsPolicy().decode("old-9", {"v": deep})


@pytest.mark.parametrize(
    "text",
    [
        '{"vars": {"v": ' + "[" * 5000 + "]" * 5000 + "}}",
        '{"vars": {"v": ' + '{"a":' * 5000 + "1" + "}" * 5000 + "}}",
        '{"vars": {"v": ' + "9" * 5000 + "}}",
    ],
)
def test_snapshots_with_json_too_deep_or_too_big_raise_snapshot_error(text: str) -> None:
    with pytest.raises(SnapshotError):
        FlowContext.from_json(text)


def test_a_datetime_whose_offset_has_microseconds_keeps_its_instant() -> None:
    """``fromisoformat`` drops an offset's microseconds: such a value is stored in UTC."""
    from datetime import timedelta, timezone

    value = datetime(2026, 1, 1, tzinfo=timezone(timedelta(microseconds=7)))
    assert codec.decode(json.loads(json.dumps(codec.encode(value)))) == value
    restored = FlowContext.from_json(FlowContext.of("i-1", {"v": value}).to_json())
    assert restored.get("v") == value
    seconds = datetime(2026, 1, 1, tzinfo=timezone(timedelta(seconds=7)))  # kept as written
    assert codec.decode(codec.encode(seconds)).utcoffset() == timedelta(seconds=7)


@pytest.mark.parametrize(
    "text",
    [
        '{"vars": {"instanceId": "\\ud800"}}',
        '{"trace": {"rootGraphId": "g\\udc00"}}',
        '{"trace": {"last": {"g": {"id": "n\\ud800"}}}}',
        '{"trace": {"last": {"g": {"id": "n", "graphId": "\\udfff"}}}}',
        '{"trace": {"last": {"g": {"id": "n", "title": "\\ud800' + "x" * 300_000 + '"}}}}',
    ],
    ids=["instance id", "root graph id", "node id", "graph id", "long title"],
)
def test_a_snapshot_whose_ids_or_trace_hold_a_lone_surrogate_is_refused(text: str) -> None:
    """Variables holding a lone surrogate are left out of a snapshot; the instance id and the
    trace were taken unchecked, written back as text no database stores (or, past a quarter
    of the size limit, failed with a bare UnicodeEncodeError)."""
    with pytest.raises(SnapshotError, match="lone surrogate"):
        FlowContext.from_json(text)


def test_a_context_whose_instance_id_holds_a_lone_surrogate_has_no_snapshot() -> None:
    for data in ({}, {"a": "x" * 300_000}):
        with pytest.raises(SnapshotError, match="instance id"):
            FlowContext.of("\ud800", data).to_json()


@pytest.mark.parametrize("instance_id", [object(), 5, b"x"], ids=["object", "int", "bytes"])
def test_a_context_whose_instance_id_is_no_string_has_no_snapshot(instance_id: Any) -> None:
    """It failed with a bare TypeError (or wrote ``"instanceId": 5``)."""
    with pytest.raises(SnapshotError, match="instance id must be a string"):
        FlowContext.of(instance_id).to_json()
