"""Listening to a caller's engine for the ends of its transactions.

An operation in the caller's transaction leaves the row it locked held for the next one on
the same instance, and a claim there defers its row write so that the submit that usually
follows in the same transaction sends one ``UPDATE`` for both (``docs/persistence.md`` §3).
When no submit follows, the write must still reach the row before the transaction commits —
and neither the write nor a held row may outlive the transaction, rolled back or ended by the
server. The library cannot wrap the caller's ``engine.begin()``, so it listens to the engine's
events, once per engine, from the first row it holds there:

- ``commit``: send the deferred write first, inside the transaction, when that is still the
  one the write was decided in; if sending fails, roll the server's transaction back before
  the error leaves (SQLAlchemy, its ``COMMIT`` abandoned, would send no ``ROLLBACK``);
- ``savepoint``: send it first, so that rolling the savepoint back cannot take it along;
- ``set_connection_execution_options``: send it first — a new ``schema_translate_map`` would
  send it to another schema's table;
- ``rollback``: drop it, with every row held on the connection;
- ``handle_error``: an error that ends the whole transaction on the server while the
  ``Connection`` still calls it active (:func:`flow_sqla._dialect.ends_transaction`: a
  deadlock or Galera certification failure on MySQL/MariaDB, any error on PostgreSQL; a lock
  wait timeout where the server runs with ``innodb_rollback_on_timeout``, asked once per
  engine) or a lost connection drops them too, whichever statement raised it: the rows'
  locks went with the transaction.

None of these listeners watches statements, so the library's statements keep the
driver-level path (:func:`flow_sqla._prepared.driver_path_open` looks at the statement
listeners, not at whether the engine has any listener). Two-phase transactions defer nothing
(the repository writes at once there), so their events need no listener.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import suppress
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from flow_sqla._dialect import ends_transaction, is_lock_timeout, rolls_back_on_lock_timeout
from flow_sqla._held import HELD

__all__ = ["UnitCommits", "track_unit", "untrack_unit", "watch", "watch_units"]

_WATCHED: weakref.WeakSet[Engine] = weakref.WeakSet()
_LOCK = threading.Lock()
#: Per engine: whether its MySQL/MariaDB server ends the transaction on a lock wait timeout.
_TIMEOUT_ENDS: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def watch(engine: Engine) -> None:
    """Listen to ``engine``'s transaction ends (once per engine object: an
    ``execution_options`` copy is an engine of its own). Called for every row held and
    every deferred claim: the common case — watched already — returns at once."""
    if engine in _WATCHED:
        return
    _listen_once(
        engine,
        _WATCHED,
        (
            ("commit", _before_commit),
            ("savepoint", _before_savepoint),
            ("set_connection_execution_options", _before_new_options),
            ("rollback", _on_rollback),
            ("handle_error", _on_error),
        ),
    )


def _listen_once(
    engine: Engine, watched: weakref.WeakSet[Engine], listeners: tuple[tuple[str, Any], ...]
) -> None:
    """Add ``listeners`` (event name, function) to ``engine`` unless ``watched`` holds it."""
    if engine in watched:
        return
    with _LOCK:
        if engine not in watched:
            for name, listener in listeners:
                event.listen(engine, name, listener)
            watched.add(engine)


class UnitCommits:
    """Whether the transaction of a ``run_in_transaction`` unit was committed while its
    ``fn`` ran (``conn.commit()``, the root transaction's ``commit()``): the helper must then
    never run the unit again — that work is kept. A rollback by ``fn`` (an ORM ``Session``
    joined to the connection rolls it back on an error) leaves nothing to protect."""

    __slots__ = ("committed",)

    def __init__(self) -> None:
        self.committed = False


#: The units whose ``fn`` runs now, by their connection.
_UNITS: weakref.WeakKeyDictionary[Connection, UnitCommits] = weakref.WeakKeyDictionary()
_WATCHED_FOR_UNITS: weakref.WeakSet[Engine] = weakref.WeakSet()


def watch_units(engine: Engine) -> None:
    """Listen to ``engine``'s commits for :func:`track_unit` (once per engine object). Not a
    statement listener: the library's statements keep the driver-level path."""
    if engine in _WATCHED_FOR_UNITS:
        return
    _listen_once(engine, _WATCHED_FOR_UNITS, (("commit", _note_unit_commit),))


def track_unit(conn: Connection) -> UnitCommits:
    """Start noting whether ``conn``'s transaction is committed (until :func:`untrack_unit`)."""
    unit = _UNITS[conn] = UnitCommits()
    return unit


def untrack_unit(conn: Connection) -> None:
    _UNITS.pop(conn, None)


def _note_unit_commit(conn: Connection) -> None:
    unit = _UNITS.get(conn)
    if unit is not None:
        unit.committed = True


def _before_commit(conn: Connection) -> None:
    try:
        HELD.settle(conn)
    except BaseException:
        with suppress(Exception):  # the error being raised is the one that matters
            conn.dialect.do_rollback(conn.connection)
        raise


def _before_savepoint(conn: Connection, name: str | None) -> None:
    HELD.settle(conn)


def _before_new_options(conn: Connection, options: Any) -> None:
    HELD.settle(conn)


def _on_rollback(conn: Connection) -> None:
    HELD.forget(conn)


def _on_error(context: Any) -> None:
    """``context`` is SQLAlchemy's ``ExceptionContext``; never raises, changes nothing in it."""
    conn = context.connection
    if conn is None:
        return
    orig = context.original_exception
    if (
        context.is_disconnect
        or ends_transaction(orig)
        or (is_lock_timeout(orig) and _timeout_ends_transaction(conn))
    ):
        HELD.forget(conn)


def _timeout_ends_transaction(conn: Connection) -> bool:
    engine = conn.engine
    ends = _TIMEOUT_ENDS.get(engine)
    if ends is None:
        try:
            dbapi_connection = conn.connection.dbapi_connection
        except Exception:  # an invalidated connection: its transaction is gone anyway
            return True
        ends = _TIMEOUT_ENDS[engine] = rolls_back_on_lock_timeout(conn.dialect, dbapi_connection)
    return ends
