"""Offline (``--sql``) Alembic output per dialect, compared with checked-in files."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from alembic import command

from flow_sqla.migrations import make_config


def _offline(url: str, **names: Any) -> str:
    buffer = io.StringIO()
    command.upgrade(make_config(url=url, output_buffer=buffer, **names), "head", sql=True)
    return buffer.getvalue()


@pytest.mark.parametrize("key", ["mysql", "mariadb", "postgresql", "sqlite"])
def test_offline_upgrade_prints_the_checked_in_sql(
    key: str, snapshot: Callable[[str, str], None], url_for: Callable[[str], str]
) -> None:
    snapshot(f"alembic/{key}.sql", _offline(url_for(key)))


@pytest.mark.parametrize("key", ["mysql", "postgresql"])
def test_offline_upgrade_with_custom_names_uses_its_own_version_table(
    key: str, snapshot: Callable[[str, str], None], url_for: Callable[[str], str]
) -> None:
    sql = _offline(url_for(key), repo_table="acme_repo", task_table="acme_task")
    snapshot(f"alembic/{key}_custom.sql", sql)
    assert "CREATE TABLE acme_repo_alembic_version" in sql


@pytest.mark.parametrize("key", ["mysql", "mariadb", "postgresql"])
def test_offline_downgrade_of_flow0003_restores_the_reference_columns(
    key: str, snapshot: Callable[[str, str], None], url_for: Callable[[str], str]
) -> None:
    buffer = io.StringIO()
    command.downgrade(
        make_config(url=url_for(key), output_buffer=buffer), "flow0003:flow0002", sql=True
    )
    snapshot(f"alembic/{key}_downgrade_flow0003.sql", buffer.getvalue())
