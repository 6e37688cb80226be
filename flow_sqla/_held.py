"""Held rows: the instance rows that operations of a caller's transaction hold locked.

The README's pattern claims and submits in one ``engine.begin()``; the submit starts from
the row the claim locked and left instead of locking and reading it again (see
``docs/persistence.md`` §3). This module keeps those rows, per connection, and decides when
one may still be re-used.
"""

from __future__ import annotations

import threading
import weakref

from sqlalchemy.engine import Connection, Transaction

from flow_sqla._dialect import transaction_still_open
from flow_sqla._rows import StoredRow

__all__ = ["HELD", "HeldKey", "HeldRows"]


def _innermost(conn: Connection) -> Transaction | None:
    return conn.get_nested_transaction() or conn.get_transaction()


#: A held row's key: (table name, instance id). The entry also records the schema the
#: connection's ``schema_translate_map`` sent the table to (one Connection may switch its map
#: between operations): one entry per table name, so a row held for one spelling of the
#: schema is never served next to the same table's row under another.
HeldKey = tuple[str, str]


class HeldRows:
    """The instance rows that operations of a caller's transaction hold locked, per
    ``Connection`` and by ``(repository table, instance id)``, each with the repository that
    wrote it last — shared by every repository, since two executors may work in one
    transaction, and by every thread, since one transaction may run its operations on
    several (``asyncio.to_thread``, a thread pool: each call on whichever thread is free).

    A second operation on the same instance in the same transaction (the README's claim,
    then submit) starts from the row the first one left instead of locking and reading it
    again: the lock is still held, so nobody else can have changed it. The rows are valid
    only while ``held_in`` — the innermost transaction or savepoint when they were held — is
    still the connection's innermost and active one (a commit, a rollback or a rolled-back
    savepoint makes the next operation read again), and a row is re-used only by the
    repository that wrote it last (another one's write in between is not in its memory) and
    for the schema it was held for. An operation on the table name under another schema
    replaces the entry: that may be the same table spelled another way (``None`` and the
    default schema — ``public``, the current database, ``main``), whose row it may change;
    another tenant's table of that name only loses the re-use.
    """

    def __init__(self) -> None:
        self._by_connection: weakref.WeakKeyDictionary[Connection, _Held] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # adding and dropping entries; reads need none

    def get(
        self, conn: Connection, schema: str | None, key: HeldKey, owner: object
    ) -> StoredRow | None:
        """The row held for ``key`` under ``schema`` if ``owner`` wrote it last. While any
        row is held on ``conn``, every operation checks that the transaction holding them is
        still the one running — on the server too, where the driver shows it — and forgets
        them all if not, whichever instance it is on (the locks went with the transaction)."""
        held = self._by_connection.get(conn)
        if held is None:
            return None
        transaction = held.held_in()
        if (
            transaction is None
            or transaction is not _innermost(conn)
            or not transaction.is_active
            or not transaction_still_open(conn)
        ):
            self.forget(conn)
            return None
        entry = held.rows.get(key)
        if entry is None:
            return None
        held_schema, held_owner, row = entry
        if held_schema != schema:
            with self._lock:
                held.rows.pop(key, None)
            return None
        return row if held_owner is owner else None

    def put(
        self, conn: Connection, schema: str | None, key: HeldKey, owner: object, row: StoredRow
    ) -> None:
        transaction = _innermost(conn)
        if transaction is None:
            return
        held = self._by_connection.get(conn)
        if held is None or held.held_in() is not transaction:
            held = _Held(weakref.ref(transaction))
            with self._lock:
                self._by_connection[conn] = held
        held.rows[key] = (schema, owner, row)

    def forget(self, conn: Connection) -> None:
        """Forget every row held on ``conn``: after a failed operation (the error may have
        ended the whole transaction on the server while the ``Connection`` still reports it
        active — InnoDB rolls all of it back on a deadlock, Galera on a certification
        failure — and the caller may catch it and go on), or a connection found committing
        each statement. The next operation on any instance locks and reads again."""
        with self._lock:
            self._by_connection.pop(conn, None)

    def drop(self, key: HeldKey) -> None:
        """Forget the instance's row of the table (in any schema) on every connection: the
        row was changed behind our back."""
        with self._lock:
            for held in list(self._by_connection.values()):
                held.rows.pop(key, None)


class _Held:
    """The rows held on one connection, valid while ``held_in`` is its innermost transaction:
    by key, the schema, the repository that wrote the row last, and the row."""

    __slots__ = ("held_in", "rows")

    def __init__(self, held_in: weakref.ref[Transaction]) -> None:
        self.held_in = held_in
        self.rows: dict[HeldKey, tuple[str | None, object, StoredRow]] = {}


HELD = HeldRows()
