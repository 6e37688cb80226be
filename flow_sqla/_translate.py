"""The one place where SQLAlchemy/DBAPI exceptions become library errors.

Callers of ``flow_sqla`` — and the engine — never see a driver's exception type: a lock wait
timeout, deadlock or serialization failure becomes the retryable
:class:`~flow.workflow.ConcurrentSubmitError`, a connection lost during ``COMMIT`` a
:class:`~flow_sqla.errors.CommitOutcomeUnknownError`, any other database error a
:class:`~flow_sqla.errors.RepositoryError` with the cause chained, and
text a driver cannot encode an :class:`~flow_sqla.errors.UnstorableValueError`.
"""

from __future__ import annotations

from types import TracebackType

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RootTransaction

from flow.errors import FlowError
from flow.workflow.errors import ConcurrentSubmitError
from flow_sqla._dialect import DialectOps, is_conflict, is_missing_schema
from flow_sqla.errors import CommitOutcomeUnknownError, RepositoryError, UnstorableValueError


def translate(
    ops: DialectOps | None,
    exc: BaseException,
    instance_id: str | None,
    *,
    at_commit: bool = False,
) -> FlowError:
    """The library error standing for ``exc`` (raise it ``from exc``).

    ``ops`` recognizes the lock conflicts of its dialect; without it (a caller's engine of any
    dialect) they are recognized by the driver exception's shape. ``at_commit`` says ``exc``
    came from the ``COMMIT`` itself: a lost connection there leaves the outcome unknown.
    """
    orig: BaseException = exc
    if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None:
        orig = exc.orig
    conflict = ops.is_lock_conflict(exc) if ops is not None else is_conflict(orig)
    detail = _detail(orig)
    if conflict:
        who = f"Instance {instance_id!r}" if instance_id else "The transaction"
        return ConcurrentSubmitError(
            instance_id or "",
            f"{who} lost to a concurrent transaction ({detail}); nothing of it was kept, retry it",
        )
    if at_commit and _lost_connection(exc):
        return CommitOutcomeUnknownError(detail, instance_id=instance_id)
    if is_missing_schema(orig):
        return RepositoryError(f"Database error {detail}{_MIGRATE_HINT}", instance_id=instance_id)
    return RepositoryError(f"Database error {detail}", instance_id=instance_id)


#: What a missing table or column most often means, for the error a newcomer meets first.
_MIGRATE_HINT = (
    " — if it is one of flow's tables, they are missing or older than this version: create or "
    "upgrade them with flow_sqla.migrations.upgrade(engine), 'flow migrate' or 'alembic "
    "upgrade head' (without the task index's revision, pass index=False)"
)


def _detail(orig: BaseException) -> str:
    lines = str(orig).strip().splitlines() or [""]
    return f"{type(orig).__name__}: {lines[0]}"


def _lost_connection(exc: BaseException) -> bool:
    """SQLAlchemy marks a DBAPI error as a disconnect (its dialect's ``is_disconnect``)."""
    if isinstance(exc, sa.exc.DBAPIError):
        return bool(exc.connection_invalidated)
    # A raw driver error: the connection is gone when the driver says so (PyMySQL's
    # "(0, '')", psycopg's closed connection); rare outside SQLAlchemy.
    return isinstance(exc, ConnectionError)


def commit(conn: Connection, trans: RootTransaction) -> None:
    """Commit ``trans``; when the ``COMMIT`` fails, discard the connection instead of pooling it.

    SQLAlchemy marks the transaction ended even when ``COMMIT`` fails, so the pool skips its
    reset; but SQLite keeps the transaction open after a busy ``COMMIT``, and the next user of
    the pooled connection would commit this unit's writes with its own. A connection whose
    ``COMMIT`` failed is not trusted again, on any dialect (the cost: one reconnect per such
    failure).
    """
    try:
        trans.commit()
    except BaseException:
        conn.invalidate()
        raise


class Translating:
    """Translates every SQLAlchemy exception raised in its ``with`` block.

    Set ``committing`` just before the block's ``COMMIT``: a connection lost from then on
    becomes :class:`CommitOutcomeUnknownError`. (A class, not a generator context manager: it
    runs for every operation.)
    """

    __slots__ = ("_instance_id", "_ops", "committing")

    def __init__(self, ops: DialectOps | None, instance_id: str | None) -> None:
        self._ops = ops
        self._instance_id = instance_id
        self.committing = False

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, sa.exc.SQLAlchemyError):
            raise translate(self._ops, exc, self._instance_id, at_commit=self.committing) from exc
        if isinstance(exc, UnicodeEncodeError):
            # Text the driver cannot send (a lone surrogate) that no earlier check caught.
            raise UnstorableValueError(
                "value", f"not valid UTF-8 ({exc.reason})", instance_id=self._instance_id
            ) from exc


def translating(ops: DialectOps, instance_id: str | None) -> Translating:
    """Translate every SQLAlchemy exception raised in the block."""
    return Translating(ops, instance_id)


__all__ = ["Translating", "commit", "translate", "translating"]
