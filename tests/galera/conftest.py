"""Fixtures for the Galera tests: the cluster ``.ci/run`` started (``FLOW_GALERA_DSNS``, one
URL per node; ``FLOW_GALERA_DIR`` for the tests that kill and restart a node).

Without them every test here is skipped with the reason; ``FLOW_REQUIRE_GALERA=1`` turns the
skip into a failure. Start a cluster by hand with ``python -m tests.galera.cluster start DIR``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.galera.cluster import GaleraCluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.galera)


def _unavailable(what: str) -> None:
    message = f"no Galera cluster: {what} (start one: python -m tests.galera.cluster start DIR)"
    if os.environ.get("FLOW_REQUIRE_GALERA") == "1":
        pytest.fail(f"FLOW_REQUIRE_GALERA=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def galera_servers() -> list[str]:
    """One server URL per node (``FLOW_GALERA_DSNS``, comma-separated)."""
    dsns = [d for d in os.environ.get("FLOW_GALERA_DSNS", "").split(",") if d]
    if len(dsns) < 3:
        _unavailable("FLOW_GALERA_DSNS is not set to three node URLs")
    return dsns


@pytest.fixture(scope="session")
def cluster() -> GaleraCluster:
    """The running cluster's processes (``FLOW_GALERA_DIR``), to kill and restart nodes."""
    root = os.environ.get("FLOW_GALERA_DIR")
    if not root:
        _unavailable("FLOW_GALERA_DIR is not set")
    return GaleraCluster.load(root)  # type: ignore[arg-type]


@pytest.fixture
def galera_urls(galera_servers: list[str]) -> Iterator[list[str]]:
    """A database that exists for this test only, as seen through each node (created on
    node 1; Galera replicates the DDL to the others before it returns)."""
    name = f"flowgal_{uuid.uuid4().hex[:12]}"
    admin_url = sa.make_url(galera_servers[0])

    def run(sql: str) -> None:
        admin = sa.create_engine(admin_url, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(sql)
        finally:
            admin.dispose()

    run(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    for url in galera_servers[1:]:
        _wait_until_applied(url)
    try:
        yield [
            sa.make_url(url).set(database=name).render_as_string(hide_password=False)
            for url in galera_servers
        ]
    finally:
        run(f"DROP DATABASE IF EXISTS {name}")


def _wait_until_applied(server_url: str) -> None:
    """Return once the node of ``server_url`` has applied every writeset the cluster had
    ordered when this was called — the CREATE DATABASE just run on node 1 among them: node 1
    returns from DDL once it ran there, the others apply it a moment later (a test connecting
    to node 2 at once met "Unknown database"). ``wsrep_sync_wait`` makes a read wait for that
    — no sleep, no polling."""
    node = sa.create_engine(server_url, poolclass=sa.NullPool)
    try:
        with node.connect() as conn:
            conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
            conn.exec_driver_sql("SELECT 1").all()
    finally:
        node.dispose()
