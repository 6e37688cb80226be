"""Which context variables flow_sqla stores, and how (no database needed)."""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal

import pytest

from flow.context import FlowContext, NonSerializable
from flow.errors import SnapshotError
from flow_sqla._rows import BoundedMap, parse_states
from flow_sqla._vars import VarsPolicy


class Handle(NonSerializable):
    pass


def test_identity_keys_and_the_context_itself_are_never_stored() -> None:
    ctx = FlowContext.of("i", {"actor": "a", "auditor": "b", "creator": "c", "days": 3})
    assert VarsPolicy().encode("i", ctx.data) == {"days": 3}


def test_identity_keys_are_configurable() -> None:
    data = {"actor": "a", "tenant": "t", "days": 3}
    assert VarsPolicy(["tenant"]).encode("i", data) == {"actor": "a", "days": 3}


def test_opaque_objects_and_non_serializable_values_are_left_out() -> None:
    data = {"service": object(), "handle": Handle(), "fn": len, "days": 3}
    assert VarsPolicy().encode("i", data) == {"days": 3}


@pytest.mark.parametrize("bad", [{1}, frozenset(), b"x", bytearray(b"x"), float("inf"), {1: 2}])
def test_data_the_codec_cannot_represent_is_rejected_naming_instance_and_key(bad: object) -> None:
    with pytest.raises(SnapshotError, match=r"'files'.*'i-9'"):
        VarsPolicy().encode("i-9", {"files": bad})


@pytest.mark.parametrize("bad", [{1}, b"x", float("nan"), {"k": {3}}, [1, float("inf")]])
def test_the_state_change_check_rejects_what_encode_rejects(bad: object) -> None:
    policy = VarsPolicy()
    fine = {"days": 3, "rate": 1.5, "handle": Handle(), "service": object(), "tags": ["a"]}
    policy.check("i-8", fine)  # learns the types it has seen, rejecting nothing
    with pytest.raises(SnapshotError, match=r"'files'.*'i-8'"):
        policy.check("i-8", {**fine, "files": bad})


def test_codec_values_are_tagged_and_decoded_back() -> None:
    values = {"d": date(2026, 1, 2), "p": Decimal("1.50"), "u": uuid.UUID(int=7)}
    policy = VarsPolicy()
    assert policy.decode("i", policy.encode("i", values)) == values


def test_stored_identity_keys_are_ignored_on_read() -> None:
    assert VarsPolicy().decode("i", {"actor": "old", "days": 3}) == {"days": 3}


def test_stored_vars_that_are_not_an_object_raise_snapshot_error() -> None:
    with pytest.raises(SnapshotError, match="'i-3'"):
        VarsPolicy().decode("i-3", [1, 2])


@pytest.mark.parametrize("states", [[1001], {"g:n": "1001"}, {"g:n": True}, "x"])
def test_malformed_states_raise_snapshot_error(states: object) -> None:
    with pytest.raises(SnapshotError, match="'i-4'"):
        parse_states("i-4", states)


def test_bounded_map_forgets_the_least_recently_used_entry() -> None:
    cache: BoundedMap[int] = BoundedMap(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert ("a" in cache, "b" in cache, "c" in cache, len(cache)) == (True, False, True, 2)


def test_a_value_read_before_a_pop_is_not_put_back_after_it() -> None:
    cache: BoundedMap[int] = BoundedMap(2)
    stamp = cache.stamp("a")
    cache.pop("a")  # another operation changed the row meanwhile
    cache.put_unless_popped("a", 1, stamp)
    assert "a" not in cache
    stamp = cache.stamp("a")
    cache.pop("b")  # another key's pop does not matter
    cache.put_unless_popped("a", 2, stamp)
    assert cache.get("a") == 2
    for key in ("c", "d", "e"):  # older pops forgotten: a put may be skipped, never wrong
        cache.pop(key)
    stamp = cache.stamp("z")
    cache.put_unless_popped("z", 3, stamp)
    assert cache.get("z") == 3
