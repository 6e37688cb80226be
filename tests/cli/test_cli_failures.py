"""What a user sees when a graph or its data is wrong: one line that says where and why,
a non-zero exit code, and nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import REPO, Flow, single_error_line

OA = str(REPO / "examples" / "oa.yml")
PURCHASE = """\
id: purchase
layout:
  - {id: s, type: start, link: ask}
  - {id: ask, meta: {actor: clerk}, link: gw}
  - {id: gw, type: exclusive, link: [{nextId: boss, when: "amount >= 1000"}, done]}
  - {id: boss, meta: {actor: boss}, link: done}
  - {id: done, type: end}
"""
DANGLING = """\
id: dangling
layout:
  - {id: s, type: start, link: a}
  - {id: a, meta: {actor: clerk}, link: nowhere}
  - {id: e, type: end}
"""
FAILING_TASK = """\
id: failing
layout:
  - {id: s, type: start, link: a}
  - {id: a, meta: {actor: clerk}, link: t}
  - {id: t, task: "context.put('x', 1 / 0)", link: e}
  - {id: e, type: end}
"""


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return name


def test_start_refuses_a_graph_that_validate_rejects_and_writes_nothing(
    flow: Flow, migrated: str, tmp_path: Path
) -> None:
    graph = _file(tmp_path, "dangling.yml", DANGLING)
    assert flow("validate", graph).code == 1
    result = flow("start", graph, "--instance", "d-1", "--actor", "clerk", "--db", migrated)
    assert result.code == 1
    line = single_error_line(result)
    assert "link to unknown node 'nowhere'" in line
    assert "flow validate dangling.yml" in line
    assert "d-1" not in flow("instances", "--db", migrated).out


def test_claim_and_submit_with_a_rejected_graph_file_are_refused(
    flow: Flow, migrated: str, tmp_path: Path
) -> None:
    good = _file(tmp_path, "purchase.yml", PURCHASE)
    assert flow("start", good, "--instance", "p-1", "--var", "amount=5", "--db", migrated).code == 0
    bad = _file(tmp_path, "bad.yml", PURCHASE.replace("link: done}", "link: nowhere}"))
    for args in (("claim", "p-1", "--actor", "clerk"), ("submit", "p-1", "ask", "forward")):
        result = flow(*args, "--graph", bad, "--db", migrated)
        assert "link to unknown node 'nowhere'" in single_error_line(result)


def test_failing_condition_names_the_link_and_the_cause_without_debug(
    flow: Flow, migrated: str, tmp_path: Path
) -> None:
    graph = _file(tmp_path, "purchase.yml", PURCHASE)
    started = flow(
        "start", graph, "--instance", "p-2", "--var", "amount=abc", "--actor", "clerk",
        "--db", migrated,
    )  # fmt: skip
    assert started.code == 0, started.err
    result = flow("submit", "p-2", "ask", "forward", "--actor", "clerk", "--db", migrated)
    assert single_error_line(result) == (
        "flow: error: The condition handle failed: purchase / amount >= 1000 "
        "(at link gw -> boss, instance 'p-2', "
        "TypeError: '>=' not supported between instances of 'str' and 'int')"
    )
    standing = flow("instances", "--db", migrated).out
    assert "ask (for clerk)" in standing  # nothing was written: the task still waits


def test_failing_task_shows_its_cause_without_debug(
    flow: Flow, migrated: str, tmp_path: Path
) -> None:
    graph = _file(tmp_path, "failing.yml", FAILING_TASK)
    assert flow("start", graph, "--instance", "f-1", "--actor", "clerk", "--db", migrated).code == 0
    result = flow("submit", "f-1", "a", "forward", "--actor", "clerk", "--db", migrated)
    line = single_error_line(result)
    assert "failing / t" in line
    assert "ZeroDivisionError: division by zero" in line


@pytest.fixture
def pg_url(make_database_url: Callable[[str], str]) -> str:
    return make_database_url("postgresql")


@pytest.mark.live
def test_a_missing_postgresql_schema_is_one_clear_line(flow: Flow, pg_url: str) -> None:
    for command in (("migrate",), ("instances",), ("history", "x")):
        result = flow(*command, "--db", pg_url, env={"FLOW_SCHEMA": "approvals"})
        assert result.code == 1
        line = single_error_line(result)
        assert "schema 'approvals' (FLOW_SCHEMA) does not exist" in line
        assert "CREATE SCHEMA approvals" in line


@pytest.mark.live
def test_the_commands_use_flow_schema_like_alembic(flow: Flow, pg_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE SCHEMA approvals")
        env = {"FLOW_SCHEMA": "approvals"}
        assert flow("migrate", "--db", pg_url, env=env).code == 0
        assert "bpm_flow_repository" in sa.inspect(engine).get_table_names(schema="approvals")
        assert "bpm_flow_repository" not in sa.inspect(engine).get_table_names()
        assert flow("instances", "--db", pg_url, env=env).code == 0
        assert "no flow tables yet" in single_error_line(flow("instances", "--db", pg_url))
    finally:
        engine.dispose()


@pytest.mark.live
def test_a_search_path_without_a_schema_is_explained(flow: Flow, pg_url: str) -> None:
    url = f"{pg_url}?options=-csearch_path%3Dapprovals"
    line = single_error_line(flow("migrate", "--db", url))
    assert "the schema to create the tables in does not exist" in line


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_database_error_inside_an_operation_shows_the_driver_message_not_the_sql(
    flow: Flow, migrated: str
) -> None:
    """The error line of a database failure inside a flow operation carried SQLAlchemy's text
    of its cause: the whole INSERT statement and its bound parameters. It says what the
    driver said, once, and names the instance."""
    started = flow("start", OA, "--instance", "ro-1", "--var", "amount=5", "--db", migrated)
    assert started.code == 0, started.err
    path = migrated.removeprefix("sqlite:///")
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"
    result = flow("withdraw", "ro-1", "--actor", "employee", "--db", read_only)
    assert result.code == 1
    line = single_error_line(result)
    assert "attempt to write a readonly database" in line and "'ro-1'" in line
    assert line.count("readonly database") == 1, line
    assert "[SQL:" not in line and "parameters" not in line and "INSERT" not in line, line
    history = flow("history", "ro-1", "--db", migrated)
    assert history.out.strip() == "ro-1: no task submitted yet"
