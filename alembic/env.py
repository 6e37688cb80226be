"""Alembic environment for ``alembic ...`` run from the repository root.

A thin wrapper: the logic (names from ``-x``/environment, URL from ``-x url``,
``FLOW_DATABASE_URL`` or alembic.ini, own version table) lives in the package so the CLI and
``flow_sqla.migrations.upgrade(...)`` behave the same.
"""

from __future__ import annotations

from flow_sqla.migrations._runner import run_migrations

run_migrations()
