"""Helpers for the ``flow`` console-script tests (imported by conftest and the tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def flow_script() -> Path:
    """The console script installed next to this interpreter (``.venv/bin/flow``)."""
    script = Path(sys.executable).parent / "flow"
    if not script.exists():
        pytest.fail(f"the flow console script is not installed at {script} (pip install -e .)")
    return script


@dataclass(frozen=True, kw_only=True)
class Result:
    code: int
    out: str
    err: str


Flow = Callable[..., Result]


def single_error_line(result: Result) -> str:
    """The one ``flow: error:`` line of a failed run (and nothing else on stderr)."""
    assert result.code != 0
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("flow: error: "), result.err
    assert "Traceback" not in result.err
    return lines[0]


def flow_environ() -> dict[str, str]:
    """This environment without ``FLOW_DATABASE_URL``, with this checkout first on
    ``PYTHONPATH`` (so the script runs the code under test even when the interpreter's editable
    install points at another checkout of the repository)."""
    environ = {k: v for k, v in os.environ.items() if k != "FLOW_DATABASE_URL"}
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return environ


def run_flow(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> Result:
    """Run the console script in ``cwd`` (``FLOW_DATABASE_URL`` unset unless ``env`` sets it)."""
    environ = flow_environ()
    environ.update(env or {})
    done = subprocess.run(
        [str(flow_script()), *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(code=done.returncode, out=done.stdout, err=done.stderr)
