"""Every command and snippet in the user docs runs, and prints what the docs say it prints.

- ``console`` blocks: each ``$ flow ...`` line runs (in document order, in one fresh directory
  per page holding a copy of ``examples/``) and its output must equal the lines shown under it
  — timestamps and the demo's random run id normalized; a ``...`` line ends the comparison.
- ``python`` blocks run as scripts in that kind of directory; a following ``text`` block is
  their expected output. The quick start must be the code of ``examples/quickstart.py``.
- ``yaml`` blocks of the graph reference load strictly (no validation error).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from flow.graph import Graph

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
FLOW = Path(sys.executable).parent / "flow"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_RUN_ID = re.compile(r"\boa-[0-9a-f]{6}\b")


@dataclass(frozen=True, kw_only=True)
class Block:
    lang: str
    text: str


@dataclass(frozen=True, kw_only=True)
class Command:
    argv: list[str]
    expected: list[str]


def blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return [Block(lang=m.group(1), text=m.group(2)) for m in _FENCE.finditer(text)]


def commands(page: str) -> list[Command]:
    found: list[Command] = []
    for block in blocks(page):
        if block.lang != "console":
            continue
        for line in block.text.splitlines():
            if line.startswith("$ "):
                found.append(Command(argv=shlex.split(line[2:]), expected=[]))
            else:
                found[-1].expected.append(line)
    return found


def this_checkout_first() -> dict[str, str]:
    """The environment with this checkout first on ``PYTHONPATH`` (the venv's editable install
    may point at another checkout)."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def normalize(text: str) -> str:
    return _RUN_ID.sub("oa-RUNID", _TIME.sub("YYYY-MM-DD hh:mm:ss", text))


def workdir(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=_no_caches)
    return tmp_path


def _no_caches(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n in ("__pycache__", ".pytest_cache") or n.endswith(".sqlite")]


@pytest.mark.parametrize("page", ["getting-started.md", "cli.md"])
def test_console_examples_print_what_the_page_shows(page: str, tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    steps = commands(page)
    assert steps, f"{page} has no console examples"
    for step in steps:
        assert step.argv[0] == "flow", step.argv
        done = subprocess.run(
            [str(FLOW), *step.argv[1:]],
            cwd=cwd,
            env=this_checkout_first(),
            capture_output=True,
            text=True,
            check=False,
        )
        shown = "$ " + shlex.join(step.argv)
        actual = normalize(done.stdout + done.stderr).splitlines()
        expected = normalize("\n".join(step.expected)).splitlines()
        if "..." in expected:
            expected = expected[: expected.index("...")]
            actual = actual[: len(expected)]
        assert actual == expected, f"{page}: {shown}"
        failing = any(line.startswith("flow: error:") for line in expected)
        assert (done.returncode != 0) == failing, f"{page}: {shown} exited {done.returncode}"


def test_quick_start_is_the_quickstart_example() -> None:
    python = [b.text for b in blocks("getting-started.md") if b.lang == "python"]
    example = (REPO / "examples" / "quickstart.py").read_text(encoding="utf-8")
    code = example.split('"""', 2)[2].lstrip("\n")
    assert python[0] == code


@pytest.mark.parametrize(
    "page", ["getting-started.md", "cli.md", "graph-format.md", "concepts.md", "limits.md"]
)
def test_python_snippets_run_and_print_what_the_page_shows(page: str, tmp_path: Path) -> None:
    found = blocks(page)
    for i, block in enumerate(found):
        if block.lang != "python":
            continue
        cwd = workdir(tmp_path / f"snippet{i}")
        done = subprocess.run(
            [sys.executable, "-c", block.text],
            cwd=cwd,
            env=this_checkout_first(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{page} python block {i}: {done.stderr}"
        after = found[i + 1] if i + 1 < len(found) else None
        if after is not None and after.lang == "text":
            assert done.stdout == after.text, f"{page} python block {i}"


def test_graph_format_examples_are_valid_graphs() -> None:
    graphs = [b.text for b in blocks("graph-format.md") if b.lang == "yaml"]
    assert len(graphs) >= 5
    for text in graphs:
        Graph.from_text(text, strict=True)


def test_tasks_page_example_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    """Run against this checkout (``PYTHONPATH``), not whatever ``flow`` is installed."""
    found = blocks("tasks.md")
    code, shown = found[0], found[1]
    assert (code.lang, shown.lang) == ("python", "text")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code.text],
        cwd=workdir(tmp_path / "tasks"),
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown.text
