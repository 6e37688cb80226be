"""The shipped Alembic revisions on SQLite, MySQL/MariaDB and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from flow_sqla import FlowTables, RepositoryError
from flow_sqla.migrations import current, downgrade, make_config, upgrade

ROOT = Path(__file__).resolve().parents[2]
HEAD = "flow0004"
CUSTOM: dict[str, Any] = {"repo_table": "acme_repo", "task_table": "acme_task"}


def _tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def _diff(engine: sa.Engine, tables: FlowTables) -> list[Any]:
    ours = {tables.repository.name, tables.task.name, tables.todo.name}

    def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
        return type_ != "table" or name in ours

    with engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_name": include_name}
        )
        return list(compare_metadata(ctx, tables.metadata))


def test_upgrade_head_creates_both_tables_and_the_flow_version_table(engine: sa.Engine) -> None:
    upgrade(engine)
    assert {"bpm_flow_repository", "bpm_flow_task", "flow_alembic_version"} <= _tables(engine)


def test_migrated_schema_has_no_autogenerate_diff_against_flow_tables(engine: sa.Engine) -> None:
    upgrade(engine)
    assert _diff(engine, FlowTables()) == []


def test_migrated_custom_schema_has_no_autogenerate_diff(engine: sa.Engine) -> None:
    upgrade(engine, **CUSTOM)
    assert _diff(engine, FlowTables(**CUSTOM)) == []


def test_revision_graph_has_a_single_head() -> None:
    script = ScriptDirectory.from_config(make_config())
    assert script.get_heads() == [HEAD]


def test_host_apps_alembic_version_is_untouched(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO alembic_version (version_num) VALUES ('host0001')")
    upgrade(engine)
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    assert rows == [("host0001",)]


def test_custom_table_set_lives_beside_the_default_one_with_its_own_history(
    engine: sa.Engine,
) -> None:
    upgrade(engine)
    upgrade(engine, "flow0001", **CUSTOM)
    assert {"acme_repo", "acme_task", "acme_repo_alembic_version"} <= _tables(engine)
    assert (current(engine), current(engine, **CUSTOM)) == (HEAD, "flow0001")


def test_a_version_table_recording_another_table_set_is_refused(engine: sa.Engine) -> None:
    """Two sets given one version table: the second set's upgrade found the first set's
    revision recorded, did nothing, and ``current()`` then reported it for tables that do
    not exist. Now both refuse, naming the version table; nothing is created."""
    upgrade(engine)
    shared = {**CUSTOM, "version_table": "flow_alembic_version"}
    before = _tables(engine)
    with pytest.raises(RepositoryError, match="'flow_alembic_version' records flow"):
        upgrade(engine, **shared)
    with pytest.raises(RepositoryError, match="give each set its own version_table"):
        current(engine, **shared)
    assert _tables(engine) == before
    assert current(engine) == HEAD


def test_downgrade_base_removes_both_tables(engine: sa.Engine) -> None:
    upgrade(engine)
    downgrade(engine)
    assert _tables(engine) & {"bpm_flow_repository", "bpm_flow_task", "bpm_flow_todo"} == set()
    assert current(engine) is None


def test_current_reports_the_applied_revision(engine: sa.Engine) -> None:
    assert current(engine) is None
    upgrade(engine, "flow0001")
    assert current(engine) == "flow0001"


def test_upgrade_accepts_a_url(db_url: str) -> None:
    upgrade(db_url, **CUSTOM)
    assert current(db_url, **CUSTOM) == HEAD


def test_upgrade_runs_inside_the_callers_transaction(engine: sa.Engine) -> None:
    tables = FlowTables()
    with engine.begin() as conn:
        upgrade(conn)
        conn.execute(tables.repository.insert().values(instant_id="i-1"))
        assert conn.in_transaction()
    with engine.connect() as conn:
        assert conn.execute(sa.select(tables.repository.c.instant_id)).scalars().all() == ["i-1"]
    assert current(engine) == HEAD


def test_upgrade_on_sqlalchemy_s_pysqlite_savepoint_recipe(tmp_path: Path) -> None:
    """SQLAlchemy's documented recipe for SAVEPOINTs on pysqlite (the driver's own transaction
    handling off, ``BEGIN`` sent from a ``begin`` event): the migration runs in the
    transaction the event began (a ``BEGIN IMMEDIATE`` after it would be refused)."""
    engine = sa.create_engine(
        f"sqlite:///{tmp_path / 'recipe.sqlite'}", connect_args={"isolation_level": None}
    )

    @sa.event.listens_for(engine, "begin")
    def begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    try:
        upgrade(engine)
        assert current(engine) == HEAD
    finally:
        engine.dispose()


def test_alembic_cli_upgrades_from_the_repository_root(db_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    cli = [str(Path(sys.executable).with_name("alembic")), "-x", f"url={db_url}"]
    run: dict[str, Any] = {"cwd": ROOT, "env": env, "capture_output": True, "text": True}
    done = subprocess.run([*cli, "upgrade", "head"], check=False, **run)
    assert done.returncode == 0, done.stderr
    custom = ["-x", "repo_table=acme_repo", "-x", "task_table=acme_task", "upgrade", "head"]
    done = subprocess.run([*cli, *custom], check=False, **run)
    assert done.returncode == 0, done.stderr
    assert (current(db_url), current(db_url, **CUSTOM)) == (HEAD, HEAD)


_HOST_ENV = """\
from alembic import context
from sqlalchemy import engine_from_config, pool

