"""The one place where SQLAlchemy/DBAPI exceptions become library errors.

Callers of ``flow_sqla`` — and the engine — never see a driver's exception type: a lock wait
timeout or deadlock becomes the retryable :class:`~flow.workflow.ConcurrentSubmitError`, any
other database error a :class:`~flow_sqla.errors.RepositoryError` with the cause chained.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def translating(ops: DialectOps, instance_id: str | None) -> Iterator[None]:
    """Translate every SQLAlchemy exception raised in the block."""
    try:
        yield
    except sa.exc.SQLAlchemyError as exc:
        raise translate(ops, exc, instance_id) from exc


__all__ = ["translate", "translating"]
