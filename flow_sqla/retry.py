"""Retrying a whole unit of work: which errors a re-run can get past, and the loop that does it.

A lock wait timeout, a deadlock, a PostgreSQL serialization failure and a Galera certification
failure (the writeset that lost to another node's, rejected at ``COMMIT``) all mean the same to
the caller: the database rolled the transaction back and running it again may succeed. The
statement that failed may be the caller's own, the library's, or the ``COMMIT`` — so the unit to
retry is the whole transaction, which is what :func:`run_in_transaction` does. See
``docs/transactions.md``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from flow.errors import FlowError
from flow.workflow.errors import ConcurrentSubmitError
from flow_sqla._dialect import is_conflict, is_driver_error
from flow_sqla._translate import Translating, commit, translate
from flow_sqla.errors import CommitOutcomeUnknownError

T = TypeVar("T")

#: First back-off ceiling and the largest one, in seconds (full jitter: a uniform draw below).
BASE_DELAY = 0.01
MAX_DELAY = 1.0
#: How the helper waits between attempts (tests replace it to record the delays).
_sleep: Callable[[float], None] = time.sleep


def is_retryable(exc: BaseException) -> bool:
    """Whether re-running the transaction that raised ``exc`` can succeed.

    True for :class:`~flow.workflow.ConcurrentSubmitError` and for lock wait timeouts,
    deadlocks and serialization failures of every supported database — MySQL/MariaDB errors
    1205, 1213 (Galera's certification failure too), 3572 and 1020, PostgreSQL SQLSTATE 40001,
    40P01 and 55P03, SQLite's "database is locked" — raised raw by the driver (mysqlclient,
    PyMySQL, psycopg 2/3, sqlite3), wrapped by SQLAlchemy (``exc.orig``) or chained as the
    ``__cause__`` of any exception. False for :class:`~flow_sqla.errors.CommitOutcomeUnknownError`
    (the unit may have committed: re-run it only if that is safe), for a lost connection and for
    everything else.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, CommitOutcomeUnknownError):
            return False
        if isinstance(current, ConcurrentSubmitError):
            return True
        if isinstance(current, sa.exc.DBAPIError):
            if current.orig is not None and is_conflict(current.orig):
                return True
        elif is_driver_error(current) and is_conflict(current):
            return True
        current = current.__cause__
    return False


def run_in_transaction(
    bind: Engine,
    fn: Callable[[Connection], T],
    *,
    attempts: int = 5,
    idempotent: bool = False,
    on_retry: Callable[[int, FlowError], None] | None = None,
) -> T:
    """Run ``fn(conn)`` in ``bind.begin()``, commit, and return what ``fn`` returned; run the
    whole unit again — a new transaction on a new connection — when it fails with an error
    :func:`is_retryable` accepts, at any point including the ``COMMIT``.

    ``fn`` must do all its work on ``conn`` (pass ``connection=conn`` into every
    ``FlowContext``) and be safe to call again: anything it did outside the database is not
    undone. Between attempts the helper sleeps a random time below ``0.01 * 2**n`` seconds
    (at most 1 s) and calls ``on_retry(n, error)`` (n = 1, 2, ...) first.

    ``idempotent=True`` declares that re-running ``fn`` after a ``COMMIT`` that did in fact
    succeed is harmless — true when every write ``fn`` makes re-checks its precondition under
    the row lock, like ``submit_task_if_waiting`` (the re-run then returns ``False``); a blind
    ``submit_task`` is not. Only then is a unit whose ``COMMIT`` lost its connection run again.

    Never lets a driver or SQLAlchemy exception out. Raises
    :class:`~flow.workflow.ConcurrentSubmitError` when every attempt lost a conflict,
    :class:`~flow_sqla.errors.CommitOutcomeUnknownError` when the connection was lost during
    ``COMMIT`` (and ``fn`` is not idempotent, or no later attempt completed — the node may
    still be down: the earlier ``COMMIT`` may have succeeded),
    :class:`~flow_sqla.errors.RepositoryError` for any other database error (in each case with
    the cause chained), whatever ``fn`` raised itself otherwise (after the rollback), and
    ``ValueError`` when ``attempts`` is below 1.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    # Once a COMMIT's outcome is unknown, only an attempt that completes settles it: a later
    # one that fails any other way (the node is still down) leaves it unknown.
    unknown: CommitOutcomeUnknownError | None = None
    for attempt in range(1, attempts + 1):
        try:
            return _run_once(bind, fn)
        except CommitOutcomeUnknownError as error:
            if not idempotent or attempt == attempts:
                raise
            unknown = unknown or error
            last: FlowError = error
        except FlowError as error:
            retryable = is_retryable(error)
            if unknown is not None and (not retryable or attempt == attempts):
                raise _still_unknown(unknown, error) from error
            if not retryable:
                raise
            if attempt == attempts:
                instance_id = getattr(error, "instance_id", "") or ""
                raise ConcurrentSubmitError(
                    instance_id,
                    f"Gave up after {attempts} attempts, each lost to a concurrent "
                    f"transaction; the last: {error}",
                ) from error
            last = error
        if on_retry is not None:
            on_retry(attempt, last)
        _sleep(backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _still_unknown(
    unknown: CommitOutcomeUnknownError, error: FlowError
) -> CommitOutcomeUnknownError:
    """The error for a unit whose ``COMMIT`` outcome was unknown and whose re-run, which
    would have settled it, failed with ``error`` (raise it ``from error``)."""
    instance_id = getattr(error, "instance_id", None) or unknown.instance_id
    return CommitOutcomeUnknownError(
        f"{unknown.detail}; running the unit again to settle it failed: {error}",
        instance_id=instance_id,
    )


def backoff(attempt: int) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): full jitter, capped."""
    return random.uniform(0.0, min(MAX_DELAY, BASE_DELAY * 2**attempt))


def _run_once(bind: Engine, fn: Callable[[Connection], T]) -> T:
    """One attempt: every SQLAlchemy or driver error becomes a library error."""
    guard = Translating(None, None)
    try:
        with guard, bind.connect() as conn, conn.begin() as trans:
            result = fn(conn)
            guard.committing = True
            commit(conn, trans)
    except Exception as exc:
        if is_driver_error(exc):  # a raw DBAPI call inside fn
            raise translate(None, exc, None, at_commit=guard.committing) from exc
        raise
    return result


__all__ = ["is_retryable", "run_in_transaction"]
