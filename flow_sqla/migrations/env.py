"""Alembic environment of the packaged revisions (``script_location = flow_sqla:migrations``)."""

from __future__ import annotations

from flow_sqla.migrations._runner import run_migrations

run_migrations()
