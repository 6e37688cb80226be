"""Errors raised by ``flow_sqla``.

All subclass :class:`flow.errors.FlowError`, so callers catch everything the library raises
with one ``except``; driver exception types never reach the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from flow._text import safe_repr
from flow.errors import FlowError, GraphDefinitionError
from flow.workflow.errors import ConcurrentSubmitError


class RepositoryError(FlowError):
    """A database operation failed; the driver error is chained as ``__cause__``.

    ``instance_id`` names the flow instance involved, when there is one.
    """

    def __init__(self, message: str, *, instance_id: str | None = None) -> None:
        self.instance_id = instance_id
        if instance_id is not None:
            message = f"{message} (instance {safe_repr(instance_id)})"
        super().__init__(message)


class CommitOutcomeUnknownError(RepositoryError):
    """The connection was lost while ``COMMIT`` was in flight: the transaction may have
    committed or not, and only the database can tell.

    Every other failure of a unit of work leaves nothing behind; this one may leave the whole
    unit committed (the server committed, then the connection dropped before its answer
    arrived — a node killed, a network cut, a proxy restarted). Re-running the unit is safe
    only when it re-checks what it is about to do under the row lock, like
    ``submit_task_if_waiting`` (see :func:`flow_sqla.run_in_transaction`'s ``idempotent``).
    The driver error is chained as ``__cause__``.
    """

    def __init__(self, detail: str, *, instance_id: str | None = None) -> None:
        self.detail = detail
        super().__init__(
            f"The connection was lost during COMMIT; the transaction may or may not have "
            f"committed ({detail})",
            instance_id=instance_id,
        )


class AutocommitError(RepositoryError, ValueError):
    """The repository was given an ``Engine`` or a ``Connection`` in ``AUTOCOMMIT`` mode
    (SQLAlchemy's isolation level, or the driver's own autocommit).

    A unit of work locks the instance row with its first statement and relies on that lock
    until the transaction ends: that is what makes one of two concurrent submits the only
    winner and a history row commit with its state change. Under ``AUTOCOMMIT`` every
    statement commits on its own, the lock ends with it, and both submits could win — so the
    repository refuses such a bind (at construction) or ``ctx.connection`` (at the operation,
    before any SQL), instead of running without the guarantee.
    """

    def __init__(self, what: str, *, instance_id: str | None = None) -> None:
        super().__init__(
            f"{what} commits each statement on its own (AUTOCOMMIT mode, or a transaction "
            "that SQL of yours ended with COMMIT or ROLLBACK): flow_sqla needs a transaction "
            "that keeps the instance row locked until it ends; use an engine or connection "
            "without isolation_level='AUTOCOMMIT' and without the driver's autocommit",
            instance_id=instance_id,
        )


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
        super().__init__(f"Invalid SQL {kind} {safe_repr(identifier)}: {detail}")


@dataclass(frozen=True, kw_only=True)
class ColumnDifference:
    """One way an existing table differs from the schema a revision expects.

    ``kind`` is ``"missing table"``, ``"missing"`` (a column the revision has and the table
    lacks), ``"extra"`` (the other way round), ``"type"``, ``"nullable"``, ``"unique"`` (no
    unique key on the column), ``"missing index"`` (``expected`` names it: a revision that
    creates two indexes left one) or ``"leftover table"`` (a table only a later revision
    creates exists already); ``column`` is ``None`` for the last two and for a missing table.
    ``expected``/``found`` describe both sides where they apply.
    """

    table: str
    column: str | None
    kind: str
    expected: str | None = None
    found: str | None = None

    def describe(self) -> str:
        """One line: ``bpm_flow_task.form_id: type BIGINT expected, found VARCHAR(64)``."""
        where = self.table if self.column is None else f"{self.table}.{self.column}"
        if self.kind == "missing table":
            return f"{where}: table missing"
        if self.kind == "missing":
            return f"{where}: column missing (expected {self.expected})"
        if self.kind == "extra":
            return f"{where}: extra column ({self.found})"
        if self.kind == "unique":
            return f"{where}: no unique key (the upsert on it needs one)"
        if self.kind == "missing index":
            return f"{where}: index {self.expected} missing (the revision creates it)"
        if self.kind == "leftover table":
            return f"{where}: table exists already, though a later revision creates it"
        label = "nullability" if self.kind == "nullable" else self.kind
        return f"{where}: {label} {self.expected} expected, found {self.found}"


class SchemaMismatchError(RepositoryError):
    """Existing tables that no version table records differ from the schema of ``revision``,
    so they cannot be adopted (stamped) without risking the data.

    ``differences`` lists every differing column (:class:`ColumnDifference`); the message names
    each one. Raised before anything is written.
    """

    def __init__(self, differences: Iterable[ColumnDifference], *, revision: str) -> None:
        # A missing table first (the likely cause of the rest), then by table and column: the
        # schema comparison finds them in set order, which changed the message on every run.
        self.differences = tuple(
            sorted(
                differences,
                key=lambda d: (d.kind != "missing table", d.table, d.column or "", d.kind),
            )
        )
        self.revision = revision
        lines = "\n".join(f"- {d.describe()}" for d in self.differences)
        source = " (the Go plugin's ddl.sql)" if revision == "flow0001" else ""
        if all(d.kind == "leftover table" for d in self.differences):
            # Tables found at ``revision`` (recorded or recognised), beside what the next
            # revision creates: nothing differs from ``revision`` itself.
            problem = (
                f"The flow tables are at revision {revision}, beside a table a later one creates"
            )
        else:
            problem = (
                "The existing flow tables cannot be adopted: they differ from revision "
                f"{revision}{source} in {len(self.differences)} place(s)"
            )
        super().__init__(f"{problem}:\n{lines}\n{_mismatch_advice(self.differences, revision)}")


def _mismatch_advice(differences: tuple[ColumnDifference, ...], revision: str) -> str:
    """What to do about ``differences``: the likeliest cause first, since one fix may remove
    the rest."""
    kinds = {d.kind for d in differences}
    if "missing table" in kinds:
        # One table of the pair exists, the other not: most often a mistyped name.
        return (
            "One table of the set is missing: check the configured table names "
            "(repo_table/task_table; FLOW_REPO_TABLE/FLOW_TASK_TABLE for the CLI and "
            "alembic) — stamping would not create it."
        )
    if "leftover table" in kinds:
        # Left from an earlier life of these tables (the Go side re-created them from its
        # ddl.sql): the revision that creates it would fail half-way on MySQL/MariaDB.
        tables = ", ".join(sorted({d.table for d in differences if d.kind == "leftover table"}))
        return (
            f"Nothing was changed. Drop {tables} (the open-task table holds only the task "
            "index: after the upgrade 'flow reindex' rebuilds it from the instance rows) and "
            "upgrade again."
        )
    return (
        "Alter the tables to match, or, if you know they are compatible, record the "
        f"revision yourself ('alembic stamp {revision}') and upgrade again."
    )


class StaleCacheError(ConcurrentSubmitError):
    """``cache="process"``: the row this process cached was changed by another process since.

    The operation was decided on the old row, so nothing of it is written (a claim would
    otherwise bring a task another process completed back to WAITING). The cached row is
    dropped: a retry reads the row afresh. Retryable, like every
    :class:`~flow.workflow.ConcurrentSubmitError`; frequent ones mean several processes share
    instances, which ``cache="operation"`` (the default) is for.
    """

    def __init__(self, instance_id: str) -> None:
        super().__init__(
            instance_id,
            f"Instance {safe_repr(instance_id)} was changed by another process since this process "
            "cached it (cache='process'); nothing was written, retry the operation",
        )


class MigrationLockError(RepositoryError):
    """Another process kept the migration lock of this table set longer than the timeout
    (``migrations.upgrade(..., lock_timeout=...)``): nothing was migrated by this call."""

    def __init__(self, table_set: str, timeout: float) -> None:
        self.table_set = table_set
        self.timeout = timeout
        super().__init__(
            f"Timed out after {timeout:g} s waiting for another process's migration of "
            f"{table_set!r}; nothing was migrated by this call"
        )


class TransactionEndedError(FlowError, RuntimeError):
    """The ``fn`` given to :func:`~flow_sqla.run_in_transaction` ended the unit's transaction
    itself: committed it (``conn.commit()``) — what it committed is kept, so the unit is never
    run again after it — or rolled it back or closed it and then returned as if its work
    were done. The helper commits; ``fn`` must not."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"fn {detail}: the unit is not run again. Leave the COMMIT to run_in_transaction "
            "(an error raised after a rollback of fn's own is fn's error, retried as any other)"
        )


