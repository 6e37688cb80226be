"""The SQL state repository and history recorder on a real database, end to end."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import sqlalchemy as sa
from _support import approve, count_rows, ctx, executor, migrate, oa_graph, raw_row

from flow.errors import SnapshotError
from flow.graph import Graph
from flow.workflow import TaskAction, TaskRecord, TaskState
from flow_sqla import FlowTables, SqlStateRepository, TaskHistoryRecorder
from flow_sqla.errors import InvalidArgumentError

APPLIED = {"oa:apply": 1002, "oa:amount": 1002}
CLAIMED = {**APPLIED, "oa:manager": 1001}


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def test_oa_flow_stores_integer_state_codes_in_the_row(db: sa.Engine) -> None:
    ex = executor(db)
    assert approve(ex, "oa-1", "employee", amount=100)
    assert raw_row(db, "oa-1")["states"] == APPLIED  # type: ignore[index]
    ex.claim_task("oa", ctx("oa-1", "manager"))
    assert raw_row(db, "oa-1")["states"] == CLAIMED  # type: ignore[index]
    assert approve(ex, "oa-1", "manager")
    assert raw_row(db, "oa-1")["states"] == {**APPLIED, "oa:manager": 1002}  # type: ignore[index]
    assert ex.claim_task("oa", ctx("oa-1", "manager")) is None


def test_row_stores_the_graph_and_the_variables_but_not_the_actor(db: sa.Engine) -> None:
    approve(executor(db), "oa-2", "employee", amount=100, title="Trip")
    row = raw_row(db, "oa-2")
    assert row is not None
    assert row["vars"] == {"amount": 100, "title": "Trip"}
    assert Graph.from_dict(row["graph"]).id == "oa"


def test_every_instance_stores_the_graph_as_a_json_object_the_database_can_query(
    db: sa.Engine,
) -> None:
    # The graph's JSON text is encoded once per graph and bound as it is: the database must
    # still see an object (not a JSON string holding the text), for each instance.
    ex = executor(db)
    for instance_id in ("graph-1", "graph-2"):
        approve(ex, instance_id, "employee", amount=100)
    table = FlowTables().repository
    query = (
        sa.select(table.c.graph["id"].as_string(), table.c.graph["title"].as_string())
        .where(table.c.instant_id.in_(["graph-1", "graph-2"]))
        .order_by(table.c.instant_id)
    )
    with db.connect() as conn:
        stored = [tuple(row) for row in conn.execute(query)]
    assert stored == [("oa", oa_graph().title)] * 2


def test_rows_written_by_the_go_plugin_are_continued(db: sa.Engine) -> None:
    insert = sa.text(
        "INSERT INTO bpm_flow_repository (instant_id, graph, states, vars, creator) "
        "VALUES (:i, :g, :s, :v, 'go')"
    ).bindparams(
        sa.bindparam("g", type_=sa.JSON),
        sa.bindparam("s", type_=sa.JSON),
        sa.bindparam("v", type_=sa.JSON),
    )
    with db.begin() as conn:
        conn.execute(
            insert,
            {
                "i": "go-1",
                "g": json.loads(oa_graph().to_json()),
                "s": CLAIMED,
                "v": {"amount": 100, "actor": "employee"},
            },
        )
    assert approve(executor(db), "go-1", "manager")
    row = raw_row(db, "go-1")
    assert row is not None
    assert row["states"] == {**APPLIED, "oa:manager": 1002}
    assert row["vars"] == {"amount": 100}  # the Go row's identity key is not written back


def test_a_new_repository_resumes_an_instance_from_its_row(db: sa.Engine) -> None:
    approve(executor(db), "resume-1", "employee", amount=7000)
    fresh = executor(db.url.render_as_string(hide_password=False))
    try:
        restored = fresh.state_repository.restore_context("resume-1")  # type: ignore[attr-defined]
        assert restored.get("amount") == 7000
        restored.put("actor", "director")
        task = fresh.claim_task("oa", restored)
        assert task is not None and task.node_id == "director"
        assert fresh.submit_task_if_waiting(task, TaskAction.FORWARD, restored)
    finally:
        fresh.state_repository.engine.dispose()  # type: ignore[attr-defined]
    assert raw_row(db, "resume-1")["states"]["oa:director"] == 1002  # type: ignore[index]


def test_restore_context_of_an_unknown_instance_raises_snapshot_error(db: sa.Engine) -> None:
    repo = SqlStateRepository(db)
    with pytest.raises(SnapshotError, match="nope"):
        repo.restore_context("nope")


def test_history_has_one_row_per_action(db: sa.Engine) -> None:
    ex = executor(db)
    employee, manager = ctx("h-1", "employee", amount=10), ctx("h-1", "manager")
    task = ex.claim_task("oa", employee)
    ex.submit_task(task, TaskAction.FORWARD, employee, message="please")  # type: ignore[arg-type]
    task = ex.claim_task("oa", manager)
    ex.submit_task(task, TaskAction.BACK, manager, message="fix it")  # type: ignore[arg-type]
    ex.submit_task_at("oa", "manager", TaskAction.FORWARD_JUMP, employee)
    ex.submit_task_at("oa", "manager", TaskAction.TERMINATE, manager)
    ex.submit_task_at("oa", "apply", TaskAction.RESTART, manager)
    entries = TaskHistoryRecorder(db).history("h-1")
    assert [(e.task_id, e.status) for e in entries] == [
        ("apply", TaskState.COMPLETED),
        ("manager", TaskState.WAITING),
        ("manager", TaskState.COMPLETED),
        ("manager", TaskState.TERMINATED),
        ("apply", TaskState.UNKNOWN),
    ]
    first = entries[0]
    assert (first.source_node_type, first.target_node_id, first.target_node_type) == (
        "ACTIVITY",
        "manager",
        "ACTIVITY",
    )
    assert (first.assignee, first.message, first.form_id) == ("employee", "please", 1001)
    assert first.variables == {"amount": 10}  # identity keys filtered, as the Go plugin does
    assert raw_row(db, "h-1")["states"] == {}  # type: ignore[index]


def test_history_by_assignee_pages_newest_first(db: sa.Engine) -> None:
    ex = executor(db)
    for i in range(5):
        approve(ex, f"p-{i}", "employee", amount=1)
    recorder = TaskHistoryRecorder(db)
    first = recorder.by_assignee("employee", limit=3)
    second = recorder.by_assignee("employee", limit=3, before_id=first[-1].id)
    assert [e.instance_id for e in first + second] == [f"p-{i}" for i in range(4, -1, -1)]


def test_history_reads_on_the_callers_connection(db: sa.Engine) -> None:
    """It sees the caller's uncommitted step and takes no second pooled connection while the
    caller holds one (a request that did waited for others' connections under load)."""
    ex = executor(db)
    recorder = TaskHistoryRecorder(db)
    checked_out: list[int] = []
    sa.event.listen(db.pool, "checkout", lambda *args: checked_out.append(1))
    with db.begin() as conn:
        c = ctx("c-1", "employee", conn, amount=1)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        checked_out.clear()
        assert [e.instance_id for e in recorder.history("c-1", connection=conn)] == ["c-1"]
        assert [e.instance_id for e in recorder.by_assignee("employee", connection=conn)] == ["c-1"]
        assert checked_out == []
        conn.rollback()
    assert recorder.history("c-1") == [] and recorder.by_assignee("employee") == []


def test_history_refuses_a_connection_that_is_not_one(db: sa.Engine) -> None:
    recorder = TaskHistoryRecorder(db)
    with pytest.raises(InvalidArgumentError, match="connection"):
        recorder.history("c-1", connection=db)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="connection"):
        recorder.by_assignee("employee", connection="conn")  # type: ignore[arg-type]


