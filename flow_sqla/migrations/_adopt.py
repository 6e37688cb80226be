"""Adopting flow tables that no version table of ours records.

Two kinds of databases hold our tables without ``flow_alembic_version`` saying so:

* **Go plugin tables** — created by its ``ddl.sql`` (or by hand), no version table at all. Their
  columns are compared with revision ``flow0001`` (the same DDL); when they match the run
  stamps the revision they are at and continues from there, when they do not,
  :class:`~flow_sqla.errors.SchemaMismatchError` lists every difference before anything is
  written. The revision is the newest whose shape they have: head for tables that equal the
  head schema entirely (``FlowTables.metadata.create_all()``), ``flow0003``/``flow0002`` for
  ours whose version table was dropped (the indexes and collation those revisions leave),
  else ``flow0001``: re-running a later revision would fail on what exists.
* **Recipe B** — a host application ran our revisions inside its own Alembic history, so its
  ``alembic_version`` holds our revision next to its own. The run then keeps using that table,
  sees only our revisions in it and updates only our row, so the host's ``alembic upgrade
  heads`` and ours never disagree.

Alembic has no option for either, so the run's migration context is adjusted after
``context.configure``: the command's step function is wrapped (Go tables) or the heads it
reads are filtered (recipe B).

Only the online run consults this module; offline ``--sql`` output is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext, RevisionStep, StampStep
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util import CommandError

from flow_sqla._dialect import exact_collation
from flow_sqla.errors import ColumnDifference, RepositoryError, SchemaMismatchError
from flow_sqla.migrations._reference import (
    EXACT_ID_REVISION,
    EXACT_REPOSITORY_COLUMNS,
    EXACT_TASK_COLUMNS,
    INDEX_REVISION,
    REFERENCE_REVISION,
    reference_metadata,
)
from flow_sqla.tables import TableNames

#: The version table Alembic uses when an application does not name one (recipe B).
HOST_VERSION_TABLE = "alembic_version"

#: What Alembic hands ``fn``: the current heads and the migration context -> the steps to run.
StepsFn = Callable[[tuple[str, ...], MigrationContext], Sequence[Any]]


@dataclass(frozen=True, kw_only=True)
class Adoption:
    """How one run treats a database whose own version table records nothing.

    ``version_table`` is the table this run reads and writes; ``shared`` is true when it is a
    host's table (recipe B, other rows are not ours); ``reference`` is true when the run
    starts from ``flow0001`` because the tables exist and match it.
    """

    version_table: str
    shared: bool = False
    reference: bool = False


def our_revisions(script: ScriptDirectory) -> frozenset[str]:
    """Every revision id the script directory holds (ours: flow0001, flow0002, ...)."""
    return frozenset(rev.revision for rev in script.walk_revisions())


def plan(conn: sa.Connection, names: TableNames, revisions: frozenset[str]) -> Adoption | None:
    """``None`` when our own version table records a revision or the tables do not exist
    (the plain run applies); otherwise how to adopt. Reads only. Raises
    :class:`RepositoryError` when our version table records one of our revisions for a
    table set none of whose tables exists (two sets given one version table: the second
    set's upgrade did nothing and ``current()`` reported the first set's revision).

    A host's ``alembic_version`` counts only while the tables exist: its row describes the
    tables the host's run created, which may have other names than these."""
    inspector = sa.inspect(conn)
    tables = (names.repo_table, names.task_table)
    own = _heads(conn, names.version_table, names.schema)
    if own:
        ours = [head for head in own if head in revisions]  # a host's own table holds others
        if ours and not any(inspector.has_table(name, schema=names.schema) for name in tables):
            raise RepositoryError(
                f"Version table {names.version_table!r} records {', '.join(ours)} but neither "
                f"{names.repo_table!r} nor {names.task_table!r} exists: it records another "
                "table set (give each set its own version_table) or the tables were dropped "
                "by hand (delete its row too); nothing was migrated"
            )
        return None
    if not any(inspector.has_table(name, schema=names.schema) for name in tables):
        return None
    if names.version_table != HOST_VERSION_TABLE:
        host = _heads(conn, HOST_VERSION_TABLE, names.schema)
        if any(head in revisions for head in host):
            return Adoption(version_table=HOST_VERSION_TABLE, shared=True)
    return Adoption(version_table=names.version_table, reference=True)


