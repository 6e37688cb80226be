"""Adopting tables our version table does not record: the Go plugin's, and recipe B's.

A database whose tables the Go plugin's ``ddl.sql`` created has no version table at all; a host
application that runs our revisions inside its own Alembic history records them in its
``alembic_version``. ``migrations.upgrade()``, ``alembic upgrade head`` and ``current()`` must
recognise both, upgrade from where the tables stand and never fail with "table exists".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from _go_plugin import (
    GO_DDL,
    MYSQL_DDL,
    GoNode,
    backend,
    create_go_tables,
    go_record,
    go_state_put,
    json_param,
)
from alembic import command as alembic_command
from alembic.script import ScriptDirectory

from flow.graph import Graph
from flow_sqla import FlowTables, SchemaMismatchError
from flow_sqla.errors import ColumnDifference
from flow_sqla.migrations import current, downgrade, make_config, upgrade

ROOT = Path(__file__).resolve().parents[2]
HEAD = ScriptDirectory.from_config(make_config()).get_current_head()
GO_STATES = {"oa:apply": 1002, "oa:amount": 1002, "oa:manager": 1001}


def oa_document() -> dict[str, Any]:
    return Graph.from_file(ROOT / "examples" / "oa.yml").to_dict()


def _versions(engine: sa.Engine, table: str) -> list[str] | None:
    """The rows of a version table, ``None`` when it does not exist."""
    if not sa.inspect(engine).has_table(table):
        return None
    with engine.connect() as conn:
        return sorted(conn.execute(sa.text(f"SELECT version_num FROM {table}")).scalars())


def _go_instance(engine: sa.Engine, instance_id: str = "go-1") -> None:
    """An instance as the Go plugin leaves it: graph id only, vars with identity keys."""
    go_state_put(
        engine,
        instance_id,
        GO_STATES,
        "employee",
        graph="oa",
        vars={"actor": "employee", "instanceId": instance_id, "amount": 300},
    )
    go_record(
        engine,
        instance_id=instance_id,
        graph_id="oa",
        source=GoNode(id="apply", title="Apply", type="ACTIVITY"),
        target=GoNode(id="manager", title="Manager approval", type="ACTIVITY"),
        assignee="employee",
        status=1002,
        form_id=1001,
        variables={"amount": 300},
        message="",
        auditor="employee",
    )


def _snapshot(engine: sa.Engine) -> list[Any]:
    with engine.connect() as conn:
        repo = conn.execute(sa.text("SELECT instant_id, creator FROM bpm_flow_repository"))
        task = conn.execute(sa.text("SELECT flow_ins_id, task_id, form_id FROM bpm_flow_task"))
        return [sorted(map(tuple, repo)), sorted(map(tuple, task))]


def test_upgrade_adopts_go_plugin_tables_and_applies_the_later_revisions(
    engine: sa.Engine,
) -> None:
    create_go_tables(engine)
    _go_instance(engine)
    before = _snapshot(engine)
    upgrade(engine)
    assert _versions(engine, "flow_alembic_version") == [HEAD]
    assert current(engine) == HEAD
    assert _snapshot(engine) == before  # the Go rows are kept as they are
    indexes = {ix["name"] for ix in sa.inspect(engine).get_indexes("bpm_flow_task")}
    assert {"ix_bpm_flow_task_flow_ins_id", "ix_bpm_flow_task_assignee"} <= indexes  # flow0002
    upgrade(engine)  # a second run is a no-op
    assert _versions(engine, "flow_alembic_version") == [HEAD]


def test_current_reports_go_tables_as_the_first_revision_without_writing(
    engine: sa.Engine,
) -> None:
    create_go_tables(engine)
    assert current(engine) == "flow0001"
    assert _versions(engine, "flow_alembic_version") is None


def test_upgrade_to_the_first_revision_only_stamps_it(engine: sa.Engine) -> None:
    create_go_tables(engine)
    upgrade(engine, "flow0001")
    assert _versions(engine, "flow_alembic_version") == ["flow0001"]
    upgrade(engine)
    assert current(engine) == HEAD


def test_downgrade_of_unrecorded_go_tables_drops_nothing(engine: sa.Engine) -> None:
    create_go_tables(engine)
    _go_instance(engine)
    downgrade(engine)
    assert {"bpm_flow_repository", "bpm_flow_task"} <= set(sa.inspect(engine).get_table_names())
    assert _snapshot(engine)[0] == [("go-1", "employee")]


def test_alembic_cli_from_the_repository_root_adopts_go_tables(db_url: str) -> None:
    engine = sa.create_engine(db_url, poolclass=sa.NullPool)
    try:
        create_go_tables(engine)
        _go_instance(engine)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
        cli = [str(Path(sys.executable).with_name("alembic")), "-x", f"url={db_url}"]
        done = subprocess.run(
            [*cli, "upgrade", "head"], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert _versions(engine, "flow_alembic_version") == [HEAD]
        assert _snapshot(engine)[0] == [("go-1", "employee")]
    finally:
        engine.dispose()


# -- tables that differ ---------------------------------------------------------------------------

_ALTERED = {
    # form_id is text, message is gone, assignee may be NULL, tenant_id is new
    "mysql": [
        ("`form_id` bigint DEFAULT NULL", "`form_id` varchar(64) DEFAULT NULL"),
        ("  `message` text COMMENT '处理消息',\n", ""),
        ("`assignee` varchar(64) NOT NULL", "`assignee` varchar(64) DEFAULT NULL"),
        ("  PRIMARY KEY (`id`)\n", "  `tenant_id` int DEFAULT NULL,\n  PRIMARY KEY (`id`)\n"),
    ],
    "postgresql": [
        ("form_id bigint DEFAULT NULL", "form_id varchar(64) DEFAULT NULL"),
        ("  message text,\n", ""),
        ("assignee varchar(64) NOT NULL", "assignee varchar(64) DEFAULT NULL"),
        (
            "  PRIMARY KEY (id)\n);\nCOMMENT ON COLUMN bpm_flow_task.message IS '处理消息';",
            "  tenant_id int DEFAULT NULL,\n  PRIMARY KEY (id)\n);",
        ),
    ],
    "sqlite": [
        ("form_id bigint DEFAULT NULL", "form_id varchar(64) DEFAULT NULL"),
        ("  message text,\n", ""),
        ("assignee varchar(64) NOT NULL", "assignee varchar(64) DEFAULT NULL"),
        (
            "  update_time datetime DEFAULT NULL\n);\n",
            "  update_time datetime DEFAULT NULL,\n  tenant_id int DEFAULT NULL\n);\n",
        ),
    ],
}


def _altered_ddl(key: str) -> str:
    ddl = GO_DDL[key]
    for old, new in _ALTERED[key]:
        assert old in ddl, old
        ddl = ddl.replace(old, new)
    return ddl


def test_mismatched_tables_are_refused_listing_every_differing_column(engine: sa.Engine) -> None:
    create_go_tables(engine, _altered_ddl(backend(engine)))
    with pytest.raises(SchemaMismatchError) as caught:
        upgrade(engine)
    found = {(d.table, d.column, d.kind) for d in caught.value.differences}
    assert found == {
        ("bpm_flow_task", "form_id", "type"),
        ("bpm_flow_task", "message", "missing"),
        ("bpm_flow_task", "assignee", "nullable"),
        ("bpm_flow_task", "tenant_id", "extra"),
    }
    message = str(caught.value)
    for part in ("bpm_flow_task.form_id", "bpm_flow_task.message", "bpm_flow_task.tenant_id"):
        assert part in message
    assert "flow0001" in message
    # refused before anything was written: no version table, no new index
    assert _versions(engine, "flow_alembic_version") is None
    assert sa.inspect(engine).get_indexes("bpm_flow_task") == []
    with pytest.raises(SchemaMismatchError):
        current(engine)


def test_a_stamp_records_mismatched_tables_and_the_next_upgrade_continues(
    engine: sa.Engine,
) -> None:
    """The way out the mismatch error offers for a harmless difference (an extra nullable
    column): ``alembic stamp flow0001``, then ``upgrade`` again."""
    ddl = GO_DDL[backend(engine)]
    extra = {
        "mysql": (
            "  PRIMARY KEY (`id`)\n",
            "  `tenant_id` int DEFAULT NULL,\n  PRIMARY KEY (`id`)\n",
        ),
        "postgresql": (
            "  PRIMARY KEY (id)\n);\nCOMMENT",
            "  tenant_id int,\n  PRIMARY KEY (id)\n);\nCOMMENT",
        ),
        "sqlite": (
            "  update_time datetime DEFAULT NULL\n);\n",
            "  update_time datetime DEFAULT NULL,\n  tenant_id int\n);\n",
        ),
    }[backend(engine)]
    assert extra[0] in ddl
    create_go_tables(engine, ddl.replace(extra[0], extra[1]))
    with pytest.raises(SchemaMismatchError) as caught:
        upgrade(engine)
    assert "'alembic stamp flow0001'" in str(caught.value)
    with engine.connect() as conn:
        config = make_config(connection=conn)
        alembic_command.stamp(config, "flow0001")
        conn.commit()
    assert _versions(engine, "flow_alembic_version") == ["flow0001"]
    upgrade(engine)
    assert current(engine) == HEAD
    assert "tenant_id" in {c["name"] for c in sa.inspect(engine).get_columns("bpm_flow_task")}


def test_a_hand_written_sqlite_row_id_key_is_no_nullability_difference(
    engine: sa.Engine,
) -> None:
    """``id INTEGER PRIMARY KEY AUTOINCREMENT`` without ``NOT NULL`` aliases SQLite's row id,
    which never holds NULL, though SQLite reports the column as nullable."""
    if backend(engine) != "sqlite":
        pytest.skip("a SQLite row id")
    rowid = "id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT"
    assert rowid in GO_DDL["sqlite"]
    create_go_tables(
        engine, GO_DDL["sqlite"].replace(rowid, "id INTEGER PRIMARY KEY AUTOINCREMENT")
    )
    upgrade(engine)
    assert current(engine) == HEAD


def test_a_missing_table_and_a_missing_unique_key_are_differences(engine: sa.Engine) -> None:
    repo_only = GO_DDL[backend(engine)].split("CREATE TABLE", 2)
    ddl = "CREATE TABLE" + repo_only[1]
    for unique in (
        ",\n  UNIQUE KEY `uniq_instantId` (`instant_id`)",
        ',\n  CONSTRAINT "uniq_instantId" UNIQUE (instant_id)',
        ",\n  CONSTRAINT uniq_instantId UNIQUE (instant_id)",
    ):
        ddl = ddl.replace(unique, "")
    create_go_tables(engine, ddl)
    with pytest.raises(SchemaMismatchError) as caught:
        upgrade(engine)
    assert set(caught.value.differences) == {
        ColumnDifference(table="bpm_flow_task", column=None, kind="missing table"),
        ColumnDifference(table="bpm_flow_repository", column="instant_id", kind="unique"),
    }
    # A missing table is most often a mistyped name: no advice to stamp the revision.
    message = str(caught.value)
    assert "check the configured table names" in message and "alembic stamp" not in message
    no_key = ColumnDifference(table="bpm_flow_repository", column="instant_id", kind="unique")
    assert "alembic stamp" in str(SchemaMismatchError([no_key], revision="flow0001"))


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_the_mysql_ddl_is_the_go_plugins_verbatim(engine: sa.Engine) -> None:
    """The reference text itself (comments, ``USING BTREE``, table options) is adopted."""
    assert "USING BTREE" in MYSQL_DDL and "COMMENT='工作流存储'" in MYSQL_DDL
    create_go_tables(engine)
    upgrade(engine)
    assert current(engine) == HEAD


def _schema(engine: sa.Engine) -> dict[str, Any]:
    """Every table with its columns and index names: what a refused run must leave as it was."""
    inspector = sa.inspect(engine)
    return {
        table: (
            [column["name"] for column in inspector.get_columns(table)],
            sorted(str(ix["name"]) for ix in inspector.get_indexes(table)),
        )
        for table in sorted(inspector.get_table_names())
    }


def test_a_leftover_open_task_table_beside_go_tables_is_refused_before_anything_changes(
    engine: sa.Engine,
) -> None:
    """The Go side re-created its two tables while the open-task table of an earlier upgrade
    stayed (migrations.md, "Next to the Go plugin"). flow0004 would add its columns and then
    fail on that table — on MySQL/MariaDB for good, the columns staying — so the run refuses
    the database before its first statement."""
    create_go_tables(engine)
    FlowTables().todo.create(engine)
    before = _schema(engine)
    for run in (upgrade, current):
        with pytest.raises(SchemaMismatchError) as caught:
            run(engine)
        assert caught.value.differences == (
            ColumnDifference(table="bpm_flow_todo", column=None, kind="leftover table"),
        )
        message = str(caught.value)
        assert "bpm_flow_todo" in message and "flow reindex" in message
        assert "Nothing was changed" in message and "alembic stamp" not in message
    assert _schema(engine) == before  # no column added, no version table
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE bpm_flow_todo")
    upgrade(engine)  # what the error says to do
    assert current(engine) == HEAD


def test_a_leftover_open_task_table_beside_recorded_tables_stops_flow0004_before_it_starts(
    engine: sa.Engine,
) -> None:
    """The same leftover beside tables a version table records below flow0004 (a recovery
    recipe of migrations.md run without dropping it first): flow0004 refuses before its first
    statement, no column of it added; the run's record rolls back to where it started
    (flow0003, applied on MySQL/MariaDB already, runs again harmlessly), and the upgrade goes
    on once the table is dropped."""
    upgrade(engine, "flow0002")
    FlowTables().todo.create(engine)
    with pytest.raises(SchemaMismatchError) as caught:
        upgrade(engine)
    assert caught.value.differences == (
        ColumnDifference(table="bpm_flow_todo", column=None, kind="leftover table"),
    )
    assert current(engine) == "flow0002"
    assert "graph_id" not in {
        c["name"] for c in sa.inspect(engine).get_columns("bpm_flow_repository")
    }
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE bpm_flow_todo")
    upgrade(engine)
    assert current(engine) == HEAD


def test_head_tables_missing_an_index_are_told_the_index_not_the_leftover(
    engine: sa.Engine,
) -> None:
    """Head's tables whose version table was lost and one optional index with it: the
    error names the missing index against head — not the leftover table (dropping it would
    lose the task index and fix nothing), not flow0001's columns (stamping flow0001 would run
    flow0002 again on an index that exists)."""
    upgrade(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE flow_alembic_version")
        task = FlowTables().task
        next(ix for ix in task.indexes if ix.name == "ix_bpm_flow_task_assignee").drop(conn)
    with pytest.raises(SchemaMismatchError) as caught:
        upgrade(engine)
    assert [(d.kind, d.expected) for d in caught.value.differences] == [
        ("missing index", "ix_bpm_flow_task_assignee")
    ]
    assert caught.value.revision == HEAD and "Drop bpm_flow_todo" not in str(caught.value)


# -- our tables whose version table is gone ------------------------------------------------------


@pytest.mark.parametrize("revision", ["flow0002", "flow0003", "flow0004"])
def test_tables_without_their_version_table_are_found_at_their_revision(
    engine: sa.Engine, revision: str
) -> None:
    """Our tables whose version table was dropped (or made by an older release): current()
    names the revision they are at and upgrade() goes on from there, never re-creating an
    index. flow0003 changes nothing on PostgreSQL/SQLite: tables at flow0002 are at flow0003
    there as much."""
    upgrade(engine, revision)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE flow_alembic_version")
    same_tables = revision == "flow0002" and backend(engine) != "mysql"
    assert current(engine) == ("flow0003" if same_tables else revision)
    assert _versions(engine, "flow_alembic_version") is None  # current() reads only
    upgrade(engine)
    assert _versions(engine, "flow_alembic_version") == [HEAD]
    assert current(engine) == HEAD


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
def test_an_interrupted_exact_id_revision_is_found_at_the_one_before(engine: sa.Engine) -> None:
    """flow0003 rebuilt the repository table and stopped before the history table (MySQL DDL
    is not transactional): the tables are at flow0002, and flow0003 runs again harmlessly."""
    upgrade(engine, "flow0003")
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE flow_alembic_version")
        conn.exec_driver_sql(
            "ALTER TABLE bpm_flow_task MODIFY assignee VARCHAR(64) "
            "COLLATE utf8mb4_unicode_ci NOT NULL"
        )
    assert current(engine) == "flow0002"
    upgrade(engine)
    assert current(engine) == HEAD


def test_one_index_of_the_two_fits_no_revision(engine: sa.Engine) -> None:
    """An interrupted flow0002 left one of its indexes: neither flow0001 (whose upgrade would
    fail on it) nor flow0002; refused, naming the missing index, with nothing written."""
    upgrade(engine, "flow0002")
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE flow_alembic_version")
    with engine.connect() as conn:
        task = sa.Table("bpm_flow_task", sa.MetaData(), sa.Column("assignee"))
        conn.execute(sa.schema.DropIndex(sa.Index("ix_bpm_flow_task_assignee", task.c.assignee)))
        conn.commit()
    with pytest.raises(SchemaMismatchError) as caught:
        upgrade(engine)
    assert caught.value.revision == "flow0002"
    assert caught.value.differences == (
        ColumnDifference(
            table="bpm_flow_task",
            column=None,
            kind="missing index",
            expected="ix_bpm_flow_task_assignee",
        ),
    )
    assert "ix_bpm_flow_task_assignee" in str(caught.value)
    assert _versions(engine, "flow_alembic_version") is None


# -- recipe B: our revisions in the host application's alembic_version -------------------------


def _recipe_b(engine: sa.Engine) -> None:
    """Tables at flow0001 recorded in ``alembic_version`` next to the host's own revision."""
    upgrade(engine, "flow0001", version_table="alembic_version")
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO alembic_version (version_num) VALUES ('host0001')"))


