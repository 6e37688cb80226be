"""The console script itself: help everywhere, one-line usage errors, no database imports
for commands that need none."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_support import REPO, Flow, single_error_line

COMMANDS = [
    "demo",
    "validate",
    "render",
    "migrate",
    "start",
    "claim",
    "submit",
    "history",
    "instances",
]


def test_help_lists_every_command(flow: Flow) -> None:
    result = flow("--help")
    assert result.code == 0
    for command in COMMANDS:
        assert f"    {command}" in result.out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(flow: Flow, command: str) -> None:
    result = flow(command, "--help")
    assert result.code == 0, result.err
    assert result.out.startswith(f"usage: flow {command}")


def test_no_command_is_a_one_line_usage_error(flow: Flow) -> None:
    result = flow()
    assert result.code == 2
    assert "required: COMMAND" in single_error_line(result)


def test_unknown_option_is_a_one_line_usage_error(flow: Flow) -> None:
    result = flow("history", "x", "--colour")
    assert result.code == 2
    assert "unrecognized arguments: --colour" in single_error_line(result)


def test_importing_flow_and_validating_loads_no_database_library() -> None:
    code = (
        "import sys, flow, flow.cli\n"
        "assert 'sqlalchemy' not in sys.modules, 'import flow loaded sqlalchemy'\n"
        f"code = flow.cli.main(['validate', {str(REPO / 'examples' / 'oa.yml')!r}])\n"
        "assert code == 0\n"
        "assert 'sqlalchemy' not in sys.modules, 'flow validate loaded sqlalchemy'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
