"""Errors raised by ``flow_sqla``.

Both subclass :class:`flow.errors.FlowError`, so callers catch everything the library raises
with one ``except``; driver exception types never reach the engine.
"""

from __future__ import annotations

from flow.errors import FlowError


class RepositoryError(FlowError):
    """A database operation failed; the driver error is chained as ``__cause__``.

    ``instance_id`` names the flow instance involved, when there is one.
    """

    def __init__(self, message: str, *, instance_id: str | None = None) -> None:
        self.instance_id = instance_id
        if instance_id is not None:
            message = f"{message} (instance {instance_id!r})"
        super().__init__(message)


class InvalidIdentifierError(FlowError, ValueError):
    """A table, schema, constraint or version-table name is not a plain SQL identifier.

    Raised before any SQL is built: names are spliced into DDL and into statements that are
    not parameterizable, so only ``[A-Za-z_][A-Za-z0-9_]*`` up to 63 characters (PostgreSQL's
    limit, MySQL's is 64) is accepted.
    """

    def __init__(self, identifier: str, *, kind: str = "identifier", reason: str = "") -> None:
        self.identifier = identifier
        self.kind = kind
        detail = reason or "must match [A-Za-z_][A-Za-z0-9_]* and be at most 63 characters"
        super().__init__(f"Invalid SQL {kind} {identifier!r}: {detail}")


__all__ = ["InvalidIdentifierError", "RepositoryError"]
