"""The README's promises hold: its quick start runs from an empty directory and prints what it
shows, its two commands are the ones the Makefile and CI provide (`.ci/run` runs both), and its
install line names this clone and an extra that exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from flow.graph import Graph

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
BLOCKS = [(m.group(1), m.group(2)) for m in _FENCE.finditer(README)]


def this_checkout_first() -> dict[str, str]:
    """The environment with this checkout first on ``PYTHONPATH`` (the venv's editable install
    may point at another checkout)."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def test_readme_quick_start_is_the_quickstart_example() -> None:
    python = [text for lang, text in BLOCKS if lang == "python"]
    example = (REPO / "examples" / "quickstart.py").read_text(encoding="utf-8")
    assert python == [example.split('"""', 2)[2].lstrip("\n")]


def test_readme_quick_start_runs_in_an_empty_directory(tmp_path: Path) -> None:
    """An app of one's own has no ``examples/``: the quick start needs nothing but the package."""
    index = next(i for i, (lang, _) in enumerate(BLOCKS) if lang == "python")
    code, (lang, expected) = BLOCKS[index][1], BLOCKS[index + 1]
    assert lang == "text"
    for _ in range(2):  # a second run finds the task done and prints the same history
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=this_checkout_first(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.sqlite"]


def test_quick_start_graph_is_the_example_graph_without_titles() -> None:
    example = (REPO / "examples" / "quickstart.py").read_text(encoding="utf-8")
    inline = Graph.from_text(example.split('"""')[3], strict=True)
    assert _routing(inline) == _routing(Graph.from_file(REPO / "examples" / "oa.yml"))


def _routing(graph: Graph) -> list[tuple[object, ...]]:
    return [
        (
            node.id,
            node.type,
            node.meta.get("actor"),
            [(link.next_id, link.when, link.priority) for link in node.next_links],
        )
        for node in graph.nodes.values()
    ]


def test_readme_commands_are_make_targets_that_ci_runs_and_an_install_line() -> None:
    commands = [
        line.split("#")[0].strip()
        for lang, text in BLOCKS
        if lang == "sh"
        for line in text.splitlines()
    ]
    assert commands[:2] == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make demo\b", ci, re.M) and re.search(r"^make test\b", ci, re.M)
    install = re.fullmatch(r"pip install '/path/to/this/clone\[(\w+)\]'", commands[2])
    assert install is not None, commands[2]
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert install.group(1) in extras
    assert len(commands) == 3


def test_readme_says_where_the_flow_command_is() -> None:
    assert "`.venv/bin/flow instances`" in README
    assert "`. .venv/bin/activate`" in README
