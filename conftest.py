"""Throwaway databases for every test tree (tests/ and examples/fastapi_app/tests/).

Server URLs come from ``FLOW_MYSQL_DSN`` / ``FLOW_PG_DSN``; without them a testcontainers
container is tried, and without a Docker engine the test is skipped with the reason
(``FLOW_REQUIRE_MYSQL=1`` / ``FLOW_REQUIRE_PG=1`` turn that skip into a failure, for CI).
Each test gets its own database — MySQL DDL is not transactional, so rollback cannot clean
up — created by :func:`make_database_url` and dropped after the test.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SERVER_BACKENDS = ("mysql", "postgresql")
_SERVERS = {
    "mysql": ("FLOW_MYSQL_DSN", "FLOW_REQUIRE_MYSQL"),
    "postgresql": ("FLOW_PG_DSN", "FLOW_REQUIRE_PG"),
}
_NO_CONTAINER: dict[str, str] = {}
#: Database drivers (DBAPI modules) that the tests needing no server must never import: those
#: `make` cannot install on every machine (mysqlclient needs the MySQL client headers). PyMySQL
#: and psycopg (binary) always install; a dialect may use psycopg's types to process binds.
_DRIVERS = ("MySQLdb", "psycopg2", "mariadb", "asyncpg", "aiomysql")
#: Test trees that need no server: they compile SQL with dialect objects, or use sqlite3.
_DRIVERLESS_TREES = ("unit", "sql")
_TESTS = Path(__file__).parent / "tests"


def pytest_configure(config: pytest.Config) -> None:
    _cache_the_bytecode_of_child_processes()


def _cache_the_bytecode_of_child_processes() -> None:
    """Let the Python processes the tests start (the console script, the examples, alembic)
    keep their bytecode, under the system's temp directory.

    With ``PYTHONDONTWRITEBYTECODE`` set, as on some CI machines, every child compiled each
    module of the project again when it started: a third of a ``flow`` command's CPU time,
    over the hundreds of commands the CLI tests run. ``PYTHONPYCACHEPREFIX`` keeps that
    bytecode away from the sources, which is what the variable was set for."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is None:
        return
    user = os.getuid() if hasattr(os, "getuid") else "user"
    cache = Path(tempfile.gettempdir()) / f"flow-tests-pycache-{user}"
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(cache))


@pytest.fixture(autouse=True)
def _no_database_driver_without_a_server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Make importing a database driver fail in tests/unit and tests/sql.

    A fresh machine without the MySQL client headers has no ``MySQLdb``: a test that compiles
    SQL through a ``mysql+mysqldb://`` engine would fail there although it needs no server.
    Blocking the drivers here catches that on every machine, including those that have them.
    """
    path = Path(str(request.node.path))
    if not path.is_relative_to(_TESTS) or path.relative_to(_TESTS).parts[0] not in (
        _DRIVERLESS_TREES
    ):
        return
    for name in _DRIVERS:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]


def _unavailable(backend: str, reason: str) -> None:
    env, require = _SERVERS[backend]
    message = f"no {backend} server: {env} is not set and {reason}"
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

                container: Any = MySqlContainer(
                    "mysql:8.4", dialect=_mysql_driver(), username="root"
                )
            else:
                from testcontainers.community.postgres import PostgresContainer

                container = PostgresContainer("postgres:16", driver="psycopg")
            container.start()
        except docker.errors.DockerException as exc:
            failure = _docker_failure(exc)
        gc.collect()
    if failure:
        _NO_CONTAINER[backend] = failure
        _unavailable(backend, failure)
    return container


def _mysql_driver() -> str:
    """The MySQL driver the container URL names: mysqlclient when installed, else PyMySQL.

    mysqlclient needs the MySQL client headers to build; PyMySQL (pure Python, in the ``dev``
    extra) is always there.
    """
    return "mysqldb" if importlib.util.find_spec("MySQLdb") is not None else "pymysql"


def _docker_failure(exc: Exception) -> str:
    """Why no container could be started, in a few words (docker's own text is a repr chain)."""
    text = str(exc)
    if "Error while fetching server API version" in text:
        return "no Docker engine is reachable for a testcontainers container"
    return f"no testcontainers container could be started ({text.splitlines()[0][:200]})"


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


def _create_database(server_url: str, backend: str, request: pytest.FixtureRequest) -> str:
    import sqlalchemy as sa

    name = f"flowtest_{uuid.uuid4().hex[:12]}"
    url = sa.make_url(server_url)
    create = f"CREATE DATABASE {name}"
    drop = f"DROP DATABASE IF EXISTS {name}"
    if backend == "mysql":
        create += " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    else:
        drop += " WITH (FORCE)"

    def run(sql: str) -> None:
        admin = sa.create_engine(url, poolclass=sa.NullPool, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(sql)
        finally:
            admin.dispose()

    run(create)
    request.addfinalizer(lambda: run(drop))
    return url.set(database=name).render_as_string(hide_password=False)


@pytest.fixture
def make_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """``make_database_url(backend)`` → the URL of an empty database for this test only.

    ``backend`` is ``"sqlite"`` (a new file under ``tmp_path``), ``"mysql"`` or
    ``"postgresql"`` (a new database on the server, dropped after the test).
    """
    count = 0

    def make(backend: str) -> str:
        nonlocal count
        if backend == "sqlite":
            count += 1
            return f"sqlite:///{tmp_path / f'flow{count}.sqlite'}"
        if backend not in SERVER_BACKENDS:
            raise ValueError(f"unknown backend {backend!r}")
        server_url: str = request.getfixturevalue(f"{backend}_server_url")
        return _create_database(server_url, backend, request)

    return make