config = context.config
section = config.get_section(config.config_ini_section, {})
engine = engine_from_config(section, prefix="sqlalchemy.", poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()
"""
_HOST_REVISION = """\
import pytest
import sqlalchemy as sa
from alembic import op

revision = "host0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table("host_thing", sa.Column("id", sa.Integer, primary_key=True))


def downgrade():
    op.drop_table("host_thing")
"""


def test_revisions_run_inside_a_host_apps_own_history(db_url: str, tmp_path: Path) -> None:
    """The documented recipe: version_locations + path_separator = space + upgrade heads."""
    (tmp_path / "alembic" / "versions").mkdir(parents=True)
    (tmp_path / "alembic" / "env.py").write_text(_HOST_ENV)
    (tmp_path / "alembic" / "versions" / "host0001.py").write_text(_HOST_REVISION)
    (tmp_path / "alembic.ini").write_text(
        "[alembic]\n"
        "script_location = %(here)s/alembic\n"
        "version_locations = %(here)s/alembic/versions flow_sqla:migrations/versions\n"
        "path_separator = space\n"
        f"sqlalchemy.url = {db_url.replace('%', '%%')}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    env["PYTHONPATH"] = str(ROOT)
    alembic = str(Path(sys.executable).with_name("alembic"))
    done = subprocess.run(
        [alembic, "upgrade", "heads"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    engine = sa.create_engine(db_url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            versions = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars()
            assert sorted(versions) == [HEAD, "host0001"]
        assert {"host_thing", "bpm_flow_repository", "bpm_flow_task"} <= _tables(engine)
    finally:
        engine.dispose()


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)  # MySQL/MariaDB table options
def test_mysql_tables_get_the_reference_engine_and_collation(engine: sa.Engine) -> None:
    upgrade(engine)
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT table_name, engine, table_collation FROM information_schema.tables "
            "WHERE table_schema = DATABASE() "
            "AND table_name IN ('bpm_flow_repository', 'bpm_flow_task') ORDER BY 1"
        ).all()
    assert [tuple(r) for r in rows] == [
        ("bpm_flow_repository", "InnoDB", "utf8mb4_unicode_ci"),
        ("bpm_flow_task", "InnoDB", "utf8mb4_unicode_ci"),
    ]


def test_flow0004_is_additive_and_its_downgrade_removes_exactly_it(engine: sa.Engine) -> None:
    upgrade(engine, "flow0003")
    before = {t: _columns(engine, t) for t in ("bpm_flow_repository", "bpm_flow_task")}
    indexes = {t: _indexes(engine, t) for t in before}
    upgrade(engine, "flow0004")
    after = {t: _columns(engine, t) for t in before}
    assert after["bpm_flow_repository"] == [
        *before["bpm_flow_repository"],
        "graph_id",
        "status",
        "finish_time",
        "open_tasks",
    ]
    assert after["bpm_flow_task"] == [*before["bpm_flow_task"], "action"]
    assert "bpm_flow_todo" in _tables(engine)
    downgrade(engine, "flow0003")
    assert {t: _columns(engine, t) for t in before} == before
    assert {t: _indexes(engine, t) for t in before} == indexes
    assert "bpm_flow_todo" not in _tables(engine)
    assert current(engine) == "flow0003"


def _columns(engine: sa.Engine, table: str) -> list[str]:
    return [c["name"] for c in sa.inspect(engine).get_columns(table)]


def _indexes(engine: sa.Engine, table: str) -> set[str | None]:
    return {i["name"] for i in sa.inspect(engine).get_indexes(table)}
