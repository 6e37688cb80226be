"""Live-database fixtures: one behaviour suite over SQLite, MySQL/MariaDB and PostgreSQL.

The throwaway databases come from the repository's root ``conftest.py`` (server URLs from
``FLOW_MYSQL_DSN`` / ``FLOW_PG_DSN``, else testcontainers, else a skip naming the reason — a
failure with ``FLOW_REQUIRE_MYSQL=1`` / ``FLOW_REQUIRE_PG=1``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

BACKENDS = ["sqlite", "mysql", "postgresql"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.live)


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, make_database_url: Callable[[str], str]) -> str:
    """URL of an empty database that exists for this test only."""
    return make_database_url(request.param)


@pytest.fixture
def engine(db_url: str) -> Iterator[sa.Engine]:
    """An engine on the throwaway database; fails the test if a connection was leaked."""
    eng = sa.create_engine(db_url)
    try:
        yield eng
        checked_out = eng.pool.checkedout()  # type: ignore[attr-defined]
        assert checked_out == 0, f"{checked_out} pooled connection(s) leaked"
    finally:
        eng.dispose()
