"""The one place where SQLAlchemy/DBAPI exceptions become library errors.

Callers of ``flow_sqla`` — and the engine — never see a driver's exception type: a lock wait
timeout or deadlock becomes the retryable :class:`~flow.workflow.ConcurrentSubmitError`, any
other database error a :class:`~flow_sqla.errors.RepositoryError` with the cause chained.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType

import sqlalchemy as sa

from flow.errors import FlowError
from flow.workflow.errors import ConcurrentSubmitError
from flow_sqla._dialect import DialectOps
from flow_sqla.errors import RepositoryError


def translate(ops: DialectOps, exc: sa.exc.SQLAlchemyError, instance_id: str | None) -> FlowError:
    """The library error standing for ``exc`` (raise it ``from exc``)."""
    if ops.is_lock_conflict(exc):
        return ConcurrentSubmitError(instance_id or "")
    detail = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    lines = str(detail).strip().splitlines() or [""]
    return RepositoryError(
        f"Database error {type(detail).__name__}: {lines[0]}", instance_id=instance_id
    )


class _Translating:
    """The context manager of :func:`translating` (a class: it runs for every operation)."""

    __slots__ = ("_instance_id", "_ops")

    def __init__(self, ops: DialectOps, instance_id: str | None) -> None:
        self._ops = ops
        self._instance_id = instance_id

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, sa.exc.SQLAlchemyError):
            raise translate(self._ops, exc, self._instance_id) from exc


def translating(ops: DialectOps, instance_id: str | None) -> AbstractContextManager[None]:
    """Translate every SQLAlchemy exception raised in the block."""
    return _Translating(ops, instance_id)


__all__ = ["translate", "translating"]
