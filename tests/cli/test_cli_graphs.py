"""``flow validate`` and ``flow render`` as a user runs them: real console script, real files."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_support import REPO, Flow, flow_environ, flow_script, single_error_line

GRAPHS = Path(__file__).parent / "graphs"
SNAPSHOTS = Path(__file__).parent / "snapshots"
OA = REPO / "flow_cli" / "oa.yml"


def test_validate_accepts_the_demo_graph(flow: Flow) -> None:
    result = flow("validate", str(OA))
    assert result.code == 0
    assert f"{OA}: ok (graph 'oa', 6 nodes)" in result.out


def test_validate_reports_bad_yaml_with_line_and_column(flow: Flow) -> None:
    result = flow("validate", str(GRAPHS / "bad_yaml.yml"))
    assert result.code == 1
    assert f"{GRAPHS / 'bad_yaml.yml'}:5:5: error: Graph text does not parse" in result.out


def test_validate_reports_duplicate_node_ids(flow: Flow) -> None:
    result = flow("validate", str(GRAPHS / "duplicate_ids.yml"))
    assert result.code == 1
    assert "error: node 'a': node id defined 2 times" in result.out


def test_validate_reports_a_dangling_link_with_its_node(flow: Flow) -> None:
    result = flow("validate", str(GRAPHS / "dangling_link.yml"))
    assert result.code == 1
    assert "error: node 'a', link a -> nowhere: link to unknown node 'nowhere'" in result.out


def test_validate_prints_warnings_but_exits_zero(flow: Flow) -> None:
    result = flow("validate", str(GRAPHS / "warnings_only.yml"))
    assert result.code == 0
    assert "warning: node 'a': unknown type 'aprove', treated as activity" in result.out
    assert "warning: node 'orphan': node is unreachable" in result.out
    assert "0 errors, 2 warnings" in result.out


def test_validate_checks_every_file_and_fails_if_any_has_an_error(flow: Flow) -> None:
    result = flow("validate", str(OA), str(GRAPHS / "dangling_link.yml"), "missing.yml")
    assert result.code == 1
    assert ": ok (graph 'oa'" in result.out
    assert "link to unknown node 'nowhere'" in result.out
    assert "missing.yml: error: cannot read graph file" in result.out
    assert "3 files checked: 2 errors, 0 warnings" in result.out


def test_validate_prints_hostile_ids_escaped_and_counts_by_severity(
    flow: Flow, tmp_path: Path
) -> None:
    """A link id printed raw forged a line (a fake "ok") and sent escape sequences (clear the
    screen, set the window title) to whoever checked the file; the counts were read from
    the printed text, which an id could skew."""
    hostile = tmp_path / "hostile.json"
    forged = "x\nevil.yml: ok (graph 'evil', 3 nodes): error: "
    hostile.write_text(
        json.dumps(
            {
                "id": "g",
                "layout": [
                    {"id": "s", "type": "start", "link": forged},
                    {"id": "a", "link": ["nowhere\x1b[2J\x1b]0;pwned\x07"]},
                    {"id": "e", "type": "end"},
                ],
            }
        )
    )
    result = flow("validate", str(hostile))
    assert result.code == 1
    assert "\x1b" not in result.out and "\x07" not in result.out
    assert "\nevil.yml: ok" not in result.out
    assert "\\x1b[2J" in result.out  # shown, escaped
    assert "1 file checked: 2 errors, 2 warnings" in result.out


def test_validate_names_a_directory_as_no_regular_file(flow: Flow, tmp_path: Path) -> None:
    """A directory named like a graph file is refused as a device or pipe is: it said
    'cannot read graph file: [Errno 21] Is a directory: 3' (a file descriptor, not a name)."""
    (tmp_path / "graphs.yml").mkdir()
    result = flow("validate", "graphs.yml")
    assert result.code == 1
    assert result.out.splitlines()[0] == "graphs.yml: error: a graph file must be a regular file"


def test_render_mermaid_matches_snapshot(flow: Flow) -> None:
    result = flow("render", str(OA))
    assert result.code == 0, result.err
    assert result.out == (SNAPSHOTS / "oa.mmd").read_text(encoding="utf-8")


def test_render_dot_matches_snapshot(flow: Flow) -> None:
    result = flow("render", str(OA), "--format", "dot")
    assert result.code == 0, result.err
    assert result.out == (SNAPSHOTS / "oa.dot").read_text(encoding="utf-8")


def test_render_picks_the_format_from_the_output_suffix(flow: Flow, tmp_path: Path) -> None:
    result = flow("render", str(OA), "-o", "picture.dot")
    assert result.code == 0, result.err
    written = (tmp_path / "picture.dot").read_text(encoding="utf-8")
    assert written == (SNAPSHOTS / "oa.dot").read_text(encoding="utf-8")


@pytest.mark.parametrize("output", ["oa.jpg", "oa.yml", "oa.txt"])
def test_render_to_a_suffix_of_no_picture_format_writes_nothing(
    flow: Flow, tmp_path: Path, output: str
) -> None:
    """``-o pic.jpg`` wrote Mermaid text into a file every viewer takes for a JPEG."""
    line = single_error_line(flow("render", str(OA), "-o", output))
    assert f"-o {output}: no picture format is known by the suffix" in line
    assert "give --format" in line
    assert not (tmp_path / output).exists()


def test_render_to_a_file_without_a_suffix_writes_mermaid(flow: Flow, tmp_path: Path) -> None:
    assert flow("render", str(OA), "-o", "picture").code == 0
    assert (tmp_path / "picture").read_text(encoding="utf-8").startswith("flowchart TD")


@pytest.mark.parametrize("output", ["oa.yml", "./oa.yml", "link.mmd"])
def test_render_never_writes_over_the_graph_file_it_draws(
    flow: Flow, tmp_path: Path, output: str
) -> None:
    """``flow render oa.yml -o oa.yml --format dot`` replaced the graph with its picture."""
    graph = tmp_path / "oa.yml"
    shutil.copy(OA, graph)
    (tmp_path / "link.mmd").symlink_to(graph)
    line = single_error_line(flow("render", "oa.yml", "-o", output, "--format", "dot"))
    assert (
        line == f"flow: error: -o {output}: that is the graph file being drawn; give another file"
    )
    assert graph.read_bytes() == OA.read_bytes()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_svg_is_valid_xml(flow: Flow, tmp_path: Path) -> None:
    result = flow("render", str(OA), "-o", "oa.svg")
    assert result.code == 0, result.err
    root = ET.parse(tmp_path / "oa.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "Manager approval" in (tmp_path / "oa.svg").read_text(encoding="utf-8")


def test_render_svg_without_graphviz_is_one_clear_line(flow: Flow, tmp_path: Path) -> None:
    result = flow("render", str(OA), "--format", "svg", env={"PATH": str(tmp_path)})
    line = single_error_line(result)
    assert "needs Graphviz's `dot` program" in line


def test_render_of_a_broken_graph_file_is_one_line(flow: Flow) -> None:
    line = single_error_line(flow("render", str(GRAPHS / "bad_yaml.yml")))
    assert "bad_yaml.yml" in line and "line 5" in line


def test_render_needs_a_graph_or_an_instance(flow: Flow) -> None:
    result = flow("render")
    assert result.code == 2
    assert "give a GRAPH file, or --instance ID" in single_error_line(result)


@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_render_prints_control_characters_of_the_graph_escaped(
    flow: Flow, tmp_path: Path, fmt: str
) -> None:
    """Titles, ids and conditions went to stdout raw: an escape sequence in a graph file
    cleared the screen, retitled the window or recoloured what `flow render` printed."""
    hostile = tmp_path / "esc.yml"
    hostile.write_text(
        'id: g\ntitle: "T\\e]0;pwned\\a"\nlayout:\n'
        '  - {id: "s\\e[2J", type: start, title: "Start\\e[31mRED\\b\\rX", link: "gone\\e[5m"}\n'
    )
    result = flow("render", "--format", fmt, str(hostile))
    assert result.code == 0, result.err
    assert not {"\x1b", "\x07", "\x08", "\r"} & set(result.out)
    assert "x1b[31mRED" in result.out


def test_a_lone_surrogate_in_a_title_is_a_validate_error_and_one_render_line(
    flow: Flow, tmp_path: Path
) -> None:
    """It passed `flow validate`; `flow render` then died with a UnicodeEncodeError."""
    bad = tmp_path / "sur.json"
    bad.write_text('{"id":"g","title":"\\ud800","layout":[{"id":"a","type":"start"}]}')
    result = flow("validate", str(bad))
    assert result.code == 1
    assert "error: The title of graph 'g' is not valid Unicode text (lone surrogate)" in result.out
    line = single_error_line(flow("render", str(bad)))
    assert "The title of graph 'g' is not valid Unicode text" in line


def test_validate_whose_reader_goes_away_does_not_exit_as_if_the_file_were_fine(
    tmp_path: Path,
) -> None:
    """``flow validate bad.yml | head -1``: the reader closes the pipe while the errors are
    still being printed. The command exited 0 then — a script with ``set -o pipefail`` read
    "no errors". It exits 141 (128 + SIGPIPE), as a shell reports any program a pipe ends,
    with nothing on stderr."""
    nodes = "".join(f"  - {{id: n{i}, link: nowhere{i}}}\n" for i in range(3_000))
    bad = tmp_path / "bad.yml"
    bad.write_text(f"id: g\nlayout:\n{nodes}")  # about 240 KB of errors: more than a pipe holds
    with subprocess.Popen(
        [str(flow_script()), "validate", str(bad)],
        env=flow_environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        assert b"link to unknown node" in process.stdout.readline()
        process.stdout.close()  # `head -1` has its line
        err = process.stderr.read()
        assert process.wait(timeout=120) == 141
    assert err == b""
