"""Held rows: the instance rows that operations of a caller's transaction hold locked.

The README's pattern claims and submits in one ``engine.begin()``; the submit starts from
the row the claim locked and left instead of locking and reading it again, and the claim's
write waits to be folded into the submit's (see ``docs/persistence.md`` §3). This module keeps
those rows and that one deferred write, per connection, and decides when a row may still be
re-used and when the write must be done.
"""

from __future__ import annotations

import threading
import weakref
from typing import Protocol

from sqlalchemy.engine import Connection, Transaction

from flow_sqla._dialect import transaction_still_open
from flow_sqla._rows import StoredRow

__all__ = ["HELD", "DeferredWrite", "HeldKey", "HeldRows", "innermost_transaction"]


def innermost_transaction(conn: Connection) -> Transaction | None:
    """``conn``'s innermost transaction: its savepoint, else its root transaction."""
    return conn.get_nested_transaction() or conn.get_transaction()


#: A held row's key: (table name, instance id). The entry also records the schema the
#: connection's ``schema_translate_map`` sent the table to (one Connection may switch its map
#: between operations): one entry per table name, so a row held for one spelling of the
#: schema is never served next to the same table's row under another.
HeldKey = tuple[str, str]


class DeferredWrite(Protocol):
    """A row write an operation left for later in its transaction: the next operation of the
    same repository on the same row folds it into its own write; anything else on the
    connection — another operation, a query of the library's, a savepoint, the ``COMMIT`` —
    makes it :meth:`run` first."""

    @property
    def key(self) -> HeldKey: ...

    @property
    def schema(self) -> str | None: ...

    @property
    def resolved_schema(self) -> str | None:
        """The schema the row is in, by name: :attr:`schema`, else the server's default
        schema (``None`` when that was unknown)."""

    @property
    def owner(self) -> object:
        """The repository whose operation deferred it (only it folds the write)."""

    @property
    def thread(self) -> int:
        """The ident of the thread whose operation deferred it."""

    def run(self, conn: Connection) -> None:
        """Send the write on ``conn`` (typed errors, as the operation would have raised)."""


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
        if not _still_current(held, conn):
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
        transaction = innermost_transaction(conn)
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
        failure — and the caller may catch it and go on), a rollback, or a connection found
        committing each statement. The write deferred there is dropped with them: the row
        lock it was decided under is gone. The next operation on any instance locks and
        reads again."""
        with self._lock:
            self._by_connection.pop(conn, None)

    def release(self, conn: Connection) -> None:
        """Stop re-using the rows held on ``conn`` but keep its deferred write: after an
        operation that failed without ending the transaction (an error that ends it reaches
        :meth:`forget` through the connection's ``handle_error`` event, and PostgreSQL's or
        SQLite's driver shows it at the ``COMMIT``), the write belongs to what the caller may
        still commit. The next operation locks and reads again — after writing it."""
        held = self._by_connection.get(conn)
        if held is None:
            return
        if held.pending is None:
            self.forget(conn)
            return
        held.rows.clear()

    def defer(self, conn: Connection, write: DeferredWrite) -> bool:
        """Keep ``write`` for later on ``conn``, replacing the one it was folded from; false
        (nothing kept) when no row is held there in the innermost transaction."""
        held = self._by_connection.get(conn)
        if held is None or held.held_in() is not innermost_transaction(conn):
            return False
        held.pending = write
        return True

    def pending(self, conn: Connection) -> DeferredWrite | None:
        """The write deferred on ``conn``, whoever deferred it."""
        held = self._by_connection.get(conn)
        return None if held is None else held.pending

    def deferred(
        self, conn: Connection, schema: str | None, key: HeldKey, owner: object
    ) -> DeferredWrite | None:
        """The write deferred on ``conn`` if ``owner`` left it for ``key`` under ``schema``
        (the caller folds it and then calls :meth:`done`)."""
        held = self._by_connection.get(conn)
        pending = None if held is None else held.pending
        if pending is None or pending.key != key or pending.owner is not owner:
            return None
        return pending if pending.schema == schema else None

    def done(self, conn: Connection, write: DeferredWrite) -> None:
        """``write`` reached the server inside another statement: nothing left to do."""
        held = self._by_connection.get(conn)
        if held is not None and held.pending is write:
            held.pending = None

    def settle(self, conn: Connection) -> None:
        """Send the write deferred on ``conn``, if any: before any other statement of the
        library's there, before a savepoint begins (rolling that back must not take the write
        with it), before new execution options apply, before the ``COMMIT``. Only while the
        transaction it was decided in is still the connection's innermost and active one, and
        still open on the server where the driver tells; otherwise the row lock it was
        decided under is gone, and it is dropped with the held rows (a claim's WAITING that
        never reaches the row, never a stale state over someone else's). A write that fails
        is not tried again."""
        held = self._by_connection.get(conn)
        if held is None or held.pending is None:
            return
        if not _still_current(held, conn):
            self.forget(conn)
            return
        pending, held.pending = held.pending, None
        try:
            pending.run(conn)
        except BaseException:
            self.forget(conn)
            raise

    def drop(
        self,
        key: HeldKey,
        *,
        owner: object = None,
        resolved_schema: str | None = None,
        pending_of_thread: int | None = None,
    ) -> None:
        """Forget the instance's row of the table (in any schema) on every connection: the
        row was changed behind our back. A write deferred for it is dropped, unsent, only
        where the caller's thread deferred it (``pending_of_thread``): that caller's own SQL
        on the row follows, and must win over a write decided before it; another
        transaction's claim holds the row lock, so nobody else's SQL can change the row
        until that transaction ends. And only for the same table: deferred by ``owner``
        (whose connection may have named any tenant's schema), or by another repository
        whose row is in ``resolved_schema`` too (another tenant's claim of an instance of
        the same id is kept; an unknown schema may be any)."""
        with self._lock:
            for held in list(self._by_connection.values()):
                held.rows.pop(key, None)
                pending = held.pending
                if (
                    pending is not None
                    and pending.key == key
                    and pending_of_thread is not None
                    and pending.thread == pending_of_thread
                    and (
                        pending.owner is owner
                        or _may_be_same_schema(pending.resolved_schema, resolved_schema)
                    )
                ):
                    held.pending = None


def _may_be_same_schema(one: str | None, other: str | None) -> bool:
    """Whether two schema names may be one schema (``None``: unknown)."""
    return one is None or other is None or one == other


def _still_current(held: _Held, conn: Connection) -> bool:
    """Whether the transaction ``held`` was recorded in is still ``conn``'s innermost and
    active one — and open on the server, where the driver shows it (no round trip)."""
    transaction = held.held_in()
    return (
        transaction is not None
        and transaction is innermost_transaction(conn)
        and transaction.is_active
        and transaction_still_open(conn)
    )


class _Held:
    """The rows held on one connection, valid while ``held_in`` is its innermost transaction:
    by key, the schema, the repository that wrote the row last, and the row; and the write
    deferred there."""

    __slots__ = ("held_in", "pending", "rows")

    def __init__(self, held_in: weakref.ref[Transaction]) -> None:
        self.held_in = held_in
        self.rows: dict[HeldKey, tuple[str | None, object, StoredRow]] = {}
        #: The write deferred in ``held_in`` (at most one: any other statement of the
        #: library's on the connection sends it first).
        self.pending: DeferredWrite | None = None


HELD = HeldRows()
