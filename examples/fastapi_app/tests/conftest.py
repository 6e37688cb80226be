"""Fixtures for the FastAPI example: a TestClient on SQLite and on throwaway MariaDB/MySQL and
PostgreSQL databases (``FLOW_MYSQL_DSN``, ``FLOW_PG_DSN``; skipped without them unless
``FLOW_REQUIRE_MYSQL=1`` / ``FLOW_REQUIRE_PG=1``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:  # the example is run from a checkout, not installed
    sys.path.insert(0, str(REPO))

from examples.fastapi_app.app import create_app  # noqa: E402


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("mysql", marks=pytest.mark.live),
        pytest.param("postgresql", marks=pytest.mark.live),
    ]
)
def database_url(request: pytest.FixtureRequest, make_database_url: Callable[[str], str]) -> str:
    """A throwaway database (the repository's root conftest.py makes it)."""
    return make_database_url(request.param)


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
