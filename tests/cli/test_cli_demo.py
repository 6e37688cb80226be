"""``flow demo``: one command shows an approval flow move, its audit trail and its picture."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_support import REPO, Flow, flow_environ, flow_script, single_error_line

STEP_MESSAGES = (
    "Taxi to the airport, receipt attached",
    "Approved, within budget",
    "Please attach the hotel invoice",
    "Hotel invoice attached",
    "Not a business expense",
    "SQL training course",
)


def run_id(out: str) -> str:
    found = re.search(r"this run's instances are (oa-[0-9a-f]+)-\*", out)
    assert found, out
    return found.group(1)


def test_demo_graph_is_the_example_graph() -> None:
    shipped = (REPO / "flow_cli" / "oa.yml").read_text(encoding="utf-8")
    assert shipped == (REPO / "examples" / "oa.yml").read_text(encoding="utf-8")


def test_demo_prints_every_step_history_and_writes_a_picture(
    flow: Flow, tmp_path: Path, db_url: str
) -> None:
    result = flow("demo", "--db", db_url)
    assert result.code == 0, result.err
    assert result.err == ""
    for message in STEP_MESSAGES:
        assert message in result.out
    assert "terminated at manager" in result.out
    assert "manager (Manager approval, for manager)" in result.out
    run = run_id(result.out)
    history = result.out.split(f"History of {run}-conference")[1]
    assert re.search(r"2 .* director +sent back +director +apply +Please attach", history)
    assert re.search(r"4 .* director +completed +director +end +Approved", history)
    assert f"director sends it back (flow send-back {run}-trip director): waits on apply" in (
        result.out
    )
    assert f"employee withdraws it (flow withdraw {run}-chair): terminated manager" in result.out
    manager = result.out.split("Inbox of manager")[1].split("Inbox of employee")[0]
    assert [line.split()[0] for line in manager.strip().splitlines()[3:]] == [f"{run}-training"]
    employee = result.out.split("Inbox of employee")[1].split("History of")[0]
    assert re.search(rf"{run}-trip +oa +apply \(Apply\) +waiting", employee)
    picture = tmp_path / "flow-demo" / f"{run}-training.mmd"
    assert picture.exists()
    assert "class n_manager waiting" in picture.read_text(encoding="utf-8")
    assert str(Path("flow-demo") / f"{run}-training.mmd") in result.out


def test_demo_uses_the_sqlite_file_in_flow_demo_by_default(flow: Flow, tmp_path: Path) -> None:
    result = flow("demo")
    assert result.code == 0, result.err
    assert "sqlite:///flow-demo/flow.sqlite" in result.out
    assert (tmp_path / "flow-demo" / "flow.sqlite").exists()


def test_demo_can_run_again_on_the_same_database(flow: Flow) -> None:
    first = flow("demo")
    second = flow("demo")
    assert second.code == 0, second.err
    assert run_id(first.out) != run_id(second.out)
    listed = flow("instances")
    assert listed.code == 0, listed.err
    assert listed.out.count("-training ") == 2


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_demo_writes_an_svg_when_graphviz_is_installed(flow: Flow, tmp_path: Path) -> None:
    result = flow("demo", "--out", "pictures")
    assert result.code == 0, result.err
    svgs = list((tmp_path / "pictures").glob("*.svg"))
    assert len(svgs) == 1
    assert ET.parse(svgs[0]).getroot().tag == "{http://www.w3.org/2000/svg}svg"


def test_demo_honours_flow_database_url(flow: Flow, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.sqlite'}"
    result = flow("demo", env={"FLOW_DATABASE_URL": url})
    assert result.code == 0, result.err
    assert (tmp_path / "from-env.sqlite").exists()
    assert not (tmp_path / "flow-demo" / "flow.sqlite").exists()


def _try_next(out: str) -> list[list[str]]:
    """The commands under "Try next", split as a shell would."""
    lines = out.split("\nTry next")[1].splitlines()[1:]
    return [shlex.split(line) for line in lines if line.startswith("  ")]


def test_try_next_commands_work_as_printed_without_the_venv_on_path(
    flow: Flow, tmp_path: Path
) -> None:
    """``make demo`` runs .venv/bin/flow; a bare ``flow`` is "command not found" until the venv
    is activated, so the demo prints the path it was started with and how to activate."""
    path = os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "flow").exists()
    )
    result = flow("demo", env={"PATH": path})
    assert result.code == 0, result.err
    script = str(flow_script().resolve())
    assert f"Try next (or activate the venv once, . {script.removesuffix('flow')}activate" in (
        result.out
    )
    commands = _try_next(result.out)
    assert [argv[0] for argv in commands] == [script] * 6
    for argv in commands:
        done = subprocess.run(
            argv, cwd=tmp_path, env=flow_environ(), capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.stderr}"
    assert "forward manager" in done.stdout


def test_try_next_says_flow_when_flow_is_on_path(flow: Flow) -> None:
    path = os.pathsep.join([str(flow_script().parent), os.environ["PATH"]])
    result = flow("demo", env={"PATH": path})
    assert result.code == 0, result.err
    assert "\nTry next:\n" in result.out
    assert {argv[0] for argv in _try_next(result.out)} == {"flow"}


def test_try_next_keeps_the_database_of_the_demo(flow: Flow, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'other.sqlite'}"
    result = flow("demo", "--db", url)
    assert result.code == 0, result.err
    listed = subprocess.run(
        _try_next(result.out)[0],
        cwd=tmp_path,
        env=flow_environ(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("-training ") == 1
    assert not (tmp_path / "flow-demo" / "flow.sqlite").exists()


@pytest.mark.skipif(shutil.which("dot") is not None, reason="Graphviz's dot is installed")
def test_demo_says_graphviz_adds_the_svg_when_it_is_missing(flow: Flow) -> None:
    result = flow("demo")
    assert result.code == 0, result.err
    assert "Graphviz adds an .svg of it: apt-get install graphviz" in result.out


@pytest.mark.parametrize("out", ["taken.txt", "taken.txt/pictures"])
def test_demo_with_an_out_that_cannot_be_a_directory_writes_nothing(
    flow: Flow, tmp_path: Path, out: str
) -> None:
    """--out naming a file (or a path under one) is refused before the demo stores anything:
    it ran all nine stories into the database, then failed on the pictures ('File exists')."""
    (tmp_path / "taken.txt").write_text("not a directory\n", encoding="utf-8")
    db = tmp_path / "demo.sqlite"
    result = flow("demo", "--out", out, "--db", f"sqlite:///{db}")
    line = single_error_line(result)
    assert result.code == 1
    assert result.out == ""
    assert f"--out {out}" in line and "not a directory" in line
    assert not db.exists()
