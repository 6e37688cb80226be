"""Replicas running ``migrations.upgrade`` at the same moment take turns on a database lock:
every one succeeds, the schema is migrated once, nobody sees "already exists"."""

from __future__ import annotations

import argparse
import decimal
import multiprocessing
import queue
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from _workers import upgrade_at_once, upgrade_pausing_in_the_lock
from alembic import command as alembic_command
from alembic.script import ScriptDirectory

from flow_sqla import MigrationLockError, RepositoryError
from flow_sqla._dialect import MAX_MIGRATION_LOCK_TIMEOUT, migration_lock
from flow_sqla.migrations import _runner, current, make_config, upgrade
from flow_sqla.tables import TableNames

REPLICAS = 4
#: The newest revision: what a finished upgrade records.
HEAD = ScriptDirectory.from_config(make_config()).get_current_head()
DEADLINE = 300.0
SPAWN = multiprocessing.get_context("spawn")


def _url(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _upgrade_in_processes(url: str) -> list[str]:
    barrier = SPAWN.Barrier(REPLICAS)
    results = SPAWN.Queue()
    procs = [
        SPAWN.Process(target=upgrade_at_once, args=(url, i, barrier, results), daemon=True)
        for i in range(REPLICAS)
    ]
    outcomes: list[str] = []
    deadline = time.monotonic() + DEADLINE
    try:
        for proc in procs:
            proc.start()
        while len(outcomes) < REPLICAS:
            try:
                outcomes.append(results.get(timeout=1)[1])
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                assert not dead, f"replica(s) died without reporting: exit codes {dead}"
                assert time.monotonic() < deadline, "replicas did not finish in time"
    finally:
        for proc in procs:
            if proc.is_alive() and len(outcomes) < REPLICAS:
                proc.terminate()
            proc.join(timeout=30)
        results.close()
        results.join_thread()
    return outcomes


@pytest.mark.slow
def test_four_replicas_upgrading_at_once_all_succeed(engine: sa.Engine) -> None:
    assert _upgrade_in_processes(_url(engine)) == ["ok"] * REPLICAS
    assert current(engine) == HEAD
    with engine.connect() as conn:
        versions = conn.exec_driver_sql("SELECT version_num FROM flow_alembic_version").all()
    assert versions == [(HEAD,)]


def test_an_upgrade_waits_for_a_migration_in_progress_then_finds_it_done(
    engine: sa.Engine,
) -> None:
    """The lock is held by "another replica" (a thread here); the upgrade blocks until it is
    released, then reads the version table afresh."""
    held, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def other_replica() -> None:
        try:
            with engine.connect() as conn, conn.begin():
                key = _runner.lock_key(conn, TableNames.create())
            with engine.connect() as conn, conn.begin(), migration_lock(conn, key, timeout=30):
                upgrade(conn)
                held.set()
                release.wait(timeout=60)
        except BaseException as exc:  # reported below
            errors.append(exc)
            held.set()

    thread = threading.Thread(target=other_replica)
    thread.start()
    try:
        assert held.wait(timeout=60)
        with pytest.raises(MigrationLockError) as caught:
            upgrade(engine, lock_timeout=0.2)
        assert isinstance(caught.value, RepositoryError)
    finally:
        release.set()
        thread.join(timeout=60)
    assert errors == []
    upgrade(engine)  # the lock is free again: nothing left to do, no error
    assert current(engine) == HEAD


def test_a_failing_migration_is_a_repository_error_and_releases_the_lock(
    engine: sa.Engine,
) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE flow_alembic_version (version_num VARCHAR(32))")
        conn.exec_driver_sql("INSERT INTO flow_alembic_version VALUES ('nope')")
    with pytest.raises(RepositoryError, match=r"Migration of .* failed"):
        upgrade(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM flow_alembic_version")
    upgrade(engine, lock_timeout=5)  # nothing was left holding the lock
    assert current(engine) == HEAD


def _default_schema(engine: sa.Engine) -> str:
    """The schema a connection uses when none is named (PostgreSQL's ``public``, the URL's
    database on MySQL/MariaDB), spelled out."""
    with engine.connect() as conn:
        name = conn.dialect.default_schema_name
    assert name
    return name


@pytest.mark.parametrize("db_url", ["mysql", "postgresql"], indirect=True)
@pytest.mark.parametrize("holder_names_it", [False, True], ids=["holder-none", "holder-named"])
def test_naming_the_default_schema_takes_the_same_lock_as_naming_none(
    engine: sa.Engine, holder_names_it: bool
) -> None:
    """``schema=None`` and the default schema spelled out are one table set: while one replica
    migrates, the other waits (two locks would let both create the tables at once and one
    fail on "already exists")."""
    upgrade(engine)
    spelled = _default_schema(engine)
    holder, waiter = (spelled, None) if holder_names_it else (None, spelled)
    held, release, results = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    other_replica = SPAWN.Process(
        target=upgrade_pausing_in_the_lock,
        args=(_url(engine), holder, held, release, results),
        daemon=True,
    )
    other_replica.start()
    try:
        assert held.wait(timeout=120)
        with pytest.raises(MigrationLockError):
            upgrade(engine, schema=waiter, lock_timeout=0.2)
    finally:
        release.set()
        outcome = results.get(timeout=120)
        other_replica.join(timeout=30)
        results.close()
        results.join_thread()
    assert outcome == "ok"
    upgrade(engine, schema=waiter)
    assert current(engine) == current(engine, schema=spelled) == HEAD


def test_the_lock_key_names_where_the_tables_are_however_it_is_spelled(engine: sa.Engine) -> None:
    """The default schema named or left out, and on PostgreSQL the database given as the
    URL's path or as ``?dbname=``: one key, one lock (the replica spelling it the other way
    migrated while the first held the lock)."""
    with engine.connect() as conn:
        default = conn.dialect.default_schema_name
        key = _runner.lock_key(conn, TableNames.create())
        assert _runner.lock_key(conn, TableNames.create(schema=default)) == key
    if engine.dialect.name == "postgresql":
        url = engine.url
        by_query = sa.create_engine(
            url.set(database="").update_query_dict({"dbname": url.database})
        )
        try:
            with by_query.connect() as conn:
                assert _runner.lock_key(conn, TableNames.create()) == key
        finally:
            by_query.dispose()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_lock_key_of_sqlite_names_its_main_schema(engine: sa.Engine) -> None:
    """SQLite's write lock needs no key, but the key (named in ``MigrationLockError``) is
    built the same way: the schema in use, ``main``, when none is given."""
    names = TableNames.create()
    with engine.connect() as conn:
        assert _runner.lock_key(conn, names).endswith("|main|flow_alembic_version")
    upgrade(engine)
    assert current(engine) == HEAD


#: Values no backend can wait for (or that are no number of seconds): refused alike everywhere.
BAD_LOCK_TIMEOUTS: list[Any] = [
    float("inf"),
    MAX_MIGRATION_LOCK_TIMEOUT + 1,  # PostgreSQL's own limit is about 24.8 days
    30 * 86400,
    1e308,  # MariaDB's GET_LOCK gives up at once
    10**400,  # too large for a float
    10**5000,  # too long to be quoted as digits
    decimal.Decimal("NaN"),
    decimal.Decimal("sNaN"),
    True,
    False,
    "10",
    -1,
    float("-inf"),
    float("nan"),
]


def test_a_lock_timeout_out_of_range_is_refused_before_anything_is_written(
    engine: sa.Engine,
) -> None:
    for value in BAD_LOCK_TIMEOUTS:
        with pytest.raises(RepositoryError) as caught:
            upgrade(engine, lock_timeout=value)
        assert type(caught.value) is RepositoryError, value  # not a lock that timed out
        assert "lock_timeout must be a number of seconds from 0 to 2073600" in str(caught.value)
    for text in ("inf", "nan", "-1", "2073601", "soon"):
        with engine.connect() as conn:
            config = make_config(connection=conn)
            config.cmd_opts = argparse.Namespace(x=[f"lock_timeout={text}"])
            with pytest.raises(RepositoryError, match=f"got '{text}'"):
                alembic_command.upgrade(config, "head")
    assert sa.inspect(engine).get_table_names() == []
    upgrade(engine, lock_timeout=MAX_MIGRATION_LOCK_TIMEOUT)  # the bound works everywhere
    upgrade(engine, lock_timeout=0)
    upgrade(engine, lock_timeout=decimal.Decimal("5"))  # a number of seconds, as 5 is
    assert current(engine) == HEAD