def test_recipe_b_revisions_are_upgraded_in_the_hosts_version_table(engine: sa.Engine) -> None:
    _recipe_b(engine)
    assert current(engine) == "flow0001"
    upgrade(engine)
    assert _versions(engine, "alembic_version") == sorted([HEAD, "host0001"])
    assert _versions(engine, "flow_alembic_version") is None
    assert current(engine) == HEAD
    downgrade(engine, "flow0001")  # only our row moves
    assert _versions(engine, "alembic_version") == ["flow0001", "host0001"]


def test_recipe_b_after_the_hosts_own_upgrade_is_a_no_op(engine: sa.Engine) -> None:
    _recipe_b(engine)
    upgrade(engine)
    upgrade(engine)
    assert _versions(engine, "alembic_version") == sorted([HEAD, "host0001"])


def test_our_own_version_table_wins_over_the_hosts(engine: sa.Engine) -> None:
    upgrade(engine, "flow0001")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        conn.execute(sa.text("INSERT INTO alembic_version (version_num) VALUES ('flow0002')"))
    assert current(engine) == "flow0001"
    upgrade(engine)
    assert _versions(engine, "flow_alembic_version") == [HEAD]
    assert _versions(engine, "alembic_version") == ["flow0002"]


def test_adopted_tables_equal_the_flow_tables_metadata(engine: sa.Engine) -> None:
    """After adoption the schema is the one ``FlowTables`` describes (no autogenerate diff)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    create_go_tables(engine)
    upgrade(engine)
    tables = FlowTables()
    ours = {tables.repository.name, tables.task.name, tables.todo.name}

    def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
        return type_ != "table" or name in ours

    with engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_name": include_name}
        )
        diffs = [
            d
            for d in compare_metadata(ctx, tables.metadata)
            if not (isinstance(d, list) and d[0][0] == "modify_comment")
            and not (isinstance(d, tuple) and "comment" in d[0])
        ]
    assert diffs == []


def test_the_hosts_record_of_other_tables_does_not_apply_to_new_ones(engine: sa.Engine) -> None:
    """Recipe B recorded the default tables; a second table set is created from scratch."""
    _recipe_b(engine)
    upgrade(engine, repo_table="acme_repo", task_table="acme_task")
    assert _versions(engine, "acme_repo_alembic_version") == [HEAD]
    assert _versions(engine, "alembic_version") == ["flow0001", "host0001"]
    assert current(engine, repo_table="acme_repo", task_table="acme_task") == HEAD


# -- the flow command on a Go database ------------------------------------------------------------


def _flow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLOW_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    script = str(Path(sys.executable).with_name("flow"))
    return subprocess.run([script, *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_flow_instances_shows_a_bare_numeric_graph_id_as_the_id(
    db_url: str, tmp_path: Path
) -> None:
    """The graph column holding only a numeric id, bare (``1001``; SQLite hands it back as
    a number): listed as that id with its graph not stored, not as an unreadable row."""
    engine = sa.create_engine(db_url, poolclass=sa.NullPool)
    try:
        create_go_tables(engine)
        go_state_put(engine, "num-1", {"1001:apply": 1001}, "go")
        graph = json_param(engine, "g")
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    f"UPDATE bpm_flow_repository SET graph = {graph} WHERE instant_id = 'num-1'"
                ),
                {"g": "1001"},
            )
    finally:
        engine.dispose()
    listed = _flow("instances", "--db", db_url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("num-1"))
    assert "1001" in line and "(graph not stored)" in line and "unreadable" not in line


def test_flow_cli_lists_migrates_and_continues_a_go_database(db_url: str, tmp_path: Path) -> None:
    engine = sa.create_engine(db_url, poolclass=sa.NullPool)
    try:
        create_go_tables(engine)
        _go_instance(engine, "go-1")  # graph stored as its id only
        go_state_put(engine, "go-2", GO_STATES, "employee", graph=oa_document(), vars={"amount": 1})
    finally:
        engine.dispose()
    oa = str(ROOT / "examples" / "oa.yml")

    listed = _flow("instances", "--db", db_url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()[2:]}
    assert "oa" in lines["go-1"] and "(graph not stored)" in lines["go-1"]
    assert "manager (Manager approval, for manager)" in lines["go-2"]

    migrated = _flow("migrate", "--db", db_url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr

    no_graph = _flow("claim", "go-1", "--actor", "manager", "--db", db_url, cwd=tmp_path)
    assert no_graph.returncode == 1
    assert "stores only the id of its graph ('oa'); give the graph file with --graph" in (
        no_graph.stderr
    )
    submitted = _flow(
        "submit",
        "go-1",
        "manager",
        "forward",
        "--graph",
        oa,
        "-m",
        "ok",
        "--db",
        db_url,
        cwd=tmp_path,
    )
    assert submitted.returncode == 0, submitted.stderr
    history = _flow("history", "go-1", "--db", db_url, cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert [line.split()[3] for line in history.stdout.splitlines()[2:]] == ["apply", "manager"]


def test_flow_cli_reports_mismatched_tables_in_one_line(db_url: str, tmp_path: Path) -> None:
    engine = sa.create_engine(db_url, poolclass=sa.NullPool)
    try:
        create_go_tables(engine, _altered_ddl(backend(engine)))
    finally:
        engine.dispose()
    for command in (["migrate"], ["instances"]):
        done = _flow(*command, "--db", db_url, cwd=tmp_path)
        assert done.returncode == 1
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("flow: error: The existing flow tables cannot be adopted")
        assert "bpm_flow_task.form_id: type" in line


def test_tables_made_by_create_all_are_stamped_at_head(engine: sa.Engine) -> None:
    """``FlowTables().metadata.create_all()`` has every revision's schema already: the run
    records head instead of re-creating indexes that exist."""
    FlowTables().metadata.create_all(engine)
    assert current(engine) == HEAD
    upgrade(engine)
    assert _versions(engine, "flow_alembic_version") == [HEAD]


def test_tables_made_by_create_all_with_a_named_todo_table_are_stamped_at_head(
    engine: sa.Engine,
) -> None:
    """The todo table's configured name reaches the schema comparison too: the head schema
    was built with the default name, so these tables did not match any revision."""
    names = {"repo_table": "rt_repo", "task_table": "rt_task", "todo_table": "rt_open"}
    FlowTables(**names).metadata.create_all(engine)
    assert current(engine, **names) == HEAD
    upgrade(engine, **names)
    assert _versions(engine, "rt_repo_alembic_version") == [HEAD]


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


def test_a_real_recipe_b_setup_is_recognised_by_flow_migrate_and_alembic(
    db_url: str, tmp_path: Path
) -> None:
    """The host's own env.py ran ``upgrade heads`` up to flow0001; our tools then continue
    in the host's table, and the host's next ``upgrade heads`` has nothing to do."""
    host = tmp_path / "host"
    (host / "alembic" / "versions").mkdir(parents=True)
    (host / "alembic" / "env.py").write_text(_HOST_ENV)
    (host / "alembic" / "versions" / "host0001.py").write_text(_HOST_REVISION)
    (host / "alembic.ini").write_text(
        "[alembic]\n"
        "script_location = %(here)s/alembic\n"
        "version_locations = %(here)s/alembic/versions flow_sqla:migrations/versions\n"
        "path_separator = space\n"
        f"sqlalchemy.url = {db_url.replace('%', '%%')}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOW_")}
    env["PYTHONPATH"] = str(ROOT)
    alembic = str(Path(sys.executable).with_name("alembic"))

    def run(*args: str, cwd: Path) -> None:
        done = subprocess.run([alembic, *args], cwd=cwd, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    run("upgrade", "host0001", cwd=host)
    run("upgrade", "flow0001", cwd=host)
    assert _flow("instances", "--db", db_url, cwd=tmp_path).returncode == 0
    migrated = _flow("migrate", "--db", db_url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    run("-x", f"url={db_url}", "upgrade", "head", cwd=ROOT)  # our env: nothing left to do
    run("upgrade", "heads", cwd=host)  # the host's env: nothing left to do either
    engine = sa.create_engine(db_url, poolclass=sa.NullPool)
    try:
        assert _versions(engine, "alembic_version") == sorted([HEAD, "host0001"])
        assert _versions(engine, "flow_alembic_version") is None
    finally:
        engine.dispose()


@pytest.mark.parametrize("db_url", ["mysql"], indirect=True)
@pytest.mark.parametrize(
    ("other_id", "scheme"), [("inv-7", "mysql"), ("INV-7", "mysql"), ("Inv-7 ", "mariadb")]
)
def test_tables_the_migrations_never_made_exact_refuse_to_merge_two_ids(
    engine: sa.Engine, other_id: str, scheme: str
) -> None:
    """The Go plugin's own DDL compares ids by the server's default collation: before
    'flow migrate', an operation on 'inv-7' found 'Inv-7''s row and wrote into it (with a
    ``mariadb+`` URL too, whose dialect is named "mariadb")."""
    driver = engine.url.drivername.split("+", 1)[1]
    named = sa.create_engine(engine.url.set(drivername=f"{scheme}+{driver}"))
    try:
        _go_row_is_never_merged(named, other_id)
    finally:
        named.dispose()


def _go_row_is_never_merged(engine: sa.Engine, other_id: str) -> None:
    from _support import ctx, executor

    from flow_sqla import IdCollationError

    create_go_tables(engine)
    go_state_put(engine, "Inv-7", {"oa:apply": 1002}, "emp", graph="oa", vars={"amount": 10})
    states = sa.text("SELECT instant_id, states, vars FROM bpm_flow_repository")
    with engine.connect() as conn:
        before = [_snapshot(engine), conn.execute(states).all()]
    ex = executor(engine, index=False)
    with pytest.raises(IdCollationError, match="flow migrate") as raised:
        ex.claim_task("oa", ctx(other_id, "employee", amount=1))
    assert (raised.value.instance_id, raised.value.found) == (other_id, "Inv-7")
    with engine.connect() as conn:
        assert [_snapshot(engine), conn.execute(states).all()] == before
    upgrade(engine)  # exact ids from flow0003 on: a distinct instance
    assert ex.claim_task("oa", ctx(other_id, "employee", amount=1)) is not None
