"""flow_sqla.is_retryable and run_in_transaction without a server: real driver exception
objects (PyMySQL, psycopg 3, sqlite3; mysqlclient's shape), and the retry loop on SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from flow import InvalidArgumentTypeError
from flow.workflow import ConcurrentSubmitError
from flow_sqla import (
    CommitOutcomeUnknownError,
    InvalidArgumentError,
    RepositoryError,
    TransactionEndedError,
    is_retryable,
    run_in_transaction,
)
from flow_sqla import retry as retry_module


def wrapped(orig: BaseException, cls: type[sa.exc.DBAPIError] = sa.exc.OperationalError) -> Any:
    """The SQLAlchemy exception a failed statement raises around ``orig``."""
    return cls("UPDATE t SET x = 1", {}, orig)


class MySQLdbShaped(Exception):
    """mysqlclient's OperationalError: ``args = (errno, message)`` (driver not installed here)."""


class MariaDBConnectorShaped(Exception):
    """MariaDB Connector/Python and mysql-connector: the number in ``errno``."""

    def __init__(self, message: str, errno: int) -> None:
        super().__init__(message)
        self.errno = errno


MYSQL_CONFLICTS = [
    (1205, "Lock wait timeout exceeded; try restarting transaction"),
    # Galera reports a certification failure at COMMIT as a deadlock.
    (1213, "Deadlock found when trying to get lock; try restarting transaction"),
    (3572, "Statement aborted because lock(s) could not be acquired immediately and NOWAIT"),
    (1020, "Record has changed since last read in table 'bpm_flow_repository'"),
]
PG_CONFLICTS = [
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
]


@pytest.mark.parametrize(("errno", "message"), MYSQL_CONFLICTS)
def test_mysql_conflicts_are_retryable_raw_and_wrapped(errno: int, message: str) -> None:
    raw = pymysql.err.OperationalError(errno, message)
    assert is_retryable(raw)
    assert is_retryable(wrapped(raw))
    assert is_retryable(wrapped(MySQLdbShaped(errno, message)))
    assert is_retryable(wrapped(MariaDBConnectorShaped(message, errno)))


@pytest.mark.parametrize("cls", PG_CONFLICTS)
def test_postgresql_conflicts_are_retryable_raw_and_wrapped(cls: type[Exception]) -> None:
    raw = cls("could not serialize access due to concurrent update")
    assert is_retryable(raw)
    assert is_retryable(wrapped(raw))


def test_sqlite_busy_is_retryable() -> None:
    raw = sqlite3.OperationalError("database is locked")
    assert is_retryable(raw)
    assert is_retryable(wrapped(raw))


def test_library_errors_are_retryable_through_their_cause() -> None:
    assert is_retryable(ConcurrentSubmitError("i-1"))
    repo = RepositoryError("Database error", instance_id="i-1")
    repo.__cause__ = wrapped(pymysql.err.OperationalError(1213, "Deadlock found"))
    assert is_retryable(repo)
    outer = RuntimeError("request failed")
    outer.__cause__ = repo
    assert is_retryable(outer)


@pytest.mark.parametrize(
    "exc",
    [
        pymysql.err.IntegrityError(1062, "Duplicate entry 'x' for key 'instant_id'"),
        pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"),
        pymysql.err.OperationalError(1047, "WSREP has not yet prepared node for application use"),
        wrapped(MySQLdbShaped(1146, "Table 'test.t' doesn't exist"), sa.exc.ProgrammingError),
        psycopg.errors.UniqueViolation("duplicate key value violates unique constraint"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        sqlite3.OperationalError("no such table: t"),
        OSError(1213, "an OS error with a conflict's number is no database error"),
        ValueError("deadlock"),
        RepositoryError("Database error"),
    ],
    ids=repr,
)
def test_other_errors_are_not_retryable(exc: BaseException) -> None:
    assert not is_retryable(exc)
    if type(exc).__module__.startswith(("pymysql", "psycopg", "sqlite3")):
        assert not is_retryable(wrapped(exc))


def test_commit_outcome_unknown_is_not_retryable_even_with_a_conflict_below() -> None:
    unknown = CommitOutcomeUnknownError("OperationalError: (2013, 'Lost connection')")
    unknown.__cause__ = ConcurrentSubmitError("i-1")
    assert isinstance(unknown, RepositoryError)
    assert not is_retryable(unknown)


def test_a_cause_cycle_ends() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert not is_retryable(a)


# -- run_in_transaction on SQLite ------------------------------------------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[sa.Engine]:
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'r.sqlite'}", connect_args={"timeout": 0.05})
    with eng.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)")
    yield eng
    assert eng.pool.checkedout() == 0  # type: ignore[attr-defined]
    eng.dispose()


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []
    monkeypatch.setattr(retry_module, "_sleep", waited.append)
    return waited


