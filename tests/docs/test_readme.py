"""The README's promises hold: its quick start runs and prints what it shows, and its two
commands are the ones the Makefile and CI provide (`.ci/run` runs both)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
BLOCKS = [(m.group(1), m.group(2)) for m in _FENCE.finditer(README)]


def test_readme_quick_start_is_the_quickstart_example() -> None:
    python = [text for lang, text in BLOCKS if lang == "python"]
    example = (REPO / "examples" / "quickstart.py").read_text(encoding="utf-8")
    assert python == [example.split('"""', 2)[2].lstrip("\n")]


def test_readme_quick_start_prints_what_the_readme_shows(tmp_path: Path) -> None:
    index = next(i for i, (lang, _) in enumerate(BLOCKS) if lang == "python")
    code, (lang, expected) = BLOCKS[index][1], BLOCKS[index + 1]
    assert lang == "text"
    shutil.copytree(
        REPO / "examples",
        tmp_path / "examples",
        ignore=shutil.ignore_patterns("*.sqlite", "__pycache__"),
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


def test_readme_commands_are_make_targets_that_ci_runs() -> None:
    commands = [
        line.split("#")[0].strip()
        for lang, text in BLOCKS
        if lang == "sh"
        for line in text.splitlines()
    ]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make demo\b", ci, re.M) and re.search(r"^make test\b", ci, re.M)
