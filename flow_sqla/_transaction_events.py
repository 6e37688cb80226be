"""Listening to a caller's engine for the ends of its transactions.

A claim in the caller's transaction defers its row write so that the submit that usually
follows in the same transaction sends one ``UPDATE`` for both (``docs/persistence.md`` §3).
When no submit follows, the write must still reach the row before the transaction commits —
and never after it has rolled back or the server has ended it. The library cannot wrap the
caller's ``engine.begin()``, so it listens to the engine's transaction events, once per
engine, the first time it defers a write there:

- ``commit`` (and a two-phase ``prepare``, or a ``commit`` without one): send the deferred
  write first, inside the transaction, when it is still the one the write was decided in;
- ``savepoint``: send it first, so that rolling the savepoint back cannot take it along;
- ``rollback``: drop it, with every row held on the connection;
- ``handle_error``: an error that ends the whole transaction on the server while the
  ``Connection`` still calls it active — a deadlock or lock wait timeout (InnoDB, Galera), a
  serialization failure, a lost connection — drops them too, whichever statement raised it:
  the rows' locks went with the transaction.

None of these listeners watches statements, so the library's statements keep the
driver-level path (:func:`flow_sqla._prepared.driver_path_open` looks at the statement
listeners, not at whether the engine has any listener).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from flow_sqla._dialect import is_conflict
from flow_sqla._held import HELD

__all__ = ["watch"]

_WATCHED: weakref.WeakSet[Engine] = weakref.WeakSet()
_LOCK = threading.Lock()


def watch(engine: Engine) -> None:
    """Listen to ``engine``'s transaction ends (once per engine object: an
    ``execution_options`` copy is an engine of its own)."""
    if engine in _WATCHED:
        return
    with _LOCK:
        if engine in _WATCHED:
            return
        event.listen(engine, "commit", _before_commit)
        event.listen(engine, "prepare_twophase", _before_prepare)
        event.listen(engine, "commit_twophase", _before_commit_twophase)
        event.listen(engine, "savepoint", _before_savepoint)
        event.listen(engine, "rollback", _on_rollback)
        event.listen(engine, "handle_error", _on_error)
        _WATCHED.add(engine)


def _before_commit(conn: Connection) -> None:
    HELD.settle_at_commit(conn)


def _before_prepare(conn: Connection, xid: Any) -> None:
    HELD.settle_at_commit(conn)


def _before_commit_twophase(conn: Connection, xid: Any, is_prepared: bool) -> None:
    if not is_prepared:
        HELD.settle_at_commit(conn)


def _before_savepoint(conn: Connection, name: str | None) -> None:
    HELD.settle(conn)


def _on_rollback(conn: Connection) -> None:
    HELD.forget(conn)


def _on_error(context: Any) -> None:
    """``context`` is SQLAlchemy's ``ExceptionContext``; never raises, changes nothing in it."""
    conn = context.connection
    if conn is None:
        return
    if context.is_disconnect or is_conflict(context.original_exception):
        HELD.forget(conn)
