"""A fresh machine without the MySQL client headers: the Makefile installs mysqlclient (the
``mysql`` extra) on the first run after the headers appear, and the test fixtures fall back to
a driver that is installed.

The Makefile runs here against a fake ``.venv`` whose ``python`` only records its arguments, and
a stand-in ``pkg-config`` first on ``PATH`` that finds a package only in a directory the test
controls — so the machine's own pkg-config (or its absence, or a failing one) plays no part.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
PC_FILE = "Name: mysqlclient\nDescription: test double\nVersion: 8.0.0\nCflags:\nLibs:\n"

needs_make = pytest.mark.skipif(
    shutil.which("make") is None, reason="make is needed to run the Makefile"
)


class FakeCheckout:
    """A copy of the Makefile next to a ``.venv`` that is already set up (the main stamp is
    newer than pyproject.toml) and whose ``python`` logs each call to ``calls``."""

    def __init__(self, root: Path, *, pip_succeeds: bool = True) -> None:
        self.root = root
        self.pc_dir = root / "pkgconfig"
        self.pc_dir.mkdir()
        self.fake_bin = root / "fakebin"
        self.fake_bin.mkdir()
        pkg_config = self.fake_bin / "pkg-config"
        pkg_config.write_text(  # only `pkg-config --exists NAME`, as the Makefile calls it
            f'#!/bin/sh\n[ "$1" = "--exists" ] && [ -f "{self.pc_dir}/$2.pc" ]\n',
            encoding="utf-8",
        )
        pkg_config.chmod(0o755)
        shutil.copy(REPO / "Makefile", root / "Makefile")
        (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
        bin_dir = root / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        python = bin_dir / "python"
        python.write_text(
            f'#!/bin/sh\necho "$@" >> "{root}/calls"\nexit {0 if pip_succeeds else 1}\n',
            encoding="utf-8",
        )
        python.chmod(0o755)
        (root / ".venv" / ".installed").touch()
        os.utime(root / ".venv" / ".installed", (5, 5))
        os.utime(root / "pyproject.toml", (1, 1))

    def headers_appear(self) -> None:
        (self.pc_dir / "mysqlclient.pc").write_text(PC_FILE, encoding="utf-8")

    def make(self) -> str:
        env = {**os.environ, "PATH": f"{self.fake_bin}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run(
            ["make", "--no-print-directory", "mysql-extra"],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def calls(self) -> list[str]:
        log = self.root / "calls"
        return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@needs_make
def test_mysql_extra_is_installed_on_the_first_run_after_the_headers_appear(
    tmp_path: Path,
) -> None:
    checkout = FakeCheckout(tmp_path)
    out = checkout.make()
    assert "no MySQL client headers" in out
    assert checkout.calls() == []

    checkout.headers_appear()
    checkout.make()
    assert checkout.calls() == ["-m pip install -q -e .[mysql]"]

    checkout.make()  # installed: not again
    assert len(checkout.calls()) == 1


@needs_make
def test_mysql_extra_is_reinstalled_after_the_environment_is(tmp_path: Path) -> None:
    checkout = FakeCheckout(tmp_path)
    checkout.headers_appear()
    checkout.make()
    stamp = tmp_path / ".venv" / ".installed-mysql"
    os.utime(stamp, (2, 2))  # the main install (pyproject.toml changed) is newer
    checkout.make()
    assert len(checkout.calls()) == 2


@needs_make
def test_a_failed_mysqlclient_build_is_reported_and_retried_without_failing_make(
    tmp_path: Path,
) -> None:
    checkout = FakeCheckout(tmp_path, pip_succeeds=False)
    checkout.headers_appear()
    assert "mysqlclient did not build" in checkout.make()
    assert "mysqlclient did not build" in checkout.make()
    assert len(checkout.calls()) == 2


def _root_conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_root_conftest", REPO / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_container_url_names_pymysql_without_mysqlclient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "MySQLdb", None)  # type: ignore[arg-type]
    assert _root_conftest()._mysql_driver() == "pymysql"


def test_container_url_names_an_installed_driver() -> None:
    driver = _root_conftest()._mysql_driver()
    module = {"mysqldb": "MySQLdb", "pymysql": "pymysql"}[driver]
    assert importlib.util.find_spec(module) is not None
