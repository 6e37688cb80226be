"""Live-database fixtures: one behaviour suite over SQLite, MySQL/MariaDB and PostgreSQL.

Server URLs come from ``FLOW_MYSQL_DSN`` / ``FLOW_PG_DSN``; without them a testcontainers
container is tried, and without a Docker engine the tests are skipped with the reason
(``FLOW_REQUIRE_MYSQL=1`` / ``FLOW_REQUIRE_PG=1`` turn that skip into a failure, for CI).
Each test gets a throwaway database (MySQL DDL is not transactional, so rollback cannot clean
up), created here and dropped afterwards.
"""

from __future__ import annotations

import gc
import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

BACKENDS = ["sqlite", "mysql", "postgresql"]
_SERVERS = {
    "mysql": ("FLOW_MYSQL_DSN", "FLOW_REQUIRE_MYSQL"),
    "postgresql": ("FLOW_PG_DSN", "FLOW_REQUIRE_PG"),
}
_NO_CONTAINER: dict[str, str] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.live)


def _unavailable(backend: str, reason: str) -> None:
    env, require = _SERVERS[backend]
    message = f"no {env} and no {backend} container: {reason}"
    if os.environ.get(require) == "1":
        pytest.fail(f"{require}=1 but {message}", pytrace=False)
    pytest.skip(message)


def _start_container(backend: str) -> Any:
    """A started testcontainers container, or a skip/failure naming why there is none.

    Imported only here (the import is not free). Without an engine the docker client raises
    ``DockerException`` from the constructor and leaves its socket to the garbage collector;
    that ResourceWarning is collected here so ``filterwarnings = error`` does not trip on it.
    """
    import docker.errors

    failure = ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            if backend == "mysql":
                from testcontainers.community.mysql import MySqlContainer

                container: Any = MySqlContainer("mysql:8.4", dialect="mysqldb", username="root")
            else:
                from testcontainers.community.postgres import PostgresContainer

                container = PostgresContainer("postgres:16", driver="psycopg")
            container.start()
        except docker.errors.DockerException as exc:
            failure = str(exc)
        gc.collect()
    if failure:
        _NO_CONTAINER[backend] = failure
        _unavailable(backend, failure)
    return container


def _server_url(backend: str) -> Iterator[str]:
    dsn = os.environ.get(_SERVERS[backend][0])
    if dsn:
        yield dsn
        return
    if backend in _NO_CONTAINER:  # a failed session fixture is retried for every test
        _unavailable(backend, _NO_CONTAINER[backend])
    container = _start_container(backend)
    try:
        yield container.get_connection_url()
    finally:
        container.stop()


@pytest.fixture(scope="session")
def mysql_server_url() -> Iterator[str]:
    """URL of a MySQL/MariaDB server the tests may create databases on."""
    yield from _server_url("mysql")


@pytest.fixture(scope="session")
def postgresql_server_url() -> Iterator[str]:
    """URL of a PostgreSQL server the tests may create databases on."""
    yield from _server_url("postgresql")


def _throwaway_database(server_url: str, backend: str) -> Iterator[str]:
    name = f"flowtest_{uuid.uuid4().hex[:12]}"
    url = sa.make_url(server_url)
    admin = sa.create_engine(url, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT")
    create = f"CREATE DATABASE {name}"
    drop = f"DROP DATABASE IF EXISTS {name}"
    if backend == "mysql":
        create += " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    else:
        drop += " WITH (FORCE)"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(create)
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(drop)
    finally:
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database that exists for this test only."""
    backend: str = request.param
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'flow.sqlite'}"
        return
    server_url: str = request.getfixturevalue(f"{backend}_server_url")
    yield from _throwaway_database(server_url, backend)


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
