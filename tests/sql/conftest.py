"""Snapshot comparison for compiled SQL: whole text, checked in under ``expected/``.

Set ``FLOW_UPDATE_SNAPSHOTS=1`` to rewrite the expected files after an intended change;
otherwise any difference fails the test.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Dialect

EXPECTED = Path(__file__).parent / "expected"


@pytest.fixture
def snapshot() -> Callable[[str, str], None]:
    def check(name: str, actual: str) -> None:
        path = EXPECTED / name
        if os.environ.get("FLOW_UPDATE_SNAPSHOTS") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual, encoding="utf-8")
        assert path.exists(), f"missing snapshot {path}; run with FLOW_UPDATE_SNAPSHOTS=1"
        assert actual == path.read_text(encoding="utf-8"), f"SQL differs from {path}"

    return check


#: snapshot id -> URL of the driver we ship with (no DBAPI is imported to compile).
DIALECT_URLS = {
    "mysql": "mysql+mysqldb://",
    "mysql8": "mysql+mysqldb://",
    "mariadb": "mariadb+mysqldb://",
    "postgresql": "postgresql+psycopg://",
    "sqlite": "sqlite+pysqlite://",
}


def _dialect(key: str) -> Dialect:
    d = sa.make_url(DIALECT_URLS[key]).get_dialect()()
    if key == "mysql8":
        # SQLAlchemy sets this only after connecting to MySQL >= 8.0.20 (private attribute):
        # it then renders ``VALUES (...) AS new ON DUPLICATE KEY UPDATE c = new.c``.
        d._requires_alias_for_on_duplicate_key = True  # type: ignore[attr-defined]
    return d


@pytest.fixture
def dialect_for() -> Callable[[str], Dialect]:
    """A fresh dialect per snapshot id; ``mysql8`` is MySQL >= 8.0.20."""
    return _dialect


@pytest.fixture
def url_for() -> Callable[[str], str]:
    return DIALECT_URLS.__getitem__