def test_snapshot_round_trip_replaces_vars_whole(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "s-1", "employee", amount=10, note="old")
    repo: SqlStateRepository = ex.state_repository  # type: ignore[assignment]
    repo.save_snapshot(ctx("s-1", "employee", amount=20), oa_graph())
    snap = repo.load_snapshot("s-1")
    assert snap is not None
    assert snap.vars == {"amount": 20}
    assert snap.states == {k: TaskState(v) for k, v in APPLIED.items()}
    assert Graph.from_text(snap.graph_json or "").id == "oa"
    assert (snap.creator, snap.updater) == ("employee", "employee")
    assert snap.create_time is not None and snap.update_time is not None
    assert repo.load_snapshot("missing") is None


def test_history_rows_belong_to_their_instance_only(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "a-1", "employee", amount=1)
    approve(ex, "a-2", "employee", amount=1)
    assert count_rows(db, "bpm_flow_task", "a-1") == 1
    assert len(TaskHistoryRecorder(db).history("a-2")) == 1


@pytest.mark.parametrize(
    "created_at",
    [
        dt.datetime(2026, 3, 4, 12, 30, 15, 999999, tzinfo=dt.UTC),
        dt.datetime(2026, 3, 4, 14, 30, 15, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        dt.datetime(2026, 3, 4, 12, 30, 15),
    ],
    ids=["utc", "utc+2", "naive"],
)
def test_history_stores_the_creation_time_as_naive_utc_seconds(
    db: sa.Engine, created_at: dt.datetime
) -> None:
    graph = oa_graph()
    record = TaskRecord(
        instance_id="t-1",
        graph_id="oa",
        task_id="apply",
        source=graph.get_node_or_throw("apply"),
        target=graph.get_node_or_throw("manager"),
        action=TaskAction.FORWARD,
        state=TaskState.COMPLETED,
        assignee="employee",
        message=None,
        form_id=1001,
        variables={},
        created_at=created_at,
    )
    recorder = TaskHistoryRecorder(db)
    recorder.record(ctx("t-1", "employee"), record)
    (entry,) = recorder.history("t-1")
    assert entry.created_at == dt.datetime(2026, 3, 4, 12, 30, 15)


def test_history_pages_refuse_ids_and_sizes_past_64_bits(db: sa.Engine) -> None:
    recorder = TaskHistoryRecorder(db)
    for page in ({"before_id": 2**63}, {"before_id": -(2**63) - 1}, {"limit": 10**30}):
        with pytest.raises(InvalidArgumentError):
            recorder.by_assignee("employee", **page)
    with pytest.raises(InvalidArgumentError):
        recorder.history("h-1", after_id=10**23)
    assert recorder.by_assignee("employee", before_id=2**63 - 1) == []


def test_history_entries_carry_the_action_that_wrote_them(db: sa.Engine) -> None:
    """BACK and BACK_JUMP both leave a WAITING/UNKNOWN state: the ``action`` column (written
    with the task index) tells them apart; rows written without it read ``None``."""
    plain = executor(db, index=False)
    approve(plain, "a-0", "employee", amount=1)
    ex = executor(db, index=True)
    approve(ex, "a-1", "employee", amount=1)
    manager = ctx("a-1", "manager")
    ex.submit_task_at("oa", "apply", TaskAction.BACK_JUMP, manager)
    ex.withdraw("oa", ctx("a-1", "employee"))
    recorder = ex.recorder
    assert isinstance(recorder, TaskHistoryRecorder)
    assert [e.action for e in recorder.history("a-1")] == [
        TaskAction.FORWARD,
        TaskAction.BACK_JUMP,
        TaskAction.TERMINATE,
    ]
    assert [e.action for e in recorder.history("a-0")] == [None]
    assert [e.action for e in TaskHistoryRecorder(db).history("a-1")] == [None] * 3
