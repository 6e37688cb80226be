"""The column limits flow_sqla checks before any SQL (no database needed)."""

from __future__ import annotations

import pytest

from flow.graph import Graph
from flow.workflow import InvalidInstanceIdError
from flow_sqla import UnstorableGraphError, UnstorableValueError
from flow_sqla._limits import (
    MESSAGE_MAX_BYTES,
    GraphChecks,
    check_id,
    check_instance_id,
    check_message,
    check_readable,
)


@pytest.mark.parametrize("value", ["a" * 64, "é" * 64, "😀" * 64, "inv-7 "])
def test_ids_up_to_64_characters_of_any_script_fit(value: str) -> None:
    assert check_id(value, "node id") == value


@pytest.mark.parametrize("value", ["a" * 65, "😀" * 65])
def test_ids_over_64_characters_are_rejected_with_their_length(value: str) -> None:
    with pytest.raises(UnstorableValueError, match="65 characters") as caught:
        check_id(value, "actor", instance_id="i-1")
    assert (caught.value.field, caught.value.instance_id) == ("actor", "i-1")
    assert len(str(caught.value)) < 300  # the value is shown cut, not whole


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb", "x" * 10 + "\udc80"])
def test_lone_surrogates_are_rejected_with_their_position(value: str) -> None:
    with pytest.raises(UnstorableValueError, match=r"surrogate .* at position"):
        check_id(value, "auditor")
    with pytest.raises(UnstorableValueError, match="surrogate"):
        check_readable(value, "assignee")


@pytest.mark.parametrize("value", ["", " ", "\t\n", "\u3000"])
def test_empty_or_blank_instance_ids_are_invalid(value: str) -> None:
    with pytest.raises(InvalidInstanceIdError):
        check_instance_id(value)


def test_messages_are_measured_in_utf8_bytes() -> None:
    assert check_message("a" * MESSAGE_MAX_BYTES, "i") is not None
    assert check_message("€" * (MESSAGE_MAX_BYTES // 3), "i") is not None
    with pytest.raises(UnstorableValueError, match="65536 UTF-8 bytes"):
        check_message("a" * (MESSAGE_MAX_BYTES + 1), "i")
    with pytest.raises(UnstorableValueError, match="65538 UTF-8 bytes"):
        check_message("€" * (MESSAGE_MAX_BYTES // 3 + 1), "i")
    with pytest.raises(UnstorableValueError, match="surrogate"):
        check_message("ok \ud83d", "i")
    assert check_message(None, "i") is None


def _graph(graph_id: str, *node_ids: str) -> Graph:
    layout = [{"id": n, "link": nxt} for n, nxt in zip(node_ids, [*node_ids[1:], "e"], strict=True)]
    return Graph.from_dict(
        {
            "id": graph_id,
            "layout": [
                {"id": "s", "type": "start", "link": node_ids[0]},
                *layout,
                {"id": "e", "type": "end"},
            ],
        }
    )


def test_a_graph_check_lists_every_id_that_does_not_fit() -> None:
    graph = _graph("g" * 70, "ok", "n" * 65)  # lone surrogates: the loader refuses them
    with pytest.raises(UnstorableGraphError) as caught:
        GraphChecks().check(graph)
    problems = caught.value.problems
    assert len(problems) == 2
    assert any("graph id" in p and "70 characters" in p for p in problems)
    assert any("node id" in p and "65 characters" in p for p in problems)


def test_a_storable_graph_is_checked_once() -> None:
    checks, graph = GraphChecks(), _graph("g", "a", "b")
    checks.check(graph)
    checks.check(graph)
    assert checks._ok == {id(graph): graph}