class InvalidArgumentError(FlowError, ValueError):
    """An argument of a query is out of range (a page ``limit`` below 1, a non-integer
    keyset id); names the argument and the value."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        self.name = name
        self.value = value
        super().__init__(f"Invalid {name} {safe_repr(value)}: {reason}")


class UnstorableValueError(FlowError, ValueError):
    """A value the tables cannot hold exactly: longer than its column (an instance id, actor or
    auditor over 64 characters, a message over 65,535 UTF-8 bytes) or not encodable as UTF-8
    (a lone surrogate such as ``"\\ud800"``). Raised before any SQL is sent, on every dialect
    alike — never clipped, never left to the driver. ``field`` names the value, ``instance_id``
    the instance when there is one.
    """

    def __init__(
        self, field: str, reason: str, *, instance_id: str | None = None, value: str = ""
    ) -> None:
        self.field = field
        self.reason = reason
        self.instance_id = instance_id
        where = f" (instance {safe_repr(instance_id)})" if instance_id is not None else ""
        shown = f" {_preview(value)}" if value else ""
        super().__init__(f"Cannot store the {field}{shown}: {reason}{where}")


class UnstorableGraphError(GraphDefinitionError):
    """A graph whose ids do not fit the history table: its id or a node id is longer than 64
    characters or not encodable as UTF-8. Raised the first time the graph is used with the SQL
    repository or recorder, before anything is written, so no instance of it ever starts and
    gets stuck. ``problems`` lists each offending id."""

    def __init__(self, graph_id: str, problems: list[str]) -> None:
        super().__init__(
            f"Graph {_preview(graph_id)} cannot be used with SQL storage",
            graph_id=graph_id,
            problems=problems,
        )


class IdCollationError(RepositoryError):
    """The instance table answered an id with the row of another one: its ``instant_id``
    column compares ids ignoring case or trailing spaces (MySQL/MariaDB tables the
    migrations did not create — the Go plugin's own DDL — or not upgraded to ``flow0003``).
    Raised at the locking read, before anything is written, so two instances are never
    merged into one row. ``found`` is the id of the row the table returned."""

    def __init__(self, instance_id: str, found: str, table: str) -> None:
        self.found = found
        super().__init__(
            f"Table {table!r} returned the row of instance {_preview(found)} for this id: its "
            "instant_id column compares ids ignoring case or trailing spaces, so two "
            "instances would share one row; nothing was written. Make the ids exact with "
            "'flow migrate' or flow_sqla.migrations.upgrade(engine) (revision flow0003)",
            instance_id=instance_id,
        )


def _preview(value: str, limit: int = 80) -> str:
    """``repr`` of ``value`` cut to ``limit`` characters: error messages stay readable when
    the value is the problem (a 10 MB message)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]} ({len(value)} chars)"


__all__ = [
    "ColumnDifference",
    "CommitOutcomeUnknownError",
    "IdCollationError",
    "InvalidArgumentError",
    "InvalidIdentifierError",
    "MigrationLockError",
    "RepositoryError",
    "SchemaMismatchError",
    "StaleCacheError",
    "UnstorableGraphError",
    "UnstorableValueError",
]