def adopted_revision(
    conn: sa.Connection, names: TableNames, head: str | None, head_metadata: sa.MetaData
) -> str:
    """The revision unrecorded tables are at, newest first: ``head`` when they equal
    ``head_metadata`` (every table, column, type, nullability and index); else, when their
    columns match ``flow0001``, the revision the later revisions' marks tell (see
    :func:`_marked_revision`): the Go plugin's tables are at ``flow0001``, ours whose version
    table was dropped at ``flow0002`` or ``flow0003``, so the upgrade continues from there
    instead of failing on an index that exists.

    Raises :class:`SchemaMismatchError` otherwise — for differing columns, and for a table only
    a later revision creates (the open-task table of ``flow0004``, left from an earlier life of
    the tables): that revision would fail on it half-way, and MySQL/MariaDB cannot roll back
    the columns it added before. Reads only, so a refused database is left as it was."""
    if head is not None:
        to_head = _full_differences(conn, names, head_metadata)
        if not to_head:
            return head
        missing = _only_missing_indexes(to_head)
        if missing:
            # Head's tables that lost an index (with their version table): stamping an older
            # revision would run its steps again on columns that exist.
            raise SchemaMismatchError(missing, revision=head)
    found = differences(conn, names)
    if found:
        # Columns first: their advice (stamp the revision the tables are at, or fix them) is
        # what makes the tables adoptable; a leftover table is told once they are.
        raise SchemaMismatchError(found, revision=REFERENCE_REVISION)
    revision = _marked_revision(conn, names)
    refuse_leftover_tables(conn, names, revision)
    return revision


def _marked_revision(conn: sa.Connection, names: TableNames) -> str:
    """Which of ``flow0001``-``flow0003`` tables whose columns match ``flow0001`` are at.

    ``flow0002`` leaves its two indexes; ``flow0003`` then the exact collation on the id
    columns on MySQL/MariaDB, and nothing on PostgreSQL/SQLite, where tables with the indexes
    are taken to be at ``flow0003`` (nothing of it is left to do). Id columns of which only
    some are exact (an interrupted ``flow0003``) count as ``flow0002``: running ``flow0003``
    again is harmless. One index of the two (an interrupted ``flow0002``) fits no revision:
    :class:`SchemaMismatchError` naming the missing one."""
    inspector = sa.inspect(conn)
    present = {ix["name"] for ix in inspector.get_indexes(names.task_table, schema=names.schema)}
    wanted = (names.flow_ins_id_index, names.assignee_index)
    missing = [name for name in wanted if name not in present]
    if len(missing) == len(wanted):
        return REFERENCE_REVISION
    if missing:
        raise SchemaMismatchError(
            [
                ColumnDifference(
                    table=names.task_table, column=None, kind="missing index", expected=name
                )
                for name in missing
            ],
            revision=INDEX_REVISION,
        )
    return EXACT_ID_REVISION if _ids_exact(conn, names) else INDEX_REVISION


def _ids_exact(conn: sa.Connection, names: TableNames) -> bool:
    """Whether every id column ``flow0003`` changes has the exact collation (always true where
    the dialect needs none)."""
    collation = exact_collation(conn.dialect)
    if collation is None:
        return True
    inspector = sa.inspect(conn)
    for table, columns in (
        (names.repo_table, EXACT_REPOSITORY_COLUMNS),
        (names.task_table, EXACT_TASK_COLUMNS),
    ):
        found = {
            column["name"]: getattr(column["type"], "collation", None)
            for column in inspector.get_columns(table, schema=names.schema)
        }
        if any(found.get(name) != collation for name in columns):
            return False
    return True


def refuse_leftover_tables(conn: sa.Connection, names: TableNames, revision: str) -> None:
    """Raise :class:`SchemaMismatchError` when a table that the next revision creates exists
    already, beside tables a version table records at ``revision`` (the recovery recipes of
    migrations.md lead there when the open-task table is not dropped first). The revision
    calls it before its first statement: it would otherwise fail half-way, and on
    MySQL/MariaDB the columns it added before stay. Reads only."""
    leftover = _leftover_tables(conn, names)
    if leftover:
        raise SchemaMismatchError(leftover, revision=revision)


def _leftover_tables(conn: sa.Connection, names: TableNames) -> list[ColumnDifference]:
    """The tables of the set that only a revision after ``flow0003`` creates, found existing
    beside tables that are not at head (the open-task table)."""
    if not sa.inspect(conn).has_table(names.todo_table, schema=names.schema):
        return []
    return [ColumnDifference(table=names.todo_table, column=None, kind="leftover table")]


