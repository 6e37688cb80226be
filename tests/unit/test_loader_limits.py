"""Hostile graph text: every input fails fast with GraphDefinitionError (issue 11 item 9).

YAML tags that do not construct, alias bombs, recursive aliases, deep nesting, huge texts and ids
that are not valid Unicode are refused at load time, naming the graph where it is known.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from flow import loader
from flow.errors import FlowError, GraphDefinitionError
from flow.graph import Graph
from flow.spec import GraphSpec

TAIL = "layout: [{type: start}, {type: end}]\n"


# -- YAML tags -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        "!!timestamp x",
        "!!timestamp 2020-13-45",
        "!!bool maybe",
        "!!int abc",
        "!!float abc",
        "!!binary '@@@'",
        "!!null x",
        "!!python/object:os.system x",
        "!!python/name:os.system ''",
        "!!python/tuple [1]",
        "!!foo bar",
        "!unknown {a: 1}",
        "!!map [1, 2]",
        "!!seq {a: 1}",
        "!!omap {a: 1}",
        "!!pairs 5",
        "!!set [a]",
        "!!str [a]",
        "{? [1, 2] : x}",
        "{? {a: 1} : x}",
    ],
)
@pytest.mark.parametrize("where", ["id: VALUE\n" + TAIL, "id: g\nmeta: {a: VALUE}\n" + TAIL])
def test_bad_yaml_tags_are_graph_definition_errors(value: str, where: str) -> None:
    text = where.replace("VALUE", value)
    try:
        Graph.from_text(text)
    except GraphDefinitionError:
        return
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__} escaped: {exc}")


@pytest.mark.parametrize(
    "text",
    [
        "id: !!timestamp 2020-01-01\n" + TAIL,
        "id: !!binary aGk=\n" + TAIL,
        "id: !!set {a}\n" + TAIL,
        "id: g\nmeta: !!set {a}\n" + TAIL,
        "id: g\nlayout: !!pairs [a: 1]\n",
        "id: g\nlayout: [{id: !!timestamp 2020-01-01}]\n",
        "id: g\nlayout: [{id: a, type: start, link: {nextId: !!binary aGk=}}]\n",
        "id: g\nlayout: [{id: a, type: !!set {start}}]\n",
        "id: g\nlayout: [{id: a, type: start, task: !!timestamp 2020-01-01}]\n",
    ],
)
def test_tags_in_the_wrong_place_name_the_graph_or_node(text: str) -> None:
    with pytest.raises(GraphDefinitionError, match="must be"):
        Graph.from_text(text)


def test_valid_tags_in_meta_load() -> None:
    graph = Graph.from_text(
        "id: g\nmeta: {d: !!timestamp 2020-01-01, b: !!binary aGk=, s: !!set {x}}\n" + TAIL
    )
    assert graph.meta["b"] == b"hi" and graph.meta["s"] == frozenset({"x"})


@pytest.mark.parametrize(
    "key",
    ["1", "~", "true", "2020-01-01", "1.5", "!!binary aGk="],
)
def test_non_string_keys_load(key: str) -> None:
    graph = Graph.from_text(f"id: g\nmeta: {{{key}: x, k: {{{key}: y}}}}\n" + TAIL)
    assert len(graph.meta) == 2


# -- aliases -------------------------------------------------------------------------------------
def _bomb(levels: int, width: int = 9, where: str = "meta") -> str:
    lines = ["id: g", "anchors:", "  a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"  a{level}: &a{level} [{refs}]")
    lines.append(f"{where}: {{x: *a{levels}}}" if where == "meta" else f"{where}: *a{levels}")
    return "\n".join(lines) + "\n" + TAIL


@pytest.mark.parametrize("where", ["meta", "title", "layout"])
def test_alias_bomb_is_refused_at_load_time_quickly(where: str) -> None:
    started = time.perf_counter()
    with pytest.raises(GraphDefinitionError, match="MAX_VALUES") as caught:
        Graph.from_text(_bomb(9, where=where))
    assert time.perf_counter() - started < 1
    assert caught.value.graph_id == "g"


def test_alias_bomb_in_links_is_refused() -> None:
    links = ", ".join(["e"] * 1000)
    nodes = ", ".join(["{type: start, link: *l}"] * 1100)
    text = f"id: g\nx: &l [{links}]\nlayout: [{nodes}, {{id: e, type: end}}]\n"
    with pytest.raises(GraphDefinitionError, match="MAX_VALUES"):
        Graph.from_text(text)


def test_aliases_of_one_long_string_are_refused_before_they_expand() -> None:
    """Few values (one string used 2,000 times), but 2 GB of text once expanded — as the
    first SQL operation would have encoded it."""
    long_text = "x" * 1_000_000
    uses = ", ".join(["*s"] * 2000)
    text = f"id: g\nmeta: {{big: &s '{long_text}', copies: [{uses}]}}\n" + TAIL
    with pytest.raises(GraphDefinitionError, match="one value per 32 characters"):
        Graph.from_text(text)
    one_use = f"id: g\nmeta: {{big: &s '{long_text}', copies: [*s]}}\n" + TAIL
    assert Graph.from_text(one_use).meta["copies"] == [long_text]


def test_a_yaml_text_of_too_many_nodes_is_refused_before_they_are_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Building a YAML node costs microseconds of Python (a million small mappings took most
    of a minute); the C parser counts them first. JSON text is not counted."""
    monkeypatch.setattr(loader, "MAX_YAML_NODES", 1_000)
    monkeypatch.setattr(loader, "_COUNT_NODES_ABOVE", 0)
    items = ", ".join(["{a: 1}"] * 600)  # 1,200 nodes and more
    with pytest.raises(GraphDefinitionError, match="MAX_YAML_NODES"):
        Graph.from_text(f"id: g\nmeta: {{x: [{items}]}}\n" + TAIL)
    few = ", ".join(["{a: 1}"] * 100)
    assert len(Graph.from_text(f"id: g\nmeta: {{x: [{few}]}}\n" + TAIL).meta["x"]) == 100
    as_json = {"id": "g", "meta": {"x": [{"a": 1}] * 600}, "layout": [{"type": "start"}]}
    assert len(Graph.from_text(json.dumps(as_json)).meta["x"]) == 600


