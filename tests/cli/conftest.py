"""Fixtures for the ``flow`` console script: run the real installed script in a subprocess,
against a SQLite file and (when ``FLOW_MYSQL_DSN`` is set) a throwaway MariaDB/MySQL database.

``FLOW_REQUIRE_MYSQL=1`` turns a missing server into a failure instead of a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Flow, Result, run_flow


@pytest.fixture
def flow(tmp_path: Path) -> Flow:
    """``flow(*args)`` runs the console script in ``tmp_path`` and returns code/stdout/stderr."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
        return run_flow(*args, cwd=cwd or tmp_path, env=env)

    return run


def _mysql_server() -> str:
    dsn = os.environ.get("FLOW_MYSQL_DSN")
    if not dsn:
        if os.environ.get("FLOW_REQUIRE_MYSQL") == "1":
            pytest.fail("FLOW_REQUIRE_MYSQL=1 but FLOW_MYSQL_DSN is not set", pytrace=False)
        pytest.skip("FLOW_MYSQL_DSN is not set")
    return dsn


def _throwaway_mysql(server_url: str) -> Iterator[str]:
    import sqlalchemy as sa

    name = f"flowcli_{uuid.uuid4().hex[:12]}"
    url = sa.make_url(server_url)
    admin = sa.create_engine(url, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
            )
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
    finally:
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.live)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database for this test only: a SQLite file, or a throwaway MySQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cli.sqlite'}"
        return
    yield from _throwaway_mysql(_mysql_server())


@pytest.fixture
def migrated(flow: Flow, db_url: str) -> str:
    """``db_url`` after ``flow migrate``."""
    result = flow("migrate", "--db", db_url)
    assert result.code == 0, result.err
    return db_url
