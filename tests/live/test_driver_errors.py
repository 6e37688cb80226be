"""Real errors of each MySQL driver, raised by a live server, read the way the library reads
them: a missing table, a lock wait timeout, a deadlock — PyMySQL 1.1+ carries the server's
SQLSTATE too (``42S02``, ``HY000``, ``40001``), which was taken for PostgreSQL's and hid the
error number (a lock wait timeout was not retryable, any error "ended the transaction")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from flow_sqla import is_retryable
from flow_sqla._dialect import ends_transaction, is_conflict, is_lock_timeout, is_missing_schema

DRIVERS = ["mysqldb", "pymysql"]


@pytest.fixture(params=DRIVERS)
def mysql(
    request: pytest.FixtureRequest, make_database_url: Callable[[str], str]
) -> Iterator[sa.Engine]:
    """An engine of the driver on a throwaway MySQL/MariaDB database holding table ``t``."""
    driver = request.param
    pytest.importorskip("MySQLdb" if driver == "mysqldb" else "pymysql")
    url = sa.make_url(make_database_url("mysql")).set(drivername=f"mysql+{driver}")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        conn.exec_driver_sql("INSERT INTO t VALUES (1, 0), (2, 0)")
    yield engine
    engine.dispose()


def _raised(engine: sa.Engine, sql: str) -> BaseException:
    with engine.connect() as conn, pytest.raises(sa.exc.DBAPIError) as raised:
        conn.exec_driver_sql(sql)
    return raised.value.orig  # type: ignore[return-value]


def test_a_missing_table_is_read_as_one(mysql: sa.Engine) -> None:
    orig = _raised(mysql, "SELECT * FROM no_such_table")
    assert is_missing_schema(orig)
    assert not is_conflict(orig) and not ends_transaction(orig)


def test_a_lock_wait_timeout_is_a_retryable_conflict_that_ends_only_its_statement(
    mysql: sa.Engine,
) -> None:
    with mysql.connect() as holder, holder.begin():
        holder.exec_driver_sql("UPDATE t SET v = 1 WHERE id = 1")
        with mysql.connect() as waiter, waiter.begin():
            waiter.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1")
            with pytest.raises(sa.exc.DBAPIError) as raised:
                waiter.exec_driver_sql("UPDATE t SET v = 2 WHERE id = 1")
    orig = raised.value.orig
    assert orig is not None
    assert is_conflict(orig) and is_lock_timeout(orig) and is_retryable(raised.value)
    assert not ends_transaction(orig) and not is_missing_schema(orig)


def test_a_deadlock_is_a_retryable_conflict_that_ends_the_transaction(mysql: sa.Engine) -> None:
    first_locked, second_locked = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def lock(first: int, then: int, mine: threading.Event, theirs: threading.Event) -> None:
        with mysql.connect() as conn, conn.begin():
            conn.exec_driver_sql(f"UPDATE t SET v = v + 1 WHERE id = {first}")
            mine.set()
            theirs.wait(30)
            try:
                conn.exec_driver_sql(f"UPDATE t SET v = v + 1 WHERE id = {then}")
            except sa.exc.DBAPIError as exc:
                errors.append(exc)  # its transaction rolls back as the block ends

    threads = [
        threading.Thread(target=lock, args=(1, 2, first_locked, second_locked)),
        threading.Thread(target=lock, args=(2, 1, second_locked, first_locked)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(errors) == 1, errors  # InnoDB picks one victim
    orig = errors[0].orig  # type: ignore[attr-defined]
    assert is_conflict(orig) and ends_transaction(orig) and is_retryable(errors[0])
    assert not is_lock_timeout(orig)