def test_json_text_after_a_byte_order_mark_is_read_as_json() -> None:
    """A BOM before JSON (as Windows editors save it) once sent the text to the YAML loader,
    which refused a file over 256 KiB of more than 100,000 values as too many YAML nodes."""
    document = {"id": "g", "meta": {"x": [1] * 150_000}, "layout": [{"type": "start"}]}
    text = "\ufeff" + json.dumps(document)
    assert len(text) > 256 * 1024
    assert len(Graph.from_text(text).meta["x"]) == 150_000


def test_a_long_yaml_text_only_the_slow_loader_reads_is_refused_before_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """solon-flow's ``link:[e]`` (no space after the colon) is read by the pure-Python loader
    alone, at some 40 µs a node even to count them: over the size where nodes are counted,
    such a text is refused at once; a short one still loads."""
    monkeypatch.setattr(loader, "_COUNT_NODES_ABOVE", 1_000)
    short = "id: g\nlayout:\n  - {id: s, type: start, link:[e]}\n  - {id: e, type: end}\n"
    assert Graph.from_text(short).nodes["s"].next_links[0].next_id == "e"
    padded = short + "meta: {note: " + repr("x" * 1_000) + "}\n"
    with pytest.raises(GraphDefinitionError, match="'key: value'") as caught:
        Graph.from_text(padded)
    assert "line 3" in str(caught.value)


def test_a_merge_key_bomb_is_refused_before_it_expands() -> None:
    """Merging one 3,000-key mapping into 3,000 mappings is 9 million pairs for PyYAML to copy
    (twice the size took a minute and 1.5 GB): measured on the YAML nodes, it is refused before
    any is copied, naming the graph. The same mapping merged a few times loads."""
    head = "id: g\nmeta:\n  b: &b\n" + "".join(f"    k{i}: 1\n" for i in range(3_000)) + "  z:\n"
    started = time.perf_counter()
    with pytest.raises(GraphDefinitionError, match="MAX_VALUES") as caught:
        Graph.from_text(head + "  - {<<: *b}\n" * 3_000 + TAIL)
    assert time.perf_counter() - started < 1
    assert caught.value.graph_id == "g"
    few = Graph.from_text(head + "  - {<<: *b, k0: 2}\n" * 3 + TAIL).meta["z"]
    assert [(len(m), m["k0"], m["k1"]) for m in few] == [(3_000, 2, 1)] * 3


