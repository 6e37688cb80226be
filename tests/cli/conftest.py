"""Fixtures for the ``flow`` console script: run the real installed script in a subprocess,
against a SQLite file and a throwaway MariaDB/MySQL database (see the root ``conftest.py``;
``FLOW_REQUIRE_MYSQL=1`` turns a missing server into a failure instead of a skip).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import Flow, Result, run_flow


@pytest.fixture
def flow(tmp_path: Path) -> Flow:
    """``flow(*args)`` runs the console script in ``tmp_path`` and returns code/stdout/stderr."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
        return run_flow(*args, cwd=cwd or tmp_path, env=env)

    return run


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.live)])
def db_url(request: pytest.FixtureRequest, make_database_url: Callable[[str], str]) -> str:
    """An empty database for this test only: a SQLite file, or a throwaway MySQL database."""
    return make_database_url(request.param)


@pytest.fixture
def migrated(flow: Flow, db_url: str) -> str:
    """``db_url`` after ``flow migrate``."""
    result = flow("migrate", "--db", db_url)
    assert result.code == 0, result.err
    return db_url
