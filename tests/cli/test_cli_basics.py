"""The console script itself: help everywhere, one-line usage errors, no database imports
for commands that need none."""

from __future__ import annotations

import ast
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


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter whose imports come from this checkout first."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def test_importing_every_flow_module_loads_no_cli_and_no_database_library() -> None:
    """The engine package stands alone: the CLI (which opens SQL workflows) lives above it."""
    code = (
        "import importlib, pkgutil, sys, flow\n"
        "for info in pkgutil.walk_packages(flow.__path__, 'flow.'):\n"
        "    importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in {'flow_sqla', 'flow_cli', 'sqlalchemy', 'alembic'})\n"
        "assert not bad, bad\n"
        "assert 'flow.workflow.executor' in sys.modules\n"
    )
    done = _run_python(code)
    assert done.returncode == 0, done.stderr


def test_no_flow_module_mentions_the_cli_or_a_database_library() -> None:
    """Not even a lazy import in a function: ``flow`` is below ``flow_sqla`` and ``flow_cli``."""
    forbidden = {"flow_sqla", "flow_cli", "sqlalchemy", "alembic"}
    offenders = []
    for path in sorted((REPO / "flow").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [
                f"{path.relative_to(REPO)}:{node.lineno} {name}"
                for name in names
                if name.split(".")[0] in forbidden
            ]
    assert not offenders


def test_validating_loads_no_database_library() -> None:
    code = (
        "import sys, flow_cli\n"
        f"code = flow_cli.main(['validate', {str(REPO / 'examples' / 'oa.yml')!r}])\n"
        "assert code == 0\n"
        "assert 'sqlalchemy' not in sys.modules, 'flow validate loaded sqlalchemy'\n"
        "assert 'flow_sqla' not in sys.modules, 'flow validate loaded flow_sqla'\n"
    )
    done = _run_python(code)
    assert done.returncode == 0, done.stderr
