"""Mermaid and Graphviz DOT text: shapes, labels, escaping and state colours."""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from flow.graph import Graph
from flow.render import _MermaidIds, graph_to_dot, graph_to_mermaid
from flow.spec import GraphSpec

SNAPSHOTS = Path(__file__).parent / "snapshots"
OA_STATES = {"start": 1002, "apply": 1002, "gw": 1002, "manager": 1001, "director": 1003, "end": 0}


@pytest.fixture
def oa() -> Graph:
    return Graph.from_file(SNAPSHOTS / "oa.graph.yml")


def expected(name: str) -> str:
    return (SNAPSHOTS / name).read_text(encoding="utf-8")


def one_node(type_name: str, title: str = "T") -> Graph:
    return Graph.from_text(
        f"id: g\nlayout: [{{id: s, type: start}}, {{id: x, type: {type_name}, title: '{title}'}}]"
    )


# -- snapshots ------------------------------------------------------------------------------


def test_oa_mermaid_matches_snapshot(oa: Graph) -> None:
    assert graph_to_mermaid(oa) == expected("oa.mmd")


def test_oa_mermaid_with_states_matches_snapshot(oa: Graph) -> None:
    assert graph_to_mermaid(oa, OA_STATES) == expected("oa_states.mmd")


def test_oa_dot_matches_snapshot(oa: Graph) -> None:
    assert graph_to_dot(oa) == expected("oa.dot")


def test_oa_dot_with_states_matches_snapshot(oa: Graph) -> None:
    assert graph_to_dot(oa, OA_STATES) == expected("oa_states.dot")


def test_graph_to_mermaid_method_delegates(oa: Graph) -> None:
    assert oa.to_mermaid(OA_STATES) == graph_to_mermaid(oa, OA_STATES)


# -- mermaid --------------------------------------------------------------------------------


def test_mermaid_starts_with_flowchart(oa: Graph) -> None:
    assert oa.to_mermaid().startswith("flowchart TD\n")


@pytest.mark.parametrize(
    ("type_name", "line"),
    [
        ("start", 'n_x(["T"])'),
        ("end", 'n_x(["T"])'),
        ("activity", 'n_x["T"]'),
        ("exclusive", 'n_x{"T (exclusive)"}'),
        ("inclusive", 'n_x{"T (inclusive)"}'),
        ("parallel", 'n_x{"T (parallel)"}'),
        ("loop", 'n_x{{"T (loop)"}}'),
    ],
)
def test_mermaid_node_shape_shows_the_type(type_name: str, line: str) -> None:
    assert f"    {line}\n" in one_node(type_name).to_mermaid()


def test_mermaid_gateway_without_title_shows_its_type() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: s, type: start}, {id: x, type: exclusive}]")
    assert '    n_x{"exclusive"}\n' in g.to_mermaid()


def test_mermaid_activity_without_title_shows_its_id() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: s, type: start}, {id: x}]")
    assert '    n_x["x"]\n' in g.to_mermaid()


def test_mermaid_escapes_special_characters_in_labels() -> None:
    g = one_node("activity", 'a "q" <b> & c | #1 `x`')
    assert '    n_x["a #quot;q#quot; #lt;b#gt; #amp; c #124; #35;1 #96;x#96;"]\n' in g.to_mermaid()


def test_mermaid_escapes_the_percent_sign_so_no_label_holds_a_directive() -> None:
    """Mermaid reads ``%%{init: ...}%%`` anywhere, inside quoted labels too: a title could
    restyle the whole picture, or (an unclosed one) swallow the rest of it."""
    spec = GraphSpec("g")
    spec.add_start("s", title="Manager %%{init: {'theme':'dark'}}%% %%{x:")
    text = spec.create().to_mermaid()
    assert "%" not in text
    assert "#37;#37;{init: {'theme':'dark'}}#37;#37;" in text


def test_mermaid_ids_that_fold_alike_are_told_apart_in_linear_time() -> None:
    """Every id outside [A-Za-z0-9_] folds to the same base (one-character CJK ids all to
    ``n__``): each took a search of the suffixes from 2 — 70 s for 30,000 nodes."""
    layout = ", ".join(f"{{id: '{chr(0x4E00 + n)}'}}" for n in range(20_000))
    g = Graph.from_text(f"id: g\nlayout: [{{id: s, type: start}}, {layout}]")
    probes = _ProbeCountingSet()
    ids = _MermaidIds()
    ids._used = probes
    found = {ids.of(node_id) for node_id in g.nodes}
    assert len(found) == len(g.nodes)  # unique
    assert probes.probes < 3 * len(g.nodes)  # was about n * n / 2