def recorded_revision(
    conn: sa.Connection,
    names: TableNames,
    revisions: frozenset[str],
    head: str | None = None,
    head_metadata: sa.MetaData | None = None,
) -> str | None:
    """The revision the table set is at, however it is recorded: our version table, a host's
    (recipe B), or ``flow0001`` for matching tables without any. ``None`` when there are no
    tables. Raises :class:`SchemaMismatchError` for unrecorded tables that do not match."""
    own = _heads(conn, names.version_table, names.schema)
    adoption = plan(conn, names, revisions)
    if adoption is None:
        return _single(own)
    if adoption.shared:
        return _single(
            [h for h in _heads(conn, HOST_VERSION_TABLE, names.schema) if h in revisions]
        )
    if head_metadata is None:
        check_reference_tables(conn, names)
        return REFERENCE_REVISION
    return adopted_revision(conn, names, head, head_metadata)


def check_reference_tables(conn: sa.Connection, names: TableNames) -> None:
    """Raise :class:`SchemaMismatchError` unless both tables match revision ``flow0001``."""
    found = differences(conn, names)
    if found:
        raise SchemaMismatchError(found, revision=REFERENCE_REVISION)


def differences(conn: sa.Connection, names: TableNames) -> list[ColumnDifference]:
    """How the existing tables differ from ``flow0001``, column by column.

    Types and nullability are compared the way ``alembic check`` compares them (so MariaDB's
    JSON-as-LONGTEXT or MySQL's ``int(11)`` are no difference); comments, defaults and index
    names are not compared. A unique key on ``instant_id`` (any name) is required: every
    upsert relies on it.
    """
    wanted = {names.repo_table, names.task_table}
    found: list[ColumnDifference] = []
    for diff in _compare(conn, names, reference_metadata(names), wanted):
        found.extend(_column_differences(diff))
    if conn.dialect.name == "sqlite":
        found = [d for d in found if not _sqlite_row_id(conn, names, d)]
    repo_missing = any(d.kind == "missing table" and d.table == names.repo_table for d in found)
    if not repo_missing and not _has_unique_key(conn, names, "instant_id"):
        found.append(ColumnDifference(table=names.repo_table, column="instant_id", kind="unique"))
    return found


def _only_missing_indexes(found: list[Any]) -> list[ColumnDifference]:
    """``found`` (Alembic's comparison) as missing indexes, when that is all it holds."""
    if not all(isinstance(diff, tuple) and diff[0] == "add_index" for diff in found):
        return []
    return [
        ColumnDifference(
            table=diff[1].table.name, column=None, kind="missing index", expected=diff[1].name
        )
        for diff in found
    ]


def _full_differences(conn: sa.Connection, names: TableNames, metadata: sa.MetaData) -> list[Any]:
    """Every difference ``alembic check`` would report for the tables of ``metadata``
    (comments aside)."""
    wanted = {table.name for table in metadata.tables.values()}
    return [
        diff
        for diff in _compare(conn, names, metadata, wanted)
        if not (isinstance(diff, list) and all("comment" in item[0] for item in diff))
        and not (isinstance(diff, tuple) and "comment" in diff[0])
    ]


def _compare(
    conn: sa.Connection, names: TableNames, metadata: sa.MetaData, tables: set[str]
) -> list[Any]:
    def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
        if type_ == "schema":
            return name == names.schema
        return type_ != "table" or name in tables

    ctx = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "include_name": include_name,
            "include_schemas": names.schema is not None,
        },
    )
    return list(compare_metadata(ctx, metadata))


def starting_from(revision: str, original: StepsFn) -> StepsFn:
    """Wrap the command's ``fn`` for unrecorded tables found at ``revision`` (see
    :func:`adopted_revision`): an upgrade first stamps ``revision``, then runs the steps from
    there. Other commands see the database as it is: a downgrade of tables we never recorded
    runs on no heads (a downgrade drops nothing). A stamp is never wrapped (see
    :func:`is_stamp`)."""

    def steps(heads: tuple[str, ...], mc: MigrationContext) -> Sequence[Any]:
        if heads:
            return original(heads, mc)
        later = list(original((revision,), mc))
        upgrading = all(type(step) is RevisionStep and step.is_upgrade for step in later)
        if not upgrading or (not later and mc.opts.get("destination_rev") is None):
            return original(heads, mc)  # not an upgrade, or ``current``: nothing to record
        script = mc.opts.get("script")
        revision_map = script.revision_map if isinstance(script, ScriptDirectory) else None
        stamp = StampStep(None, revision, True, True, revision_map)
        return [stamp, *later]

    return steps


