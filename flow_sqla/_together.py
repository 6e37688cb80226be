"""Statements held back by a unit of work, to go out with its write in one round trip.

An approval sends the history row's INSERT and then, when its unit of work ends, the instance
row's UPDATE (and the task index's rows): on MySQL/MariaDB, where a connection may send several
statements in one query (:func:`flow_sqla._dialect.sends_statements_together`), the INSERT
waits for the UPDATE and both go out together (:func:`flow_sqla._prepared.execute_together`).
Each is still its own statement, in the same order and the same transaction; only the round
trip is saved. Nothing reads an INSERT's result, so nothing waits for it.

A statement is held back only for the unit of work of its own instance, open on the same
connection and still in the same savepoint; the unit sends what it holds with its write, or
alone when it writes nothing, before it ends. A unit that fails sends nothing it held: the
operation is not done, so neither is its history row. While task code calls the executor back
on the unit's instance, its statements are held back on every connection — also when the
task code runs an operation on another instance in between — and the unit's statements after
them too, to keep their order; they go out with the unit's write. A call back that fails drops
what it held (:meth:`HeldBack.drop_after`), as nothing of it may remain; a held statement the
server refuses fails the whole unit (typed, nothing of it kept).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection, NestedTransaction

from flow_sqla._dialect import sends_statements_together
from flow_sqla._prepared import PreparedStatement, driver_path_open, execute_together

#: A statement with the parameters it binds.
Statement = tuple[PreparedStatement, Mapping[str, Any]]


class HeldBack:
    """The statements one unit of work holds back: its instance's, sent with its write."""

    __slots__ = ("calls_back", "instance_id", "savepoint", "statements")

    def __init__(self, instance_id: str, savepoint: NestedTransaction | None) -> None:
        self.instance_id = instance_id
        #: The savepoint the unit began in: a statement made inside a later one goes out at
        #: once (held, it would outlive that savepoint's rollback).
        self.savepoint = savepoint
        self.statements: list[Statement] = []
        #: How many calls back on the unit's instance are running (task code calling the
        #: executor back): their statements are held on every connection.
        self.calls_back = 0

    def mark(self) -> int:
        """Where a call back starts: what it holds from here on is its own."""
        return len(self.statements)

    def drop_after(self, mark: int) -> None:
        """Drop what was held since ``mark``: the call back that held it failed."""
        del self.statements[mark:]

    def take(self) -> list[Statement]:
        """The statements held so far, which the caller now sends (no longer held)."""
        taken, self.statements = self.statements, []
        return taken

    def send(self, conn: Connection) -> None:
        """Send what is still held, alone (the unit wrote nothing to send it with)."""
        send_now(conn, self.take())


def send_now(conn: Connection, statements: list[Statement]) -> None:
    """Send ``statements`` — together where ``conn`` still allows it, else one by one."""
    if not statements:
        return
    if together_open(conn):
        execute_together(conn, statements)
        return
    for prepared, params in statements:
        prepared.execute(conn, params)


def together_open(conn: Connection) -> bool:
    """Whether ``conn`` sends statements together now (see the module's docstring)."""
    return sends_statements_together(conn) and driver_path_open(conn)


#: The units of work open on each connection, innermost last (a task's code may start an
#: operation on another instance inside one).
_OPEN: weakref.WeakKeyDictionary[Connection, list[HeldBack]] = weakref.WeakKeyDictionary()


@contextmanager
def holding_back(conn: Connection, instance_id: str) -> Iterator[HeldBack]:
    """Open a unit of work's hold on ``conn`` for ``instance_id``: statements of that instance
    (:func:`hold_back`) wait in the yielded :class:`HeldBack` until the unit sends them."""
    held = HeldBack(instance_id, conn.get_nested_transaction())
    units = _OPEN.setdefault(conn, [])
    units.append(held)
    try:
        yield held
    finally:
        units.remove(held)
        if not units:
            _OPEN.pop(conn, None)


def hold_back(conn: Connection, instance_id: str, statement: Statement) -> bool:
    """Hold ``statement`` back for the unit of work of ``instance_id`` open on ``conn``, if
    that is the innermost unit there, ``conn`` sends statements together on its driver-level
    path and no savepoint began since the unit did; ``False`` (the caller runs it now) when
    not."""
    units = _OPEN.get(conn)
    if not units:
        return False
    held = units[-1]
    if held.instance_id != instance_id:
        # A call back on an instance whose unit is further out (its task code runs an
        # operation on another instance, whose task code calls it back).
        held = next((u for u in reversed(units) if u.instance_id == instance_id), held)
        if held.instance_id != instance_id or not held.calls_back:
            return False
    if conn.get_nested_transaction() is not held.savepoint:
        return False
    # Behind statements a call back held, a statement waits too: they go out in order.
    if not (held.calls_back or held.statements) and not together_open(conn):
        return False
    held.statements.append(statement)
    return True


__all__ = ["HeldBack", "Statement", "hold_back", "holding_back", "send_now", "together_open"]
