"""Fixtures for the FastAPI example: a TestClient on SQLite and on a throwaway MariaDB/MySQL
database (``FLOW_MYSQL_DSN``; skipped without it unless ``FLOW_REQUIRE_MYSQL=1``)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:  # the example is run from a checkout, not installed
    sys.path.insert(0, str(REPO))

from examples.fastapi_app.app import create_app  # noqa: E402


def _mysql_database() -> Iterator[str]:
    dsn = os.environ.get("FLOW_MYSQL_DSN")
    if not dsn:
        if os.environ.get("FLOW_REQUIRE_MYSQL") == "1":
            pytest.fail("FLOW_REQUIRE_MYSQL=1 but FLOW_MYSQL_DSN is not set", pytrace=False)
        pytest.skip("FLOW_MYSQL_DSN is not set")
    name = f"flowapp_{uuid.uuid4().hex[:12]}"
    url = sa.make_url(dsn)
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
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'app.sqlite'}"
    else:
        yield from _mysql_database()


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    """A client of a fresh app; fails the test if a pooled connection was leaked."""
    app = create_app(database_url)
    engine: sa.Engine = app.state.engine
    try:
        with TestClient(app) as test_client:
            yield test_client
        assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    finally:
        engine.dispose()
