"""Retrying a whole unit of work: which errors a re-run can get past, and the loop that does it.

A lock wait timeout, a deadlock, a PostgreSQL serialization failure and a Galera certification
failure (the writeset that lost to another node's, rejected at ``COMMIT``) all mean the same to
the caller: the database rolled the transaction back and running it again may succeed. The
statement that failed may be the caller's own, the library's, or the ``COMMIT`` — so the unit to
retry is the whole transaction, which is what :func:`run_in_transaction` does. See
``docs/transactions.md``.
"""

from __future__ import annotations

import inspect
import random
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Transaction

from flow.errors import FlowError, InvalidArgumentTypeError
from flow.workflow.errors import ConcurrentSubmitError
from flow_sqla._dialect import is_conflict, is_driver_error
from flow_sqla._options import callable_or_none, flag, whole_number
from flow_sqla._transaction_events import track_unit, untrack_unit, watch_units
from flow_sqla._translate import Translating, commit, translate
from flow_sqla.errors import (
    CommitOutcomeUnknownError,
    InvalidArgumentError,
    TransactionEndedError,
)

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
    (the unit may have committed: re-run it only if that is safe), for
    :class:`~flow_sqla.errors.TransactionEndedError` (``fn`` committed on its own), for a lost
    connection and for everything else (``None`` included). Anything that is not an
    exception raises :class:`~flow.errors.InvalidArgumentTypeError`: it is not the error an
    ``except`` clause caught (an ``AttributeError`` from the walk of its causes, before).
    """
    if exc is not None and not isinstance(exc, BaseException):
        raise InvalidArgumentTypeError("exc", exc, "an exception (or None)")
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, CommitOutcomeUnknownError | TransactionEndedError):
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
    the cause chained), whatever ``fn`` raised itself otherwise (after the rollback),
    :class:`~flow_sqla.errors.TransactionEndedError` when ``fn`` committed the transaction
    itself (never run again: what it committed is kept), or rolled it back or closed it and
    returned (an error it raised after its own rollback is its own error), ``TypeError``
    for an argument of the wrong type (``bind`` not an ``Engine``, a generator or ``async``
    ``fn``, a non-bool ``idempotent``, ``attempts`` not an ``int``) and ``ValueError`` when
    ``attempts`` is below 1 — these two before anything runs.
    """
    _check_arguments(bind, fn, attempts, idempotent, on_retry)
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
            _call_hook(on_retry, attempt, last)
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


def _check_arguments(
    bind: object, fn: object, attempts: object, idempotent: object, on_retry: object
) -> None:
    """Refuse, before anything runs, what would otherwise misbehave later: a URL or a
    ``Connection`` for ``bind`` (a unit needs a pool to take a new connection from per
    attempt), a ``fn`` whose body a call does not run (a generator or ``async`` function: the
    empty transaction would commit), a truthy non-bool ``idempotent`` (taken for ``True``, it
    would re-run a unit whose ``COMMIT`` may have succeeded), a hook that cannot be called."""
    if not isinstance(bind, Engine):
        raise InvalidArgumentTypeError("bind", bind, "an Engine (sqlalchemy.create_engine(url))")
    if not callable(fn):
        raise InvalidArgumentTypeError("fn", fn, "callable")
    if _is_deferred_function(fn):
        raise InvalidArgumentTypeError(
            "fn",
            fn,
            "a function that does its work when called (a generator or async function returns "
            "before its body runs, so the unit would commit nothing)",
        )
    if whole_number("attempts", attempts) < 1:
        raise InvalidArgumentError("attempts", attempts, "must be at least 1")
    flag("idempotent", idempotent)
    callable_or_none("on_retry", on_retry)


def _is_deferred_function(fn: object) -> bool:
    """Whether calling ``fn`` returns before its body runs (``functools.partial`` unwrapped)."""
    return (
        inspect.isgeneratorfunction(fn)
        or inspect.iscoroutinefunction(fn)
        or inspect.isasyncgenfunction(fn)
    )


def _call_hook(on_retry: Callable[[int, FlowError], None], attempt: int, error: FlowError) -> None:
    """``on_retry(attempt, error)``; an exception it raises is what the caller gets, with the
    conflict it was told about as its context."""
    try:
        on_retry(attempt, error)
    except BaseException as exc:
        if exc.__context__ is None and exc is not error:
            exc.__context__ = error
        raise


def _run_once(bind: Engine, fn: Callable[[Connection], T]) -> T:
    """One attempt: every SQLAlchemy or driver error becomes a library error."""
    guard = Translating(None, None)
    watch_units(bind)
    try:
        with guard, bind.connect() as conn, conn.begin() as trans:
            result = _call_fn(fn, conn, trans)
            guard.committing = True
            commit(conn, trans)
    except Exception as exc:
        if is_driver_error(exc):  # a raw DBAPI call inside fn
            raise translate(None, exc, None, at_commit=guard.committing) from exc
        raise
    return result


def _call_fn(fn: Callable[[Connection], T], conn: Connection, trans: Transaction) -> T:
    """``fn(conn)``, refusing a unit whose transaction ``fn`` ended itself: committed (its
    error, if it raised one, is chained — a conflict after that commit must not run the unit
    again), or rolled back or closed and then returned as if its work were done. An error
    raised after ``fn`` rolled back (an ORM ``Session`` joined to ``conn`` does on an error)
    is ``fn``'s own, retried as any other. A lost connection is not ``fn``'s doing."""
    unit = track_unit(conn)
    try:
        try:
            result = fn(conn)
        except Exception as exc:
            if unit.committed:
                raise TransactionEndedError(
                    "committed the unit's transaction, then raised"
                ) from exc
            raise
        if unit.committed:
            raise TransactionEndedError("committed the unit's transaction itself")
        if not trans.is_active and not conn.invalidated:
            raise TransactionEndedError(
                "rolled back or closed the unit's transaction, then returned (nothing of its "
                "work is stored)"
            )
    finally:
        untrack_unit(conn)
    _check_result(result)
    return result


def _check_result(result: object) -> None:
    """Refuse a result that is work not done yet (a callable object returning a coroutine):
    raised inside the transaction, which then rolls back."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # no "never awaited" warning
        raise TypeError(
            f"fn returned a {type(result).__name__}: its work is not done when the unit "
            "commits; call a function that does the work"
        )


__all__ = ["is_retryable", "run_in_transaction"]
