"""Alembic migrations for the two flow tables, usable from an installed wheel.

``upgrade``/``downgrade``/``current`` run the revisions shipped in this package
(``script_location = "flow_sqla:migrations"``) against an ``Engine``, a URL or the caller's
``Connection``. Table names are read at run time, so one set of revisions serves any number of
table sets, each recorded in its own version table (``flow_alembic_version`` for the default
names, ``<repo_table>_alembic_version`` otherwise) and never in a host app's ``alembic_version``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TextIO

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.util import CommandError

from flow._text import safe_repr
from flow.errors import InvalidArgumentTypeError
from flow_sqla._engine import engine_for
from flow_sqla.errors import InvalidArgumentError, RepositoryError
from flow_sqla.tables import DEFAULT_REPO_TABLE, DEFAULT_TASK_TABLE, FlowTables, TableNames

SCRIPT_LOCATION = "flow_sqla:migrations"
#: ``Config.attributes`` key under which env.py and the revisions find the :class:`TableNames`.
NAMES_KEY = "flow_sqla.names"
#: ``Config.attributes`` key of the seconds to wait for another process's migration.
LOCK_TIMEOUT_KEY = "flow_sqla.lock_timeout"

Bind = sa.Engine | sa.Connection | str


def resolve_names(x_args: Mapping[str, str], environ: Mapping[str, str]) -> TableNames:
    """Table names from ``-x`` arguments, else ``FLOW_REPO_TABLE``/``FLOW_TASK_TABLE``/
    ``FLOW_TODO_TABLE``/``FLOW_SCHEMA``/``FLOW_VERSION_TABLE``, else the defaults.

    Raises :class:`~flow_sqla.errors.InvalidIdentifierError` for a bad name.
    """

    def pick(arg: str, env: str) -> str | None:
        return x_args.get(arg) or environ.get(env) or None

    return TableNames.create(
        repo_table=pick("repo_table", "FLOW_REPO_TABLE") or DEFAULT_REPO_TABLE,
        task_table=pick("task_table", "FLOW_TASK_TABLE") or DEFAULT_TASK_TABLE,
        schema=pick("schema", "FLOW_SCHEMA"),
        version_table=pick("version_table", "FLOW_VERSION_TABLE"),
        todo_table=pick("todo_table", "FLOW_TODO_TABLE"),
    )


def revision_names() -> TableNames:
    """The names a revision script works on, read when it runs (never hard-coded).

    Under our env.py they come from ``Config.attributes``; under a host app's own env.py
    (revisions merged through ``version_locations``) from ``-x`` arguments or the environment.
    """
    from alembic import context

    names = context.config.attributes.get(NAMES_KEY)
    if isinstance(names, TableNames):
        return names
    return resolve_names(context.get_x_argument(as_dictionary=True), os.environ)


def make_config(
    *,
    url: str | None = None,
    connection: sa.Connection | None = None,
    repo_table: str = DEFAULT_REPO_TABLE,
    task_table: str = DEFAULT_TASK_TABLE,
    schema: str | None = None,
    version_table: str | None = None,
    output_buffer: TextIO | None = None,
    todo_table: str | None = None,
) -> Config:
    """An Alembic ``Config`` for our revisions, without an ini file.

    Give ``connection`` to run on it, or ``url`` (a bare ``"postgresql+psycopg://"`` is enough
    for offline ``sql=True`` output into ``output_buffer``). Raises
    :class:`~flow_sqla.errors.InvalidIdentifierError` for a bad name.
    """
    names = TableNames.create(
        repo_table=repo_table,
        task_table=task_table,
        schema=schema,
        version_table=version_table,
        todo_table=todo_table,
    )
    return _config(names, url=url, connection=connection, output_buffer=output_buffer)


def upgrade(
    bind: Bind,
    revision: str = "head",
    *,
    repo_table: str = DEFAULT_REPO_TABLE,
    task_table: str = DEFAULT_TASK_TABLE,
    schema: str | None = None,
    version_table: str | None = None,
    lock_timeout: float | None = None,
    todo_table: str | None = None,
) -> None:
    """Upgrade the table set to ``revision``.

    Existing tables that no version table of ours records are adopted: the Go plugin's tables
    (no version table) are checked column by column against ``flow0001`` and upgraded from
    the revision they are at (see :func:`current`), or refused with
    :class:`~flow_sqla.errors.SchemaMismatchError` listing every difference; our revisions
    recorded in a host app's ``alembic_version`` (recipe B) are upgraded there, touching only
    our row.

    On the caller's ``Connection`` inside a transaction nothing is committed (MySQL/MariaDB
    commit DDL implicitly anyway); otherwise Alembic commits. Processes upgrading the same
    table set at once take turns on a database lock (``GET_LOCK`` on MySQL/MariaDB, an
    advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite): the first migrates, the
    others then find it done. ``lock_timeout`` (seconds, default 600, at most 2073600 = 24
    days on every backend; else a :class:`~flow_sqla.errors.RepositoryError` before any lock
    is asked for) bounds the wait; past it :class:`~flow_sqla.errors.MigrationLockError` is
    raised. Any failure is a
    :class:`~flow_sqla.errors.RepositoryError` with the cause chained; a ``revision`` that is
    not a string is :class:`~flow.errors.InvalidArgumentTypeError`, an empty one
    :class:`~flow_sqla.errors.InvalidArgumentError`, before anything is migrated.
    """
    names = TableNames.create(
        repo_table=repo_table,
        task_table=task_table,
        schema=schema,
        version_table=version_table,
        todo_table=todo_table,
    )
    _run(command.upgrade, bind, names, revision, lock_timeout)


def downgrade(
    bind: Bind,
    revision: str = "base",
    *,
    repo_table: str = DEFAULT_REPO_TABLE,
    task_table: str = DEFAULT_TASK_TABLE,
    schema: str | None = None,
    version_table: str | None = None,
    lock_timeout: float | None = None,
    todo_table: str | None = None,
) -> None:
    """Downgrade the table set to ``revision`` (``"base"`` drops every table); takes the same
    lock as :func:`upgrade`."""
    names = TableNames.create(
        repo_table=repo_table,
        task_table=task_table,
        schema=schema,
        version_table=version_table,
        todo_table=todo_table,
    )
    _run(command.downgrade, bind, names, revision, lock_timeout)


def current(
    bind: Bind,
    *,
    repo_table: str = DEFAULT_REPO_TABLE,
    task_table: str = DEFAULT_TASK_TABLE,
    schema: str | None = None,
    version_table: str | None = None,
    todo_table: str | None = None,
) -> str | None:
    """The revision applied to the table set, or ``None`` when there are no tables.

    Recognises tables no version table of ours records: our revisions in a host app's
    ``alembic_version`` (recipe B), and unrecorded tables whose columns match ``flow0001``,
    reported as the revision they are at: ``"flow0001"`` for the Go plugin's ``ddl.sql``,
    ``"flow0002"``/``"flow0003"`` for ours with that revision's indexes (and exact id
    collation), the head revision for tables equal to the ``FlowTables`` schema (e.g. from
    ``metadata.create_all()``); else :class:`~flow_sqla.errors.SchemaMismatchError` lists the
    differences. Reads only.
    """
    names = TableNames.create(
        repo_table=repo_table,
        task_table=task_table,
        schema=schema,
        version_table=version_table,
        todo_table=todo_table,
    )
    from alembic.script import ScriptDirectory

    from flow_sqla.migrations._adopt import our_revisions, recorded_revision

    script = ScriptDirectory.from_config(_config(names))
    head = script.get_current_head()
    metadata = FlowTables(
        repo_table=names.repo_table,
        task_table=names.task_table,
        schema=names.schema,
        todo_table=names.todo_table,
    ).metadata
    reading = _failures_as_repository_errors(f"Reading the revision of {_set_of(names)}")
    with reading, _connected(bind) as conn:
        return recorded_revision(conn, names, our_revisions(script), head, metadata)


def _config(
    names: TableNames,
    *,
    url: str | None = None,
    connection: sa.Connection | None = None,
    output_buffer: TextIO | None = None,
) -> Config:
    cfg = Config(output_buffer=output_buffer)
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes[NAMES_KEY] = names
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _run(
    step: Callable[[Config, str], None],
    bind: Bind,
    names: TableNames,
    revision: str,
    lock_timeout: float | None,
) -> None:
    """Run an Alembic ``command.upgrade``/``downgrade`` for ``names`` on ``bind``; database
    and Alembic errors become :class:`RepositoryError` (our own errors pass unchanged).

    ``revision`` must be text naming a revision: Alembic takes anything and fails inside with
    a bare ``TypeError`` (``None``, a number) or ``AssertionError`` (``""``; ``"head+1"`` on an
    empty database, an ``assert`` of its revision map) — refused here, or wrapped, before
    anything is migrated."""
    if not isinstance(revision, str):
        raise InvalidArgumentTypeError(
            "revision", revision, "a revision string ('head', 'base', a revision id, '+1'...)"
        )
    if not revision.strip():
        raise InvalidArgumentError("revision", revision, "name a revision ('head', 'base'...)")
    what = f"Migration of {_set_of(names)} to {safe_repr(revision)}"
    with _failures_as_repository_errors(what), _connected(bind) as conn:
        cfg = _config(names, connection=conn)
        if lock_timeout is not None:
            cfg.attributes[LOCK_TIMEOUT_KEY] = lock_timeout
        try:
            step(cfg, revision)
        except AssertionError as exc:  # Alembic's revision map refusing the revision
            raise RepositoryError(f"{what} failed: Alembic cannot resolve it") from exc


def _set_of(names: TableNames) -> str:
    return f"{names.repo_table!r}/{names.task_table!r}"


@contextmanager
def _failures_as_repository_errors(what: str) -> Iterator[None]:
    """Database and Alembic errors of the block become :class:`RepositoryError` ("``what``
    failed: …", the cause chained), as the repository's own errors do (persistence.md §8).
    Our own errors pass unchanged."""
    try:
        yield
    except (sa.exc.SQLAlchemyError, CommandError) as exc:
        detail = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
        first = (str(detail).strip().splitlines() or [""])[0]
        raise RepositoryError(f"{what} failed: {type(detail).__name__}: {first}") from exc


@contextmanager
def _connected(bind: Bind) -> Iterator[sa.Connection]:
    if isinstance(bind, sa.Connection):
        yield bind
        return
    # A URL: a malformed one, an unknown dialect or a driver that is not installed is a
    # RepositoryError, as for every other entry point that takes a URL.
    engine = engine_for(bind)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        if isinstance(bind, str):
            engine.dispose()


__all__ = [
    "LOCK_TIMEOUT_KEY",
    "NAMES_KEY",
    "SCRIPT_LOCATION",
    "current",
    "downgrade",
    "make_config",
    "resolve_names",
    "revision_names",
    "upgrade",
]