class _ProbeCountingSet(set[str]):
    """A set counting membership tests (the ids' suffix search), not time."""

    probes = 0

    def __contains__(self, item: object) -> bool:
        self.probes += 1
        return super().__contains__(item)


def test_mermaid_folds_newlines_in_labels() -> None:
    spec = GraphSpec("g")
    spec.add_start("s", title="line one\nline two")
    assert '    n_s(["line one line two"])\n' in spec.create().to_mermaid()


def test_mermaid_ids_are_safe_and_unique() -> None:
    g = Graph.from_text(
        "id: g\nlayout: [{id: a-b, type: start}, {id: a_b}, {id: 'x y'}, {id: end}]"
    )
    lines = g.to_mermaid().splitlines()
    assert lines[1:5] == [
        '    n_a_b(["a-b"])',
        '    n_a_b_2["a_b"]',
        '    n_x_y["x y"]',
        '    n_end["end"]',
    ]


def test_mermaid_link_label_shows_title_and_condition() -> None:
    g = Graph.from_text(
        "id: g\nlayout:\n"
        "  - {id: s, type: start, link: {nextId: e, title: go, when: 'a > 1'}}\n"
        "  - {id: e}"
    )
    assert '    n_s -->|"go: a #gt; 1"| n_e\n' in g.to_mermaid()


def test_mermaid_marks_the_default_link_of_an_exclusive_gateway(oa: Graph) -> None:
    assert '    n_gw -->|"default"| n_director\n' in oa.to_mermaid()


def test_mermaid_shows_a_component_condition_by_its_type() -> None:
    spec = GraphSpec("g")
    spec.add_start("s").link_add("e", when=lambda ctx: True)
    spec.add_end("e")
    assert '-->|"#lt;function#gt;"|' in spec.create().to_mermaid()


def test_mermaid_draws_links_to_unknown_nodes_as_missing() -> None:
    g = Graph.from_text("id: g\nlayout: [{id: s, type: start, link: ghost}]")
    text = g.to_mermaid()
    assert '    n_ghost["ghost (missing)"]\n' in text and "    class n_ghost missing\n" in text


def test_mermaid_states_ignore_unknown_codes_and_nodes() -> None:
    text = one_node("activity").to_mermaid({"x": 0, "s": 77, "nowhere": 1001})
    assert "    class n_" not in text and "classDef waiting" in text
    assert "linkStyle" not in text  # nothing was reached: no path


# -- dot ------------------------------------------------------------------------------------


def test_dot_escapes_quotes_backslashes_and_newlines() -> None:
    spec = GraphSpec('g"1')
    spec.add_start('s"x', title='say "hi" \\n\nnext')
    text = graph_to_dot(spec.create())
    assert '    "s\\"x" [label="say \\"hi\\" \\\\n\\nnext", shape=ellipse];\n' in text
    assert text.startswith('digraph "g\\"1" {\n')


def test_dot_fills_nodes_by_state() -> None:
    text = graph_to_dot(one_node("activity"), {"x": 1003})
    assert 'fillcolor="#f5b7b1"' in text and 'style="rounded,filled"' in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_dot_with_awkward_text_is_accepted_by_graphviz() -> None:
    spec = GraphSpec("weird {graph}")
    spec.add_start("-> ;", title='a "b" \\ c\n{d} <e> [f]').link_add("x\\", when='s == "}"')
    spec.add_exclusive("x\\").link_add('ghost"').link_add("end")
    spec.add_end("end")
    source = graph_to_dot(spec.create(), {"x\\": 1001})
    result = subprocess.run(
        ["dot", "-Tsvg"], input=source, capture_output=True, text=True, check=False, timeout=30
    )
    assert result.returncode == 0, result.stderr


# -- pictures of one instance: legend, instance id, actors, path taken ----------------------
_WAITING_FOR_MANAGER = {"apply": 1002, "gw": 1002, "manager": 1001}  # start is never stored


