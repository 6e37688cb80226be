"""Fuzzing the loader: whatever the text, the only error that escapes is GraphDefinitionError."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flow.errors import GraphDefinitionError
from flow.graph import Graph

VALID: dict[str, Any] = {
    "id": "oa",
    "title": "OA",
    "meta": {"owner": "hr"},
    "layout": [
        {"id": "s", "type": "start", "link": "apply"},
        {"id": "apply", "title": "Apply", "meta": {"actor": "employee"}, "task": "x = 1"},
        {
            "id": "gw",
            "type": "exclusive",
            "link": [{"nextId": "m", "when": "amount < 5000", "priority": 1}, "d"],
        },
        {"id": "m", "when": "x > 0", "link": "loop"},
        {"id": "d", "link": {"nextId": "loop", "condition": "y"}},
        {"id": "loop", "type": "loop", "meta": {"$for": "i", "$in": "1...3"}},
        {"id": "e", "type": "end"},
    ],
}
FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_text = st.text(max_size=12)
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | _text
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)
_keys = st.sampled_from(
    ["id", "title", "type", "meta", "when", "task", "link", "nextId", "priority", "condition"]
)


def load_both_ways(text: str) -> None:
    """Load lenient and strict; anything but GraphDefinitionError fails the test."""
    for strict in (False, True):
        try:
            graph = Graph.from_text(text, strict=strict)
        except GraphDefinitionError:
            continue
        graph.validate()


@st.composite
def mutated_documents(draw: st.DrawFn) -> Any:
    """The valid graph with a few random edits: keys dropped, values replaced by anything."""
    document: Any = json.loads(json.dumps(VALID))
    for _ in range(draw(st.integers(1, 4))):
        target = document
        path = draw(st.lists(st.integers(0, 8), max_size=3))
        for step in path:
            children = list(target.values()) if isinstance(target, dict) else target
            containers = (
                [c for c in children if isinstance(c, dict | list)]
                if isinstance(children, list)
                else []
            )
            if not containers:
                break
            target = containers[step % len(containers)]
        if isinstance(target, dict) and target:
            key = draw(st.sampled_from(sorted(target)) | _keys)
            if draw(st.booleans()):
                target.pop(key, None)
            else:
                target[key] = draw(_values)
        elif isinstance(target, list):
            target.append(draw(_values))
    return document


@FAST
@given(document=_values, as_yaml=st.booleans())
def test_random_documents_fail_only_with_graph_definition_error(
    document: Any, as_yaml: bool
) -> None:
    try:
        text = yaml.safe_dump(document) if as_yaml else json.dumps(document)
    except (ValueError, yaml.YAMLError):
        return
    load_both_ways(text)


@FAST
@given(document=mutated_documents(), as_yaml=st.booleans())
def test_mutated_graphs_fail_only_with_graph_definition_error(document: Any, as_yaml: bool) -> None:
    text = yaml.safe_dump(document, allow_unicode=True) if as_yaml else json.dumps(document)
    load_both_ways(text)


@FAST
@given(text=st.text(max_size=200))
def test_random_text_fails_only_with_graph_definition_error(text: str) -> None:
    load_both_ways(text)


@FAST
@given(cut=st.integers(0, 2000), as_yaml=st.booleans())
def test_truncated_graph_text_fails_only_with_graph_definition_error(
    cut: int, as_yaml: bool
) -> None:
    full = yaml.safe_dump(VALID) if as_yaml else json.dumps(VALID)
    load_both_ways(full[: cut % (len(full) + 1)])


@FAST
@given(
    depth=st.integers(1, 5000),
    opener=st.sampled_from(["[", "{a: ", '{"a": ', "- "]),
    where=st.sampled_from(["id", "layout", "meta", "link"]),
)
def test_deep_nesting_fails_only_with_graph_definition_error(
    depth: int, opener: str, where: str
) -> None:
    nested = opener * depth
    load_both_ways(f"id: g\n{where}: {nested}")
    load_both_ways('{"id": "g", "' + where + '": ' + nested)


@FAST
@given(
    char=st.characters(),
    position=st.integers(0, 2000),
)
def test_one_character_inserted_fails_only_with_graph_definition_error(
    char: str, position: int
) -> None:
    full = yaml.safe_dump(VALID)
    at = position % (len(full) + 1)
    load_both_ways(full[:at] + char + full[at:])


def test_the_valid_fuzz_seed_loads_without_errors() -> None:
    assert [p for p in Graph.from_dict(VALID).validate() if p.severity == "error"] == []
