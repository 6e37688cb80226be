"""The two reference tables as SQLAlchemy Core ``Table`` objects.

They match the Go plugin's DDL (``plugins/flow/ddl.sql``) column for column, so an existing
deployment's tables can be shared: same order, names, types, nullability, unique key name and
MySQL table options. Table names are configurable; every identifier is validated before any SQL
is built, and constraint/index names are derived from the table name for non-default names
because PostgreSQL index names are unique per schema, not per table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from flow._text import safe_repr
from flow.errors import InvalidArgumentTypeError
from flow_sqla._dialect import ExactString
from flow_sqla.errors import InvalidArgumentError, InvalidIdentifierError

DEFAULT_REPO_TABLE = "bpm_flow_repository"
DEFAULT_TASK_TABLE = "bpm_flow_task"
DEFAULT_TODO_TABLE = "bpm_flow_todo"
#: Longest candidate string the open-task table keeps (``"<key>:<value>"``).
CANDIDATE_LENGTH = 128
DEFAULT_VERSION_TABLE = "flow_alembic_version"
REFERENCE_UNIQUE_NAME = "uniq_instantId"

#: ``ENGINE``/``CHARSET``/``COLLATE`` of the reference DDL. Given under both prefixes because a
#: ``mariadb+...://`` URL yields the dialect name ``mariadb``, which ignores ``mysql_*`` options.
MYSQL_TABLE_OPTIONS: dict[str, Any] = {
    f"{prefix}_{key}": value
    for prefix in ("mysql", "mariadb")
    for key, value in (
        ("engine", "InnoDB"),
        ("charset", "utf8mb4"),
        ("collate", "utf8mb4_unicode_ci"),
    )
}

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def validate_identifier(value: object, *, kind: str = "identifier") -> str:
    """Return ``value`` when it is a plain SQL identifier of at most 63 characters.

    Raises :class:`InvalidIdentifierError` naming the value otherwise (``"x;drop"``, ``""``,
    non-strings, names PostgreSQL would silently truncate).
    """
    if not isinstance(value, str):
        raise InvalidIdentifierError(safe_repr(value), kind=kind)
    if _IDENTIFIER.fullmatch(value) is None:
        raise InvalidIdentifierError(value, kind=kind)
    return value


def _derived(name: str, source: str) -> str:
    if _IDENTIFIER.fullmatch(name) is None:
        raise InvalidIdentifierError(
            name,
            kind="derived name",
            reason=f"derived from table name {source!r} it exceeds 63 characters; "
            "choose a shorter table name",
        )
    return name


def _check_distinct(tables: dict[str, str]) -> None:
    """The tables of one set are four different tables — compared without case, as SQLite
    and MySQL/MariaDB on case-insensitive file systems compare table names. (Two roles on
    one table made SQLAlchemy refuse the second definition, and a migration create part of
    the set before failing.)"""
    seen: dict[str, str] = {}
    for role, name in tables.items():
        other = seen.setdefault(name.lower(), role)
        if other != role:
            raise InvalidIdentifierError(
                name, kind="table name", reason=f"{other} and {role} must name different tables"
            )


@dataclass(frozen=True, kw_only=True)
class TableNames:
    """The validated names of one table set: tables, schema, version table, constraints.

    Shared by :class:`FlowTables` and the Alembic revisions, so the schema the code expects and
    the schema the migrations create are named by one rule.
    """

    repo_table: str = DEFAULT_REPO_TABLE
    task_table: str = DEFAULT_TASK_TABLE
    schema: str | None = None
    version_table: str = DEFAULT_VERSION_TABLE
    todo_table: str = DEFAULT_TODO_TABLE

    @classmethod
    def create(
        cls,
        *,
        repo_table: str = DEFAULT_REPO_TABLE,
        task_table: str = DEFAULT_TASK_TABLE,
        schema: str | None = None,
        version_table: str | None = None,
        todo_table: str | None = None,
    ) -> TableNames:
        """Validate every name and pick the version table.

        The version table defaults to ``flow_alembic_version`` for the default table names and
        to ``<repo_table>_alembic_version`` otherwise, so table sets keep separate histories;
        the open-task table likewise to ``bpm_flow_todo`` or ``<repo_table>_todo``.
        Raises :class:`InvalidIdentifierError` naming the first bad identifier, or a name
        given to two of the tables.
        """
        repo = validate_identifier(repo_table, kind="table name")
        task = validate_identifier(task_table, kind="table name")
        if schema is not None:
            validate_identifier(schema, kind="schema name")
        if version_table is None:
            defaults = (repo, task) == (DEFAULT_REPO_TABLE, DEFAULT_TASK_TABLE)
            version_table = (
                DEFAULT_VERSION_TABLE if defaults else _derived(f"{repo}_alembic_version", repo)
            )
        validate_identifier(version_table, kind="version table name")
        if todo_table is None:
            defaults = (repo, task) == (DEFAULT_REPO_TABLE, DEFAULT_TASK_TABLE)
            todo_table = DEFAULT_TODO_TABLE if defaults else _derived(f"{repo}_todo", repo)
        todo = validate_identifier(todo_table, kind="table name")
        _check_distinct(
            {
                "repo_table": repo,
                "task_table": task,
                "todo_table": todo,
                "version_table": version_table,
            }
        )
        names = cls(
            repo_table=repo,
            task_table=task,
            schema=schema,
            version_table=version_table,
            todo_table=todo,
        )
        names.derived_names()
        return names

    @property
    def instant_id_unique(self) -> str:
        """``uniq_instantId`` for the reference table name, ``uq_<repo>_instant_id`` otherwise."""
        if self.repo_table == DEFAULT_REPO_TABLE:
            return REFERENCE_UNIQUE_NAME
        return _derived(f"uq_{self.repo_table}_instant_id", self.repo_table)

    @property
    def flow_ins_id_index(self) -> str:
        """Name of the optional index on ``task(flow_ins_id)``."""
        return _derived(f"ix_{self.task_table}_flow_ins_id", self.task_table)

    @property
    def assignee_index(self) -> str:
        """Name of the optional index on ``task(assignee)``."""
        return _derived(f"ix_{self.task_table}_assignee", self.task_table)

    @property
    def status_index(self) -> str:
        """Name of the index on ``repository(status, graph_id, id)`` (instance lists)."""
        return _derived(f"ix_{self.repo_table}_status", self.repo_table)

    @property
    def todo_unique(self) -> str:
        """Name of the unique key on ``todo(instant_id, node_id, candidate)``."""
        return _derived(f"uq_{self.todo_table}_task", self.todo_table)

    @property
    def candidate_index(self) -> str:
        """Name of the index on ``todo(candidate, id)`` (the inbox)."""
        return _derived(f"ix_{self.todo_table}_candidate", self.todo_table)

    def derived_names(self) -> tuple[str, ...]:
        """All derived names; raises :class:`InvalidIdentifierError` if one is too long."""
        return (
            self.instant_id_unique,
            self.flow_ins_id_index,
            self.assignee_index,
            self.status_index,
            self.todo_unique,
            self.candidate_index,
        )


def _id_column() -> sa.Column[int]:
    # SQLite only makes an INTEGER PRIMARY KEY an autoincrementing rowid alias.
    return sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True)


#: Columns holding ids that must compare exactly (binary collation on MySQL/MariaDB, revision
#: ``flow0003``): the instance id in both tables, graph and node ids, the assignee.
EXACT_ID_COLUMNS: dict[str, tuple[str, ...]] = {
    "repository": ("instant_id", "graph_id"),
    "task": (
        "flow_ins_id",
        "proc_def_id",
        "task_id",
        "source_node_code",
        "target_node_code",
        "assignee",
    ),
    # The task index's (revision flow0004 creates them exact): "graph_id" of the repository
    # table and the open-task table's ids.
    "todo": ("instant_id", "graph_id", "node_id", "candidate"),
}

#: Width of every VARCHAR column of the reference DDL (ids, names, auditors).
ID_LENGTH = 64


def _exact_id() -> ExactString:
    return ExactString(ID_LENGTH)


def _json() -> sa.JSON:
    # ``None`` becomes SQL NULL (the reference's DEFAULT NULL), not the JSON text 'null'.
    return sa.JSON(none_as_null=True)


def _audit_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("creator", sa.String(64)),
        sa.Column("create_time", sa.DateTime()),
        sa.Column("updater", sa.String(64)),
        sa.Column("update_time", sa.DateTime()),
    ]


class FlowTables:
    """``bpm_flow_repository``, ``bpm_flow_task`` and ``bpm_flow_todo`` (or the configured
    names) on one ``MetaData``.

    Attributes: ``metadata``, ``repository`` (one row per instance, unique ``instant_id``),
    ``task`` (append-only history), ``todo`` (the open-task index: one row per open task and
    candidate), ``names`` (:class:`TableNames`). The two indexes on ``task(flow_ins_id)`` and
    ``task(assignee)`` are optional additions (Alembic revision ``flow0002``). The id columns
    of :data:`EXACT_ID_COLUMNS` compare exactly on every dialect (binary NO PAD collation on
    MySQL/MariaDB, revision ``flow0003``). The task index (revision ``flow0004``) adds nullable
    ``graph_id``, ``status``, ``finish_time`` and ``open_tasks`` columns to the repository
    table, ``action`` to the task table, and the ``todo`` table (``todo_table`` defaults to
    ``bpm_flow_todo`` for the default table names, else ``<repo_table>_todo``, so table sets
    never share one). ``index=False`` deployments never touch them, so the reference tables
    alone suffice there. Raises :class:`InvalidIdentifierError` for a bad table or schema name
    before any SQL is built; :class:`~flow.errors.InvalidArgumentTypeError` for a ``metadata``
    that is not a ``MetaData`` and :class:`InvalidArgumentError` for one that already holds a
    table of one of these names (your own model's, or another ``FlowTables``') — before any
    table is added to it.
    """

    def __init__(
        self,
        metadata: sa.MetaData | None = None,
        *,
        repo_table: str = DEFAULT_REPO_TABLE,
        task_table: str = DEFAULT_TASK_TABLE,
        schema: str | None = None,
        todo_table: str | None = None,
    ) -> None:
        self.names = TableNames.create(
            repo_table=repo_table, task_table=task_table, schema=schema, todo_table=todo_table
        )
        self.metadata = _unclaimed(metadata, self.names) if metadata is not None else sa.MetaData()
        self.repository = self._repository_table()
        self.task = self._task_table()
        self.todo = self._todo_table()

    def _repository_table(self) -> sa.Table:
        n = self.names
        return sa.Table(
            n.repo_table,
            self.metadata,
            _id_column(),
            sa.Column("instant_id", _exact_id(), nullable=False),
            sa.Column("graph", _json()),
            sa.Column("states", _json()),
            sa.Column("vars", _json()),
            *_audit_columns(),
            *index_columns(),
            sa.UniqueConstraint("instant_id", name=n.instant_id_unique),
            sa.Index(n.status_index, "status", "graph_id", "id"),
            schema=n.schema,
            **MYSQL_TABLE_OPTIONS,
        )

    def _task_table(self) -> sa.Table:
        n = self.names
        return sa.Table(
            n.task_table,
            self.metadata,
            _id_column(),
            sa.Column("flow_ins_id", _exact_id(), nullable=False),
            sa.Column("proc_def_id", _exact_id(), nullable=False),
            sa.Column("task_id", _exact_id(), nullable=False),
            sa.Column("source_node_code", _exact_id(), nullable=False),
            sa.Column("source_node_name", sa.String(64)),
            sa.Column("source_node_type", sa.String(64), nullable=False),
            sa.Column("target_node_code", _exact_id(), nullable=False),
            sa.Column("target_node_name", sa.String(64), nullable=False),
            sa.Column("target_node_type", sa.String(64), nullable=False),
            sa.Column("assignee", _exact_id(), nullable=False),
            sa.Column("status", sa.Integer()),
            sa.Column("form_id", sa.BigInteger()),
            sa.Column("variables", _json()),
            sa.Column("message", sa.Text()),
            *_audit_columns(),
            sa.Column("action", sa.Integer()),
            sa.Index(n.flow_ins_id_index, "flow_ins_id"),
            sa.Index(n.assignee_index, "assignee"),
            schema=n.schema,
            **MYSQL_TABLE_OPTIONS,
        )

    def _todo_table(self) -> sa.Table:
        n = self.names
        return sa.Table(
            n.todo_table,
            self.metadata,
            *todo_columns(),
            sa.UniqueConstraint("instant_id", "node_id", "candidate", name=n.todo_unique),
            sa.Index(n.candidate_index, "candidate", "id"),
            schema=n.schema,
            # A row id is an inbox cursor: SQLite would give a new row the id of the newest
            # one deleted (max + 1), hiding a reopened task from a pager already past it.
            sqlite_autoincrement=True,
            **MYSQL_TABLE_OPTIONS,
        )


def _unclaimed(metadata: object, names: TableNames) -> sa.MetaData:
    """``metadata``, checked to be a ``MetaData`` without a table of ``names`` yet: SQLAlchemy
    refuses a second definition with its own ``InvalidRequestError`` (or an
    ``AttributeError`` for another object) — after the tables before it were added."""
    if not isinstance(metadata, sa.MetaData):
        raise InvalidArgumentTypeError("metadata", metadata, "a sqlalchemy.MetaData or None")
    schema = names.schema if names.schema is not None else metadata.schema
    for name in (names.repo_table, names.task_table, names.todo_table):
        key = f"{schema}.{name}" if schema else name
        if key in metadata.tables:
            raise InvalidArgumentError(
                "metadata",
                metadata,
                f"it already holds a table {key!r}: pass another MetaData, or other table names",
            )
    return metadata


def index_columns() -> list[sa.Column[Any]]:
    """The repository columns of the task index (all nullable; NULL ``status``: not indexed).

    ``open_tasks`` is the aggregate's own record of its open tasks (with their lineage), read
    with the row lock, so an operation knows what it changes without reading ``todo``.
    """
    return [
        sa.Column("graph_id", _exact_id()),
        sa.Column("status", sa.Integer()),
        sa.Column("finish_time", sa.DateTime()),
        sa.Column("open_tasks", _json()),
    ]


def todo_columns() -> list[sa.Column[Any]]:
    """The columns of the open-task table, in order."""
    return [
        _id_column(),
        sa.Column("instant_id", _exact_id(), nullable=False),
        sa.Column("graph_id", _exact_id(), nullable=False),
        sa.Column("node_id", _exact_id(), nullable=False),
        sa.Column("node_name", sa.String(64)),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("candidate", ExactString(CANDIDATE_LENGTH), nullable=False),
        sa.Column("lineage", _json()),
        sa.Column("create_time", sa.DateTime()),
    ]


__all__ = [
    "CANDIDATE_LENGTH",
    "DEFAULT_REPO_TABLE",
    "DEFAULT_TASK_TABLE",
    "DEFAULT_TODO_TABLE",
    "DEFAULT_VERSION_TABLE",
    "EXACT_ID_COLUMNS",
    "ID_LENGTH",
    "MYSQL_TABLE_OPTIONS",
    "ExactString",
    "FlowTables",
    "TableNames",
    "index_columns",
    "todo_columns",
    "validate_identifier",
]