def test_merges_that_double_at_each_level_are_refused_though_their_keys_repeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``<<: [*a1, *a1]`` copies a1's pairs twice: each level doubles the pairs PyYAML copies
    (40 levels never end), while the built mappings keep the same few keys."""
    monkeypatch.setattr(loader, "MAX_VALUES", 10_000)
    lines = ["id: g", "meta:", "  a0: &a0 {k: 1, j: 2}"]
    lines += [f"  a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], x{i}: 1}}" for i in range(1, 16)]
    with pytest.raises(GraphDefinitionError, match="more than 10000 values"):
        Graph.from_text("\n".join(lines) + "\n" + TAIL)
    graph = Graph.from_text("\n".join(lines[:5]) + "\n" + TAIL)
    assert dict(graph.meta["a2"]) == {"k": 1, "j": 2, "x1": 1, "x2": 1}


def test_small_aliases_still_load() -> None:
    graph = Graph.from_text(_bomb(2, width=3))
    assert graph.meta["x"] == [[["lol"] * 3] * 3] * 3


@pytest.mark.parametrize(
    "text",
    [
        "id: g\nmeta: &m {a: *m}\n" + TAIL,
        "id: g\nmeta: {a: &l [*l]}\n" + TAIL,
        "id: g\nlayout: &l [{type: start, meta: {x: *l}}]\n",
        "id: g\nlayout: [&n {type: start, link: [{nextId: a, meta: {n: *n}}]}]\n",
        "id: g\nmeta: &m {a: 1, <<: *m}\n" + TAIL,
    ],
)
def test_recursive_aliases_are_refused(text: str) -> None:
    with pytest.raises(GraphDefinitionError, match="refers to itself"):
        Graph.from_text(text)


def test_value_limit_is_read_at_each_load(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "id: g\nmeta: {a: [1, 2, 3, 4, 5, 6, 7, 8]}\n" + TAIL
    Graph.from_text(text)
    monkeypatch.setattr(loader, "MAX_VALUES", 10)
    with pytest.raises(GraphDefinitionError, match="more than 10 values"):
        Graph.from_text(text)


# -- nesting and size ----------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [65, 200, 900, 5_000, 50_000])
@pytest.mark.parametrize("opener", ["[", "{a: ", '{"a": '])
def test_deep_nesting_is_a_typed_error(depth: int, opener: str) -> None:
    closer = {"[": "]", "{a: ": "}", '{"a": ': "}"}[opener]
    nested = opener * depth + "1" + closer * depth
    for text in (
        f"id: g\nmeta: {{x: {nested}}}\n" + TAIL,
        '{"id": "g", "meta": {"x": ' + nested + '}, "layout": [{"type": "start"}]}',
    ):
        with pytest.raises(GraphDefinitionError):
            Graph.from_text(text)


def test_nesting_up_to_the_limit_loads() -> None:
    nested = "[" * 60 + "1" + "]" * 60  # document level 1, meta 2, x 3: 63 levels in all
    graph = Graph.from_text(f"id: g\nmeta: {{x: {nested}}}\n" + TAIL)
    value = graph.meta["x"]
    for _ in range(59):
        value = value[0]
    assert value == [1]


def test_deep_meta_built_in_code_is_a_typed_error() -> None:
    nested: list[object] = []
    for _ in range(5_000):
        nested = [nested]
    spec = GraphSpec("g")
    spec.add_start("s", meta={"deep": nested})
    with pytest.raises(GraphDefinitionError, match="MAX_DEPTH") as caught:
        spec.create()
    assert "node 's'" in str(caught.value)


def test_self_referencing_meta_built_in_code_is_a_typed_error() -> None:
    loop: list[object] = []
    loop.append(loop)
    spec = GraphSpec("g")
    spec.meta_put("loop", loop)
    spec.add_start("s")
    with pytest.raises(GraphDefinitionError, match="refers to itself"):
        spec.create()


def test_shared_meta_built_in_code_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_VALUES", 1_000)
    level: list[object] = ["x"] * 10
    for _ in range(5):
        level = [level] * 10
    spec = GraphSpec("g")
    spec.add_start("s", meta={"bomb": level})
    with pytest.raises(GraphDefinitionError, match="MAX_VALUES"):
        spec.create()


def test_huge_text_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_TEXT_CHARS", 1_000)
    text = "id: g\nmeta: {a: '" + "x" * 2_000 + "'}\n" + TAIL
    with pytest.raises(GraphDefinitionError, match="MAX_TEXT_CHARS"):
        Graph.from_text(text)
    with pytest.raises(GraphDefinitionError, match="MAX_TEXT_CHARS"):
        Graph.from_text(json.dumps({"id": "g", "pad": "x" * 2_000}))


def test_huge_file_is_refused_before_reading(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(loader, "MAX_TEXT_CHARS", 100)
    path = tmp_path / "big.yml"
    path.write_text("id: g\nmeta: {a: '" + "x" * 1_000 + "'}\n" + TAIL)
    with pytest.raises(GraphDefinitionError, match="MAX_TEXT_CHARS"):
        Graph.from_file(path)


def test_default_limits() -> None:
    assert (loader.MAX_TEXT_CHARS, loader.MAX_DEPTH, loader.MAX_VALUES) == (
        8 * 1024 * 1024,
        64,
        1_000_000,
    )


# -- ids -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "document",
    [
        {"id": "\ud800", "layout": [{"type": "start"}]},
        {"id": "g", "layout": [{"id": "a\udfff", "type": "start"}]},
        {"id": "g", "layout": [{"id": "a", "type": "start", "link": "b\ud800"}]},
    ],
)
def test_ids_with_lone_surrogates_are_refused(document: dict[str, object]) -> None:
    with pytest.raises(GraphDefinitionError, match="lone surrogate") as caught:
        Graph.from_dict(document)
    assert "\\ud" in str(caught.value).encode("utf-8").decode()  # printable and loggable
    with pytest.raises(GraphDefinitionError, match="lone surrogate"):
        Graph.from_text(json.dumps(document))


def test_a_graph_id_with_a_colon_is_refused_so_no_two_nodes_share_a_state_key() -> None:
    """State keys are "<graph id>:<node id>": node "b:c" of graph "a" and node "c" of a graph
    "a:b" would both be "a:b:c", and one approval would count for both."""
    outer = Graph.from_dict({"id": "a", "layout": [{"id": "b:c", "type": "start"}]})
    assert "b:c" in outer.nodes  # node ids may hold ':'
    document = {"id": "a:b", "layout": [{"id": "c", "type": "start"}]}
    with pytest.raises(GraphDefinitionError, match="contains ':'") as caught:
        Graph.from_dict(document)
    assert caught.value.graph_id == "a:b"
    with pytest.raises(GraphDefinitionError, match="contains ':'"):
        Graph.from_text(json.dumps(document))


def test_duplicate_ids_and_missing_targets_are_typed_errors_in_strict_mode() -> None:
    text = json.dumps(
        {
            "id": "g",
            "layout": [
                {"id": "a", "type": "start", "link": "missing"},
                {"id": "a", "type": "start", "link": "b"},
                {"id": "b", "type": "end"},
            ],
        }
    )
    with pytest.raises(GraphDefinitionError) as caught:
        Graph.from_text(text, strict=True)
    assert any("defined 2 times" in p for p in caught.value.problems)
    assert caught.value.graph_id == "g"
    graph = Graph.from_text(text)  # lenient, as the reference: validate() reports both
    assert [p.severity for p in graph.validate()][:1] == ["error"]


def test_every_loader_error_is_a_flow_error() -> None:
    assert issubclass(GraphDefinitionError, FlowError)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_a_device_named_like_a_graph_file_is_refused_unread(tmp_path: Path) -> None:
    """A device has no size to check first and may never end: it is not read at all."""
    endless = tmp_path / "zero.yml"
    endless.symlink_to("/dev/zero")
    with pytest.raises(GraphDefinitionError, match="must be a regular file"):
        Graph.from_file(endless)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_a_named_pipe_named_like_a_graph_file_is_refused_without_waiting(tmp_path: Path) -> None:
    """Opening a pipe no one writes to blocked forever (the CLI hung on ``flow validate``)."""
    pipe = tmp_path / "graph.yml"
    os.mkfifo(pipe)
    with pytest.raises(GraphDefinitionError, match="must be a regular file"):
        Graph.from_file(pipe)


def test_a_directory_named_like_a_graph_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "graphs.yml"
    folder.mkdir()
    with pytest.raises(GraphDefinitionError, match=str(folder)):
        Graph.from_file(folder)


@pytest.mark.parametrize(
    "number",
    [
        "0x" + "f" * 5000,  # hexadecimal: no digit limit when parsed, 6,000 decimal digits
        "-0x" + "f" * 3600,
        '!!int "1:' + "59:" * 3000 + '59"',  # sexagesimal
    ],
)
def test_an_integer_too_long_to_write_as_text_is_refused_at_load(number: str) -> None:
    """YAML's other integer forms reach any size; such a graph could never be written back
    as YAML or JSON (Python's 4,300-digit limit), so it is refused when loaded, as the
    decimal form is."""
    text = f"id: g\nlayout:\n  - {{id: s, type: start, meta: {{n: {number}}}}}\n"
    with pytest.raises(GraphDefinitionError, match="more than 4,300 decimal digits"):
        Graph.from_text(text)


@pytest.mark.parametrize(
    "number", ["0x" + "f" * 5000, '!!int "1:' + "59:" * 3000 + '59"'], ids=["hex", "sexagesimal"]
)
def test_a_graph_id_too_long_to_write_as_text_is_refused_at_load(number: str) -> None:
    """The graph id is read before the rest of the document is measured: it was turned into
    text first and failed with a bare ValueError."""
    with pytest.raises(GraphDefinitionError, match="more than 4,300 decimal digits"):
        Graph.from_text(f"id: {number}\nlayout: [{{id: s, type: start}}]\n")
    with pytest.raises(GraphDefinitionError, match="more than 4,300 decimal digits"):
        Graph.from_dict({"id": 1 << 20_000, "layout": [{"id": "s", "type": "start"}]})


def test_the_digit_limit_is_the_one_the_process_set() -> None:
    """``sys.set_int_max_str_digits`` moves the limit both ways (it was fixed at 4,300, and
    a lower one let a bare ValueError out of the loader)."""
    hex_id = "0x" + "f" * 1000  # 1,205 decimal digits
    saved = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(640)
        for text in (f"id: {hex_id}\nlayout: []\n", f"id: g\nlayout: [{{id: {hex_id}}}]\n"):
            with pytest.raises(GraphDefinitionError, match="more than 640 decimal digits"):
                Graph.from_text(text)
        sys.set_int_max_str_digits(0)  # no limit
        text = f"id: {'0x' + 'f' * 4000}\nlayout: [{{id: s, type: start}}]\n"
        assert len(Graph.from_text(text).id) == 4817
    finally:
        sys.set_int_max_str_digits(saved)


def test_an_integer_of_4300_digits_loads_and_is_written_back() -> None:
    for number in ("9" * 4300, "-0x" + "f" * 3570):
        graph = Graph.from_text(
            f"id: g\nlayout:\n  - {{id: s, type: start, meta: {{n: {number}}}}}\n"
        )
        again = Graph.from_text(graph.to_yaml())
        assert again.get_node_or_throw("s").meta["n"] == graph.get_node_or_throw("s").meta["n"]


@pytest.mark.parametrize(("written", "graph_id"), [("123", "123"), ("true", "true"), ("g", "g")])
def test_a_document_refused_before_it_is_built_names_a_graph_whose_id_is_no_string(
    written: str, graph_id: str
) -> None:
    """The loader makes a number or boolean id the graph id; the refusal names it too."""
    with pytest.raises(GraphDefinitionError, match="refers to itself") as refused:
        Graph.from_text(f"id: {written}\nm: &a [*a]\n" + TAIL)
    assert refused.value.graph_id == graph_id
    assert f"graph {graph_id!r}" in str(refused.value)
