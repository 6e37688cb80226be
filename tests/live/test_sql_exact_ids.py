"""Ids compare exactly on every backend: case, accents and trailing spaces make distinct
instances (MySQL/MariaDB's ``utf8mb4_unicode_ci`` would merge them; revision ``flow0003``)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from _support import approve, count_rows, ctx, executor, migrate, raw_row

from flow.errors import SnapshotError
from flow_sqla import TaskHistoryRecorder
from flow_sqla.migrations import downgrade, upgrade

#: Pairs a case-/accent-insensitive or PAD SPACE collation treats as one value.
PAIRS = [
    pytest.param("Ab3xZ", "ab3xz", id="case"),
    pytest.param("café-1", "cafe-1", id="accent"),
    pytest.param("inv-7", "inv-7 ", id="trailing-space"),
    pytest.param("ß-1", "ss-1", id="expansion"),
    pytest.param("x\u00e9", "xe\u0301", id="normalization"),
]
REPO_COLUMNS = {"instant_id"}
TASK_COLUMNS = {
    "flow_ins_id",
    "proc_def_id",
    "task_id",
    "source_node_code",
    "target_node_code",
    "assignee",
}


def _mysql_collations(engine: sa.Engine, table: str) -> dict[str, Any]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT column_name, collation_name FROM information_schema.columns "
                "WHERE table_schema = DATABASE() AND table_name = :t"
            ),
            {"t": table},
        ).all()
    return {name.lower(): collation for name, collation in rows}


def _exact_collation(engine: sa.Engine) -> str:
    return "utf8mb4_nopad_bin" if engine.dialect.is_mariadb else "utf8mb4_0900_bin"  # type: ignore[attr-defined]


def _assert_distinct(engine: sa.Engine, first: str, second: str) -> None:
    ex = executor(engine)
    assert approve(ex, first, "employee", amount=100)
    # The second id starts from nothing: its first task is still the employee's application.
    task = ex.claim_task("oa", ctx(second, "employee", amount=7000))
    assert task is not None and task.node.id == "apply"
    assert approve(ex, second, "employee", amount=7000)
    assert raw_row(engine, first)["vars"] == {"amount": 100}  # type: ignore[index]
    assert raw_row(engine, second)["vars"] == {"amount": 7000}  # type: ignore[index]
    history = TaskHistoryRecorder(engine)
    assert [e.instance_id for e in history.history(first)] == [first]
    assert [e.instance_id for e in history.history(second)] == [second]
    assert count_rows(engine, "bpm_flow_repository") == 2


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_ids_that_differ_only_in_case_accents_or_spaces_are_distinct_instances(
    engine: sa.Engine, first: str, second: str
) -> None:
    _assert_distinct(migrate(engine), first, second)


def test_assignees_that_differ_only_in_case_have_separate_histories(engine: sa.Engine) -> None:
    ex = executor(migrate(engine))
    from flow.context import FlowContext
    from flow.workflow import TaskAction

    for instance_id, actor in (("a-1", "employee"), ("a-2", "Employee")):
        c = FlowContext.of(instance_id, {"actor": "employee", "amount": 1})
        task = ex.claim_task("oa", c)
        assert task is not None
        c.put("actor", actor)
        ex.submit_task(task, TaskAction.FORWARD, c)
    history = TaskHistoryRecorder(engine)
    assert [e.instance_id for e in history.by_assignee("employee")] == ["a-1"]
    assert [e.instance_id for e in history.by_assignee("Employee")] == ["a-2"]


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_reads_of_tables_not_made_exact_never_return_another_instance_s_rows(
    engine: sa.Engine, first: str, second: str
) -> None:
    """Before revision flow0003 (the reference's tables, as the Go plugin creates them:
    ``utf8mb4_unicode_ci`` on MySQL/MariaDB) the collation merges the two ids. A claim of
    ``second`` is refused (IdCollationError); the reads must not hand out ``first``'s row
    and history under ``second``'s id either: for them ``second`` has nothing stored."""
    upgrade(engine, "flow0002")
    ex = executor(engine)
    assert approve(ex, first, "employee", amount=100)
    repository = ex.state_repository
    assert repository.load_snapshot(second) is None
    assert repository.states(second) == {}
    with pytest.raises(SnapshotError, match="No stored instance"):
        repository.restore_context(second)
    history = TaskHistoryRecorder(engine)
    assert history.history(second) == []
    assert [e.instance_id for e in history.history(first)] == [first]
    snapshot = repository.load_snapshot(first)
    assert snapshot is not None and snapshot.instance_id == first


