"""Hostile fuzzing of the graph loader and the walks (issue 11 items 4 and 9), bounded for CI.

Whatever the text — YAML tags, anchors and aliases, deep or wide nesting, random bytes of YAML
syntax, JSON of any shape — loading raises nothing but GraphDefinitionError, and a graph that
loads can be validated, exported and walked (engine with ``steps=``, workflow with a small
``max_steps``) raising nothing but FlowError, and never hanging.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flow import FlowContext, FlowEngine, FlowError, Graph, GraphDefinitionError
from flow.workflow import ActorStateController, NotBlockStateController, WorkflowExecutor

BOUNDED = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

TAGS = [
    "!!timestamp",
    "!!bool",
    "!!int",
    "!!float",
    "!!binary",
    "!!null",
    "!!str",
    "!!set",
    "!!omap",
    "!!pairs",
    "!!map",
    "!!seq",
    "!!merge",
    "!!value",
    "!!python/object:os.system",
    "!!python/name:os.system",
    "!!python/tuple",
    "!!python/object/apply:os.system",
    "!unknown",
    "!<tag:yaml.org,2002:str>",
    "!<tag:example.com,2000:x>",
]
SCALARS = [
    "x",
    "maybe",
    "2020-01-01",
    "2020-13-45",
    "12:30:00",
    "0x1F",
    "0o17",
    "1e400",
    ".nan",
    "-.inf",
    "~",
    "null",
    "yes",
    "'quoted'",
    '"\\ud800"',
    "aGk=",
    "@@@",
    "9" * 5000,
    "<<",
    "=",
    "''",
]
KEYS = ["id", "title", "type", "meta", "layout", "nodes", "link", "nextId", "when", "task"]
KEYS += ["priority", "condition", "driver", "$for", "$in", "<<", "1", "~", "true", "[a]"]


@st.composite
def yaml_values(draw: st.DrawFn, depth: int = 0) -> str:
    """A YAML value as text: tagged or plain scalars, anchors, aliases, flow collections."""
    kind = draw(st.integers(0, 6 if depth < 4 else 2))
    if kind == 0:
        return draw(st.sampled_from(SCALARS))
    if kind == 1:
        return f"{draw(st.sampled_from(TAGS))} {draw(st.sampled_from(SCALARS))}"
    if kind == 2:
        return f"*a{draw(st.integers(0, 3))}"
    if kind == 3:
        inner = draw(st.lists(yaml_values(depth + 1), max_size=4))
        return "[" + ", ".join(inner) + "]"
    if kind == 4:
        pairs = draw(st.lists(st.tuples(st.sampled_from(KEYS), yaml_values(depth + 1)), max_size=4))
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    if kind == 5:
        return f"&a{draw(st.integers(0, 3))} {draw(yaml_values(depth + 1))}"
    return f"{draw(st.sampled_from(TAGS))} {draw(yaml_values(depth + 1))}"


@st.composite
def yaml_documents(draw: st.DrawFn) -> str:
    """A graph-shaped YAML document whose values are hostile."""
    lines = [f"id: {draw(st.sampled_from(['g', *SCALARS[:6]]))}"]
    for index in range(draw(st.integers(0, 3))):
        lines.append(f"anchor{index}: &a{index} {draw(yaml_values())}")
    lines.append(f"meta: {draw(yaml_values())}")
    nodes = []
    for _ in range(draw(st.integers(0, 5))):
        pairs = draw(st.lists(st.tuples(st.sampled_from(KEYS), yaml_values(1)), max_size=5))
        nodes.append("{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}")
    lines.append("layout: [" + ", ".join(nodes) + "]")
    return "\n".join(lines) + "\n"


@st.composite
def alias_bombs(draw: st.DrawFn) -> str:
    """Anchors each referring several times to the previous one, used somewhere."""
    width = draw(st.integers(2, 12))
    levels = draw(st.integers(1, 12))
    lines = ["id: g", "x0: &a0 [" + ", ".join(["v"] * width) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"x{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    where = draw(st.sampled_from(["meta: {k: *aN}", "title: *aN", "layout: *aN", "meta: *aN"]))
    lines.append(where.replace("N", str(levels)))
    lines.append("nodes: [{type: start, link: *aN}]".replace("N", str(levels)))
    return "\n".join(lines) + "\n"


def check_text(text: str) -> None:
    """Load (lenient and strict): only GraphDefinitionError; then use the graph."""
    for strict in (False, True):
        try:
            graph = Graph.from_text(text, strict=strict)
        except GraphDefinitionError:
            continue
        use(graph)


def use(graph: Graph) -> None:
    """Validate, export and walk a loaded graph: only FlowError may escape."""
    graph.validate()
    graph.to_mermaid()
    for export in (graph.to_dict, graph.to_json, graph.to_yaml):
        with contextlib.suppress(GraphDefinitionError):
            export()
    engine = FlowEngine()
    engine.load(graph)
    for run in (
        lambda: engine.eval(graph, FlowContext.of("f"), steps=200),
        lambda: WorkflowExecutor(engine, NotBlockStateController(), max_steps=500).claim_task(
            graph, FlowContext.of("w", {"xs": itertools.count()})
        ),
        lambda: WorkflowExecutor(engine, ActorStateController(), max_steps=500).find_next_tasks(
            graph, FlowContext.of("a", {"actor": "x"})
        ),
    ):
        with contextlib.suppress(FlowError):
            run()


@BOUNDED
@given(text=yaml_documents())
def test_hostile_yaml_documents_raise_only_library_errors(text: str) -> None:
    check_text(text)


@BOUNDED
@given(text=alias_bombs())
def test_alias_bombs_are_refused_or_small(text: str) -> None:
    check_text(text)


@BOUNDED
@given(text=st.text(alphabet="{}[]:,-&*!|>'\" \n\t#?%@`abcdeilnoprty019.<=~\\", max_size=300))
def test_random_yaml_syntax_raises_only_library_errors(text: str) -> None:
    check_text("id: g\n" + text)
    check_text(text)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner),
    max_leaves=30,
)


@BOUNDED
@given(document=_json_values, depth=st.integers(0, 3000))
def test_json_of_any_shape_and_depth_raises_only_library_errors(document: Any, depth: int) -> None:
    nested = "[" * depth + json.dumps(document) + "]" * depth
    check_text('{"id": "g", "meta": {"x": ' + nested + '}, "layout": [{"type": "start"}]}')
    check_text(json.dumps({"id": "g", "layout": document}))


_node_types = st.sampled_from(["start", "end", "activity", "exclusive", "inclusive", "parallel"])


@st.composite
def graph_shapes(draw: st.DrawFn) -> dict[str, Any]:
    """Graphs of random structure — cycles, self links, splits, joins, dangling links, loops
    (over an endless iterator in the workflow runs) — with harmless tasks and conditions."""
    count = draw(st.integers(1, 12))
    ids = [f"n{i}" for i in range(count)]
    layout = []
    for node_id in ids:
        node: dict[str, Any] = {"id": node_id, "type": draw(_node_types)}
        if draw(st.integers(0, 5)) == 0:
            node["type"] = "loop"
            node["meta"] = {"$for": "i", "$in": draw(st.sampled_from(["0:30:1", "xs"]))}
        if draw(st.booleans()):
            node["meta"] = {**node.get("meta", {}), "actor": draw(st.sampled_from(["x", "y"]))}
        targets = draw(st.lists(st.sampled_from([*ids, "missing"]), max_size=3))
        node["link"] = [
            {"nextId": t, "when": draw(st.sampled_from([None, "true", "false", "i > 2"]))}
            for t in targets
        ]
        if draw(st.booleans()):
            node["task"] = draw(st.sampled_from(["c = (c or 0) + 1", "context.stop()", "x = 1"]))
        layout.append(node)
    return {"id": "shape", "layout": layout}


@BOUNDED
@given(document=graph_shapes())
def test_graphs_of_any_shape_walk_without_hanging_or_untyped_errors(
    document: dict[str, Any],
) -> None:
    try:
        graph = Graph.from_dict(document)
    except GraphDefinitionError:
        return
    use(graph)