def test_instance_picture_has_a_legend_titled_with_the_instance(oa: Graph) -> None:
    text = graph_to_mermaid(oa, _WAITING_FOR_MANAGER, instance_id="oa-7")
    assert '    subgraph legend["instance oa-7"]\n' in text
    for entry in ("waiting", "completed", "terminated", "not reached", "the path taken"):
        assert f'{entry}"]' in text
    dot = graph_to_dot(oa, _WAITING_FOR_MANAGER, instance_id="oa-7")
    assert '    label="OA approval\\ninstance oa-7";' in dot
    assert "subgraph cluster_legend {" in dot and 'label="instance oa-7";' in dot


def test_instance_picture_names_the_actor_of_each_human_node(oa: Graph) -> None:
    text = graph_to_mermaid(oa, _WAITING_FOR_MANAGER)
    assert 'n_manager["Manager approval (for manager)"]' in text
    assert 'n_apply["Apply (for employee)"]' in text
    assert 'n_gw{"Amount? (exclusive)"}' in text  # no actor, no suffix
    assert "(for " not in graph_to_mermaid(oa)  # a graph picture stays as it was


def test_instance_picture_draws_the_path_taken_and_only_it(oa: Graph) -> None:
    text = graph_to_mermaid(oa, _WAITING_FOR_MANAGER)
    links = [(link.prev_id, link.next_id) for link in oa.links]
    taken = [links.index(pair) for pair in (("start", "apply"), ("apply", "gw"), ("gw", "manager"))]
    assert f"    linkStyle {','.join(map(str, sorted(taken)))} stroke:#2f855a" in text
    dot = graph_to_dot(oa, _WAITING_FOR_MANAGER)
    assert '"gw" -> "manager" [label="small: amount < 5000", penwidth=3' in dot
    assert '"gw" -> "director" [label="default"];' in dot
    assert '"manager" -> "end";' in dot


def test_dot_legend_ids_never_clash_with_node_ids() -> None:
    g = Graph.from_text(
        "id: g\nlayout: [{id: s, type: start, link: 'legend:waiting'}, {id: 'legend:waiting'}]"
    )
    dot = graph_to_dot(g, {"legend:waiting": 1001})
    assert '"_legend:waiting" [label="waiting"' in dot
    assert dot.count('\n    "legend:waiting" [') == 1


# -- control characters: a picture printed to a terminal sends it no escape sequence ---------
_HOSTILE = (
    'id: g\ntitle: "T\\e]0;pwned\\a"\nlayout:\n'
    '  - {id: "s\\e[2J", type: start, title: "Start\\e[31mRED\\b\\0\\x9b\\u202eZ",'
    ' link: [{nextId: "gone\\e[5m", when: "x\\e[8m"}]}\n'
)


def controls(text: str) -> set[str]:
    """The control, line-separating and bidi characters of ``text`` (line ends aside)."""
    return {
        ch
        for ch in text.replace("\n", "")
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in "\u202e\u2066"
    }


def test_mermaid_shows_control_characters_escaped() -> None:
    """ESC, BS, NUL, C1 and bidi overrides in titles, ids and conditions went to stdout raw:
    `flow render` could clear the screen, retitle the window or reverse what it printed."""
    text = Graph.from_text(_HOSTILE).to_mermaid()
    assert controls(text) == set()
    assert '    n_s__2J(["Start\\x1b[31mRED\\x08\\x00\\x9b\\u202eZ"])\n' in text
    assert '    n_gone__5m["gone\\x1b[5m (missing)"]\n' in text
    assert '-->|"x\\x1b[8m"|' in text


def test_dot_shows_control_characters_escaped_and_keeps_ids_apart() -> None:
    g = Graph.from_text(_HOSTILE)
    text = graph_to_dot(g)
    assert controls(text) == set()
    assert '    label="T\\\\x1b]0;pwned\\\\x07";\n' in text  # a label shows the escape
    assert 'label="Start\\\\x1b[31mRED\\\\x08\\\\x00\\\\x9b\\\\u202eZ"' in text
    assert '    "s\\x1b[2J" -> "gone\\x1b[5m" [label="x\\\\x1b[8m"];\n' in text
    spec = GraphSpec("g")
    spec.add_start("a\x1b").link_add("a\\x1b")  # an id holding ESC, one spelling its escape
    spec.add_end("a\\x1b")
    text = graph_to_dot(spec.create())
    assert '    "a\\x1b" -> "a\\\\x1b";\n' in text