@pytest.mark.parametrize("other", ["Employee", "employee ", "EMPLOYEE"])
def test_assignees_read_from_tables_not_made_exact_are_compared_exactly(
    engine: sa.Engine, other: str
) -> None:
    """Before flow0003 ``by_assignee`` of another spelling returned ``employee``'s rows."""
    upgrade(engine, "flow0002")
    assert approve(executor(engine), "a-1", "employee", amount=1)
    history = TaskHistoryRecorder(engine)
    assert history.by_assignee(other) == []
    assert [e.assignee for e in history.by_assignee("employee")] == ["employee"]


def test_flow0003_fixes_tables_created_with_the_reference_collation(engine: sa.Engine) -> None:
    upgrade(engine, "flow0002")
    ex = executor(engine)
    assert approve(ex, "inv-7", "employee", amount=100)
    upgrade(engine, "flow0003")  # (flow0004 adds exact id columns of its own)
    if engine.dialect.name == "mysql":
        exact = _exact_collation(engine)
        repo = _mysql_collations(engine, "bpm_flow_repository")
        task = _mysql_collations(engine, "bpm_flow_task")
        assert {c for c, v in repo.items() if v == exact} == REPO_COLUMNS
        assert {c for c, v in task.items() if v == exact} == TASK_COLUMNS
        assert task["source_node_name"] == "utf8mb4_unicode_ci"
    # The instance written before the upgrade is found under its exact id only.
    task_ = executor(engine).claim_task("oa", ctx("inv-7 ", "employee"))
    assert task_ is not None and task_.node.id == "apply"
    assert executor(engine).claim_task("oa", ctx("inv-7", "employee")) is None
    assert count_rows(engine, "bpm_flow_task", "inv-7") == 1


def test_flow0003_is_idempotent_and_downgrade_restores_the_table_collation(
    engine: sa.Engine,
) -> None:
    upgrade(engine)
    downgrade(engine, "flow0002")
    if engine.dialect.name == "mysql":
        for table in ("bpm_flow_repository", "bpm_flow_task"):
            collations = _mysql_collations(engine, table)
            assert {c for c in REPO_COLUMNS | TASK_COLUMNS if c in collations} <= {
                c for c, v in collations.items() if v == "utf8mb4_unicode_ci"
            }
    upgrade(engine)
    upgrade(engine)  # already at head: nothing runs, nothing fails
    _assert_distinct(engine, "Ab3xZ", "ab3xz")


def test_create_all_and_the_migrations_give_the_same_id_collations(
    make_database_url: Any,
) -> None:
    from flow_sqla import FlowTables

    migrated = sa.create_engine(make_database_url("mysql"))
    created = sa.create_engine(make_database_url("mysql"))
    try:
        upgrade(migrated)
        FlowTables().metadata.create_all(created)
        for table in ("bpm_flow_repository", "bpm_flow_task"):
            assert _mysql_collations(created, table) == _mysql_collations(migrated, table)
    finally:
        migrated.dispose()
        created.dispose()


@pytest.mark.parametrize("where", ["column", "connection"])
def test_exact_reads_find_non_ascii_ids_whatever_the_character_sets(
    engine: sa.Engine, where: str
) -> None:
    """The exact comparison compares UTF-8 bytes: a ``latin1`` id column (a table made by
    hand) or a ``latin1`` connection still finds ``café-1`` — comparing each side's bytes in
    its own character set found nothing."""
    if engine.dialect.name != "mysql":
        pytest.skip("character sets of MySQL/MariaDB")
    upgrade(engine, "flow0002")
    reader = engine
    if where == "column":
        with engine.begin() as conn:
            for table, column in (
                ("bpm_flow_repository", "instant_id"),
                ("bpm_flow_task", "flow_ins_id"),
            ):
                conn.exec_driver_sql(
                    f"ALTER TABLE {table} MODIFY {column} VARCHAR(64) CHARACTER SET latin1 NOT NULL"
                )
    else:
        reader = sa.create_engine(engine.url.update_query_dict({"charset": "latin1"}))
    assert approve(executor(engine), "café-1", "employee", amount=100)
    repository = executor(reader).state_repository
    snapshot = repository.load_snapshot("café-1")
    assert snapshot is not None and snapshot.instance_id == "café-1"
    assert [e.instance_id for e in TaskHistoryRecorder(reader).history("café-1")] == ["café-1"]
    assert repository.load_snapshot("cafe-1") is None