def is_stamp(original: StepsFn, mc: MigrationContext) -> bool:
    """Whether the command is a stamp, which records the revision it names without looking
    at the tables — the way out :class:`SchemaMismatchError` offers for a difference known to
    be harmless. Its steps from no heads are stamp steps (computing steps has no side effect;
    ``current`` prints nothing for no heads)."""
    try:
        steps = list(original((), mc))
    except (CommandError, RevisionError):  # a downgrade target no head leads to
        return False
    return bool(steps) and all(isinstance(step, StampStep) for step in steps)


def only_our_heads(mc: MigrationContext, revisions: frozenset[str]) -> None:
    """Recipe B: make ``mc`` see only our revisions among the heads of the host's version
    table, so Alembic never looks up the host's revisions (it cannot: they are not in our
    script directory) and updates only our row."""
    every_head = mc.get_current_heads

    def our_heads() -> tuple[str, ...]:
        return tuple(head for head in every_head() if head in revisions)

    mc.get_current_heads = our_heads  # type: ignore[method-assign]


def _heads(conn: sa.Connection, table: str, schema: str | None) -> tuple[str, ...]:
    ctx = MigrationContext.configure(
        conn, opts={"version_table": table, "version_table_schema": schema}
    )
    return ctx.get_current_heads()


def _single(heads: Iterable[str]) -> str | None:
    found = sorted(heads)
    if len(found) > 1:
        raise RepositoryError(f"The flow tables have several current revisions: {found}")
    return found[0] if found else None


def _has_unique_key(conn: sa.Connection, names: TableNames, column: str) -> bool:
    inspector = sa.inspect(conn)
    table, schema = names.repo_table, names.schema
    keys: list[list[Any]] = [
        list(uc["column_names"]) for uc in inspector.get_unique_constraints(table, schema=schema)
    ]
    keys += [
        list(ix["column_names"])
        for ix in inspector.get_indexes(table, schema=schema)
        if ix["unique"]
    ]
    return [column] in keys


def _sqlite_row_id(conn: sa.Connection, names: TableNames, diff: ColumnDifference) -> bool:
    """Whether ``diff`` is SQLite reporting its row id as nullable: ``id INTEGER PRIMARY KEY``
    without ``NOT NULL`` (the usual hand-written key) aliases the row id, which never holds
    NULL, yet ``PRAGMA table_info`` says the column may."""
    if diff.kind != "nullable" or diff.column is None:
        return False
    inspector = sa.inspect(conn)
    key = inspector.get_pk_constraint(diff.table, schema=names.schema)
    if list(key.get("constrained_columns") or ()) != [diff.column]:
        return False
    columns = inspector.get_columns(diff.table, schema=names.schema)
    declared = next(str(c["type"]) for c in columns if c["name"] == diff.column)
    return declared.upper() == "INTEGER"  # only that spelling aliases the row id


def _column_differences(diff: Any) -> list[ColumnDifference]:
    """Our differences for one ``compare_metadata`` entry (a tuple, or a list of modify
    tuples for one column); index, constraint and comment differences give none."""
    if isinstance(diff, list):
        return [d for item in diff for d in _column_differences(item)]
    kind = diff[0]
    if kind == "add_table":
        return [ColumnDifference(table=diff[1].name, column=None, kind="missing table")]
    if kind == "add_column":
        column = diff[3]
        return [
            ColumnDifference(
                table=diff[2],
                column=column.name,
                kind="missing",
                expected=_type(column.type, column.nullable),
            )
        ]
    if kind == "remove_column":
        column = diff[3]
        return [
            ColumnDifference(
                table=diff[2],
                column=column.name,
                kind="extra",
                found=_type(column.type, column.nullable),
            )
        ]
    if kind == "modify_type":
        _, _, table, name, _, found, expected = diff
        return [
            ColumnDifference(
                table=table,
                column=name,
                kind="type",
                expected=_render(expected),
                found=_render(found),
            )
        ]
    if kind == "modify_nullable":
        _, _, table, name, _, found, expected = diff
        return [
            ColumnDifference(
                table=table,
                column=name,
                kind="nullable",
                expected=_null(expected),
                found=_null(found),
            )
        ]
    return []


def _render(type_: Any) -> str:
    try:
        return str(type_)
    except Exception:  # a type some dialect cannot render generically
        return type(type_).__name__


def _null(nullable: Any) -> str:
    return "NULL" if nullable else "NOT NULL"


def _type(type_: Any, nullable: Any) -> str:
    return f"{_render(type_)} {_null(nullable)}"


__all__ = [
    "HOST_VERSION_TABLE",
    "Adoption",
    "adopted_revision",
    "check_reference_tables",
    "differences",
    "is_stamp",
    "only_our_heads",
    "our_revisions",
    "plan",
    "recorded_revision",
    "refuse_leftover_tables",
    "starting_from",
]