def rows(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return [v for (v,) in conn.exec_driver_sql("SELECT v FROM t ORDER BY id")]


def test_returns_what_fn_returned_and_commits(engine: sa.Engine, delays: list[float]) -> None:
    def fn(conn: sa.Connection) -> int:
        conn.exec_driver_sql("INSERT INTO t (v) VALUES ('a')")
        return 42

    assert run_in_transaction(engine, fn) == 42
    assert rows(engine) == ["a"] and delays == []


def test_a_retryable_failure_reruns_the_whole_unit(engine: sa.Engine, delays: list[float]) -> None:
    calls: list[int] = []
    retries: list[tuple[int, str]] = []

    def fn(conn: sa.Connection) -> str:
        conn.exec_driver_sql(f"INSERT INTO t (v) VALUES ('try{len(calls)}')")
        calls.append(1)
        if len(calls) < 3:
            raise ConcurrentSubmitError("i-1")
        return "done"

    result = run_in_transaction(
        engine, fn, on_retry=lambda n, e: retries.append((n, type(e).__name__))
    )
    assert result == "done" and len(calls) == 3
    assert rows(engine) == ["try2"]  # the failed attempts were rolled back
    assert retries == [(1, "ConcurrentSubmitError"), (2, "ConcurrentSubmitError")]
    assert len(delays) == 2 and all(0 <= d <= retry_module.MAX_DELAY for d in delays)


def test_gives_up_with_concurrent_submit_error(engine: sa.Engine, delays: list[float]) -> None:
    calls: list[int] = []

    def fn(conn: sa.Connection) -> None:
        calls.append(1)
        raise ConcurrentSubmitError("i-7")

    with pytest.raises(ConcurrentSubmitError, match="Gave up after 3 attempts") as info:
        run_in_transaction(engine, fn, attempts=3)
    assert len(calls) == 3 and len(delays) == 2
    assert info.value.instance_id == "i-7" and info.value.retryable


def test_a_busy_commit_is_retried(engine: sa.Engine, delays: list[float], tmp_path: Path) -> None:
    """COMMIT itself fails: another connection holds a read lock when the writer must commit
    (SQLite's SQLITE_BUSY at COMMIT, a real driver error) — the unit runs again."""
    reader = sqlite3.connect(tmp_path / "r.sqlite", isolation_level=None)
    calls: list[int] = []

    def fn(conn: sa.Connection) -> int:
        calls.append(1)
        conn.exec_driver_sql(f"INSERT INTO t (v) VALUES ('w{len(calls)}')")
        if len(calls) == 1:  # a reader's shared lock blocks this first COMMIT
            reader.execute("BEGIN")
            reader.execute("SELECT * FROM t").fetchall()
        return len(calls)

    def release(attempt: int, error: Exception) -> None:
        assert isinstance(error, ConcurrentSubmitError), error
        assert isinstance(error.__cause__, sa.exc.OperationalError)
        reader.execute("COMMIT")

    try:
        assert run_in_transaction(engine, fn, on_retry=release) == 2
    finally:
        reader.close()
    assert rows(engine) == ["w2"]


def test_other_database_errors_become_repository_errors(
    engine: sa.Engine, delays: list[float]
) -> None:
    def fn(conn: sa.Connection) -> None:
        conn.exec_driver_sql("INSERT INTO t (v) VALUES ('dup')")
        conn.exec_driver_sql("INSERT INTO t (v) VALUES ('dup')")

    with pytest.raises(RepositoryError, match="IntegrityError") as info:
        run_in_transaction(engine, fn)
    assert isinstance(info.value.__cause__, sa.exc.IntegrityError)
    assert not isinstance(info.value, CommitOutcomeUnknownError)
    assert rows(engine) == [] and delays == []


def test_raw_driver_errors_inside_fn_are_translated(engine: sa.Engine, delays: list[float]) -> None:
    def fn(conn: sa.Connection) -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(ConcurrentSubmitError) as info:
        run_in_transaction(engine, fn, attempts=2)
    assert isinstance(info.value.__cause__, ConcurrentSubmitError)
    assert isinstance(info.value.__cause__.__cause__, sqlite3.OperationalError)


def test_fn_errors_propagate_after_rollback(engine: sa.Engine, delays: list[float]) -> None:
    class Refused(Exception):
        pass

    def fn(conn: sa.Connection) -> None:
        conn.exec_driver_sql("INSERT INTO t (v) VALUES ('x')")
        raise Refused

    with pytest.raises(Refused):
        run_in_transaction(engine, fn)
    assert rows(engine) == [] and delays == []


def test_commit_outcome_unknown_is_rerun_only_when_idempotent(
    engine: sa.Engine, delays: list[float]
) -> None:
    calls: list[int] = []

    def fn(conn: sa.Connection) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise CommitOutcomeUnknownError("lost")
        return len(calls)

    with pytest.raises(CommitOutcomeUnknownError):
        run_in_transaction(engine, fn)
    assert len(calls) == 1 and delays == []
    calls.clear()
    assert run_in_transaction(engine, fn, idempotent=True) == 2  # call 1 raised, 2 returned
    assert len(delays) == 1


@pytest.mark.parametrize(
    "then",
    [
        RepositoryError('Database error OperationalError: (2003, "Can\'t connect")'),
        ConcurrentSubmitError("i-1", "lost to a concurrent transaction"),
    ],
)
def test_an_unknown_commit_outcome_stays_unknown_when_no_rerun_completes(
    engine: sa.Engine, delays: list[float], then: Exception
) -> None:
    """The re-run of an idempotent unit is what settles a lost COMMIT; when it cannot run
    (the node is still down) or keeps losing, the earlier COMMIT may still have committed:
    the caller must not be told "did not commit" by a plain RepositoryError."""
    calls: list[int] = []

    def fn(conn: sa.Connection) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise CommitOutcomeUnknownError("OperationalError: (2013, 'Lost connection')")
        raise then

    with pytest.raises(CommitOutcomeUnknownError, match="to settle it failed") as raised:
        run_in_transaction(engine, fn, attempts=3, idempotent=True)
    assert raised.value.__cause__ is then
    assert "Lost connection" in str(raised.value)


@pytest.mark.parametrize("attempts", [0, -1])
def test_attempts_below_one_are_refused(engine: sa.Engine, attempts: int) -> None:
    with pytest.raises(
        InvalidArgumentError, match=rf"Invalid attempts {attempts}: must be at least 1"
    ):
        run_in_transaction(engine, lambda conn: None, attempts=attempts)


def _insert_then_commit(conn: sa.Connection) -> str:
    conn.exec_driver_sql("INSERT INTO t (v) VALUES ('paid')")
    conn.commit()  # "commits its own work": the helper can no longer roll the unit back
    return "paid"


def _insert_then_roll_back(conn: sa.Connection) -> str:
    conn.exec_driver_sql("INSERT INTO t (v) VALUES ('paid')")
    conn.rollback()
    return "paid"


@pytest.mark.parametrize(
    ("fn", "said"),
    [(_insert_then_commit, "committed the unit's"), (_insert_then_roll_back, "rolled back")],
)
def test_fn_that_ends_the_transaction_and_returns_gets_a_usage_error_and_is_not_rerun(
    engine: sa.Engine, delays: list[float], fn: Any, said: str
) -> None:
    """Not a "database error" after a commit that happened (a caller repeating the unit on
    RepositoryError would pay twice), and never retried."""
    with pytest.raises(TransactionEndedError, match=said):
        run_in_transaction(engine, fn, attempts=3)
    assert rows(engine) == (["paid"] if fn is _insert_then_commit else [])
    assert delays == []


def test_a_conflict_after_fn_committed_itself_is_not_retried(
    engine: sa.Engine, delays: list[float]
) -> None:
    calls: list[int] = []

    def fn(conn: sa.Connection) -> str:
        calls.append(1)
        _insert_then_commit(conn)
        raise ConcurrentSubmitError("i-1", "lost to a concurrent transaction")

    with pytest.raises(TransactionEndedError) as raised:
        run_in_transaction(engine, fn, attempts=3)
    assert isinstance(raised.value.__cause__, ConcurrentSubmitError)
    assert not is_retryable(raised.value)
    assert len(calls) == 1 and rows(engine) == ["paid"] and delays == []


def _generator_fn(conn: sa.Connection) -> Iterator[str]:
    conn.exec_driver_sql("INSERT INTO t (v) VALUES ('a')")
    yield "done"


async def _async_fn(conn: sa.Connection) -> str:
    conn.exec_driver_sql("INSERT INTO t (v) VALUES ('a')")
    return "done"


@pytest.mark.parametrize(
    ("arguments", "error", "named"),
    [
        ({"fn": _generator_fn}, InvalidArgumentTypeError, "generator or async function"),
        ({"fn": _async_fn}, InvalidArgumentTypeError, "generator or async function"),
        ({"fn": None}, InvalidArgumentTypeError, "fn must be callable"),
        ({"bind": "sqlite://"}, InvalidArgumentTypeError, "bind must be an Engine"),
        ({"bind": None}, InvalidArgumentTypeError, "bind must be an Engine"),
        ({"attempts": True}, InvalidArgumentTypeError, "attempts must be an integer"),
        ({"attempts": 2.5}, InvalidArgumentTypeError, "attempts must be an integer"),
        ({"attempts": "3"}, InvalidArgumentTypeError, "attempts must be an integer"),
        ({"attempts": None}, InvalidArgumentTypeError, "attempts must be an integer"),
        ({"idempotent": "no"}, InvalidArgumentTypeError, "idempotent must be True or False"),
        ({"idempotent": 1}, InvalidArgumentTypeError, "idempotent must be True or False"),
        ({"on_retry": 5}, InvalidArgumentTypeError, "on_retry must be callable"),
    ],
    ids=repr,
)
def test_wrong_arguments_are_refused_before_anything_runs(
    engine: sa.Engine, delays: list[float], arguments: dict[str, Any], error: type, named: str
) -> None:
    """A generator's or coroutine's body never ran: the empty unit committed and the object
    came back as if the work were done; ``idempotent="no"`` re-ran a unit whose COMMIT may
    have succeeded; the rest failed later, naming nothing."""
    call: dict[str, Any] = {"bind": engine, "fn": lambda conn: "ok", **arguments}
    with pytest.raises(error, match=named):
        run_in_transaction(call.pop("bind"), call.pop("fn"), **call)
    assert rows(engine) == [] and delays == []


def test_a_result_that_is_work_not_done_is_refused_and_rolled_back(
    engine: sa.Engine, delays: list[float]
) -> None:
    def fn(conn: sa.Connection) -> Any:
        conn.exec_driver_sql("INSERT INTO t (v) VALUES ('a')")
        return _async_fn(conn)  # a callable whose result is a coroutine

    with pytest.raises(TypeError, match="fn returned a coroutine"):
        run_in_transaction(engine, fn)
    assert rows(engine) == []


def test_a_generator_over_rows_already_read_is_a_result_like_any_other(
    engine: sa.Engine, delays: list[float]
) -> None:
    def fn(conn: sa.Connection) -> Iterator[str]:
        conn.exec_driver_sql("INSERT INTO t (v) VALUES ('y')")
        read = conn.exec_driver_sql("SELECT v FROM t").all()
        return (v for (v,) in read)

    assert list(run_in_transaction(engine, fn)) == ["y"]
    assert rows(engine) == ["y"]


def test_an_error_after_a_rollback_of_fn_s_own_is_fn_s_error_and_retried(
    engine: sa.Engine, delays: list[float]
) -> None:
    """An ORM Session joined to the connection rolls the unit's transaction back on an
    error; so does a fn that cleans up and re-raises: nothing is kept, the conflict is
    retried, any other error is fn's own."""
    calls: list[int] = []

    def fn(conn: sa.Connection) -> str:
        calls.append(1)
        try:
            with Session(bind=conn) as session, session.begin():
                session.execute(sa.text("INSERT INTO t (v) VALUES ('a')"))
                if len(calls) < 3:
                    raise ConcurrentSubmitError("i-1", "lost to a concurrent transaction")
        except ConcurrentSubmitError:
            conn.rollback()
            raise
        return "done"

    assert run_in_transaction(engine, fn) == "done"
    assert len(calls) == 3 and rows(engine) == ["a"] and len(delays) == 2

    class NotFound(Exception):
        pass

    def missing(conn: sa.Connection) -> None:
        conn.rollback()
        raise NotFound("no such order")

    with pytest.raises(NotFound):
        run_in_transaction(engine, missing)


def test_an_interrupt_after_fn_s_own_rollback_is_not_turned_into_an_error(
    engine: sa.Engine, delays: list[float]
) -> None:
    def fn(conn: sa.Connection) -> None:
        conn.rollback()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_in_transaction(engine, fn)


def test_an_on_retry_hook_that_raises_keeps_the_conflict_as_its_context(
    engine: sa.Engine, delays: list[float]
) -> None:
    conflict = ConcurrentSubmitError("i-1", "lost")

    def fn(conn: sa.Connection) -> None:
        raise conflict

    def hook(attempt: int, error: Exception) -> None:
        raise RuntimeError("metrics down")

    with pytest.raises(RuntimeError, match="metrics down") as raised:
        run_in_transaction(engine, fn, on_retry=hook)
    assert raised.value.__context__ is conflict


def test_backoff_grows_and_is_capped() -> None:
    for attempt in range(1, 12):
        ceiling = min(retry_module.MAX_DELAY, retry_module.BASE_DELAY * 2**attempt)
        assert all(0 <= retry_module.backoff(attempt) <= ceiling for _ in range(50))
