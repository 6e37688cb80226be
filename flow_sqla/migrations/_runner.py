"""The body of env.py, shared by the packaged migrations and the repository's ``alembic/``.

Resolves the table names and the database URL, then runs the revisions online (on the
caller's connection when ``Config.attributes["connection"]`` holds one) or offline (``--sql``).
Online runs hold the table set's migration lock (:func:`flow_sqla._dialect.migration_lock`)
from before the version table is read until the end, so replicas upgrading at once take turns.
"""

from __future__ import annotations

import decimal
import numbers
import os
from logging.config import fileConfig
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import context
from alembic.config import Config

from flow._text import safe_repr
from flow_sqla._dialect import (
    MAX_MIGRATION_LOCK_TIMEOUT,
    MIGRATION_LOCK_TIMEOUT,
    migration_lock,
    migration_lock_key,
)
from flow_sqla.errors import RepositoryError
from flow_sqla.migrations import LOCK_TIMEOUT_KEY, NAMES_KEY, resolve_names
from flow_sqla.migrations._adopt import (
    adopted_revision,
    is_stamp,
    only_our_heads,
    our_revisions,
    plan,
    starting_from,
)
from flow_sqla.tables import FlowTables, TableNames


def run_migrations() -> None:
    """Run the migration Alembic asked for; called from env.py."""
    config = context.config
    if config.config_file_name is not None and config.file_config.has_section("loggers"):
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    names = _names(config)
    options = _configure_options(names)
    connection = config.attributes.get("connection")
    if context.is_offline_mode():
        context.configure(
            url=_url(config),
            literal_binds=True,
            dialect_opts={"paramstyle": "named"},
            **options,
        )
        with context.begin_transaction():
            context.run_migrations()
    elif isinstance(connection, sa.Connection):
        _run_online(connection, names, options, _lock_timeout(config))
    else:
        url = _url(config)
        _create_sqlite_directory(url)
        engine = sa.create_engine(url, poolclass=sa.NullPool)
        try:
            with engine.connect() as conn:
                _run_online(conn, names, options, _lock_timeout(config))
        finally:
            engine.dispose()


def _names(config: Config) -> TableNames:
    names = config.attributes.get(NAMES_KEY)
    if not isinstance(names, TableNames):
        names = resolve_names(context.get_x_argument(as_dictionary=True), os.environ)
        config.attributes[NAMES_KEY] = names
    return names


def _configure_options(names: TableNames) -> dict[str, Any]:
    tables = {names.repo_table, names.task_table, names.todo_table}

    def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
        # autogenerate/check only looks at our tables, never the host app's.
        return type_ != "table" or name in tables

    metadata = FlowTables(
        repo_table=names.repo_table,
        task_table=names.task_table,
        schema=names.schema,
        todo_table=names.todo_table,
    ).metadata
    return {
        "target_metadata": metadata,
        "version_table": names.version_table,
        "version_table_schema": names.schema,
        "include_name": include_name,
        "compare_type": True,
    }


def _run_online(
    connection: sa.Connection, names: TableNames, options: dict[str, Any], lock_timeout: float
) -> None:
    """Run on ``connection`` holding the table set's migration lock from before anything is
    read (see :func:`flow_sqla._dialect.migration_lock`): replicas upgrading at once take
    turns, and the later ones find the schema migrated."""
    with migration_lock(connection, lock_key(connection, names), timeout=lock_timeout):
        _migrate(connection, names, options)


def lock_key(connection: sa.Connection, names: TableNames) -> str:
    """The name of the migration lock of ``names``: keyed on where the tables actually are,
    not on how the caller spelled it, so a replica naming the default schema and one leaving
    it out take the same lock instead of migrating at once (see
    :func:`flow_sqla._dialect.migration_lock_key`)."""
    return migration_lock_key(connection, names.schema, names.version_table)


def _migrate(connection: sa.Connection, names: TableNames, options: dict[str, Any]) -> None:
    """Run on ``connection``, adopting tables no version table of ours records (see
    :mod:`flow_sqla.migrations._adopt`), so every command (upgrade, current, downgrade,
    stamp) sees the heads adoption means."""
    revisions = our_revisions(context.script)
    outside = not connection.in_transaction()
    adoption = plan(connection, names, revisions)
    if adoption is not None:
        options = {**options, "version_table": adoption.version_table}
    if adoption is not None and adoption.reference:
        context.configure(connection=connection, **options)
        mc = context.get_context()
        original = mc.opts.get("fn")
        if original is not None and not is_stamp(original, mc):
            # Checked before anything is written (Alembic creates its version table first).
            head = context.script.get_current_head()
            found_at = adopted_revision(connection, names, head, options["target_metadata"])
            options["fn"] = starting_from(found_at, original)
    if outside and connection.in_transaction():
        # The reads began a transaction: end it, so Alembic begins (and commits) its own.
        connection.rollback()
    context.configure(connection=connection, **options)
    if adoption is not None and adoption.shared:
        only_our_heads(context.get_context(), revisions)
    with context.begin_transaction():
        context.run_migrations()


def _lock_timeout(config: Config) -> float:
    """``upgrade(..., lock_timeout=...)`` (a number), else ``-x lock_timeout=...`` (its text),
    else the default.

    Checked before the lock is asked for, so a bad value changes nothing: a value no backend
    can wait for would otherwise fail on one backend only (or, on MariaDB, not wait at all).
    Raises :class:`RepositoryError` naming the value."""
    value = config.attributes.get(LOCK_TIMEOUT_KEY)
    if value is not None:
        timeout = _seconds(value)
    else:
        value = context.get_x_argument(as_dictionary=True).get("lock_timeout")
        if value is None:
            return MIGRATION_LOCK_TIMEOUT
        timeout = _seconds_in_text(value)
    if timeout is None or not 0 <= timeout <= MAX_MIGRATION_LOCK_TIMEOUT:
        raise RepositoryError(
            f"lock_timeout must be a number of seconds from 0 to "
            f"{MAX_MIGRATION_LOCK_TIMEOUT:.0f} (24 days), got {safe_repr(value)}"
        )
    return timeout


def _seconds(value: object) -> float | None:
    """``value`` as seconds when it is a real number (a ``Decimal`` too) — not a bool (which
    Python counts as one), not text — else ``None``, as for an integer too large for a
    float. NaN and the infinities come back as they are: the range check refuses them."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | decimal.Decimal):
        return None
    try:
        return float(value)
    except (OverflowError, ValueError):  # too large; a Decimal signalling NaN
        return None


def _seconds_in_text(text: str) -> float | None:
    """The seconds ``-x lock_timeout=...`` spells, ``None`` when it is no number."""
    try:
        return float(text)
    except ValueError:
        return None


def _url(config: Config) -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get(
        "FLOW_DATABASE_URL"
    )
    url = url or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RepositoryError(
            "No database URL: pass -x url=..., set FLOW_DATABASE_URL or sqlalchemy.url"
        )
    return url


def _create_sqlite_directory(url: str) -> None:
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
