"""Rows shared with Go services: the Go plugin's rows are continued, ours parse as Go parses them.

The Go side is emulated in ``_go_plugin`` from go-plugin-rows.md: tables from its ``ddl.sql``,
rows written statement by statement as its repository and recorder write them (graph stored as
an id or as its document, ``vars`` as of the first write with identity keys, ``''`` titles,
NULL ``form_id``/``message``), then read back with Go's strictness (``states`` into
``map[string]int``, every column scanned into the Go type it has there). Each history row we
write is compared, field by field, with the row the Go recorder writes for the same transition.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest
import sqlalchemy as sa
from _go_plugin import (
    GoNode,
    GoParseError,
    GoTaskRow,
    backend,
    create_go_tables,
    go_read_instance,
    go_read_tasks,
    go_record,
    go_state_put,
    go_unmarshal_states,
    json_param,
)

from flow.context import FlowContext
from flow.engine import FlowEngine
from flow.graph import Graph
from flow.workflow import ActorStateController, TaskAction, WorkflowExecutor
from flow_sqla import SqlStateRepository, migrations, sql_workflow

LEAVE = {
    "id": "leave",
    "title": "Leave request",
    "layout": [
        {"id": "start", "type": "start", "link": "apply"},
        {"id": "apply", "title": "Apply", "meta": {"actor": "employee", "formId": 7}},
        {
            "id": "days",
            "type": "exclusive",
            "link": [{"nextId": "hr", "when": "days >= 10"}, {"nextId": "lead"}],
        },
        {"id": "lead", "meta": {"actor": "lead"}, "link": "end"},  # no title, no formId
        {"id": "hr", "title": "HR approval", "meta": {"actor": "hr", "formId": 9}, "link": "end"},
        {"id": "end", "type": "end"},
    ],
}
APPLY = GoNode(id="apply", title="Apply", type="ACTIVITY")
LEAD = GoNode(id="lead", title="", type="ACTIVITY")
HR = GoNode(id="hr", title="HR approval", type="ACTIVITY")
END = GoNode(id="end", title="", type="END")
#: Columns whose values differ between two rows of the same transition by nature.
_OWN = ("id", "flow_ins_id", "create_time")


@pytest.fixture
def graph() -> Graph:
    return Graph.from_dict(LEAVE)


@pytest.fixture
def go_db(engine: sa.Engine) -> sa.Engine:
    """The Go plugin's tables (its DDL, no version table), then ``flow migrate``'s upgrade."""
    create_go_tables(engine)
    return engine


def _executor(db: sa.Engine, graph: Graph) -> WorkflowExecutor:
    engine = FlowEngine()
    engine.load(graph)
    return sql_workflow(db, engine, state_controller=ActorStateController())


def _go_started(db: sa.Engine, instance_id: str, days: int, stored_graph: Any) -> None:
    """What the Go services leave behind: the employee applied, the approver claimed."""
    first_vars = {"actor": "employee", "instanceId": instance_id, "days": days, "note": "trip"}
    go_state_put(
        db, instance_id, {"leave:apply": 1001}, "employee", graph=stored_graph, vars=first_vars
    )
    go_state_put(db, instance_id, {"leave:apply": 1002, "leave:days": 1002}, "employee")
    approver = HR if days >= 10 else LEAD
    go_record(
        db,
        instance_id=instance_id,
        graph_id="leave",
        source=APPLY,
        target=approver,
        assignee="employee",
        status=1002,
        form_id=7,
        variables={"days": days, "note": "trip"},
        message="",
        auditor="employee",
    )
    claimed = {"leave:apply": 1002, "leave:days": 1002, f"leave:{approver.id}": 1001}
    go_state_put(db, instance_id, claimed, approver.id)


def _go_equivalent(db: sa.Engine, ours: GoTaskRow, **record: Any) -> GoTaskRow:
    """The row the Go recorder writes for the same transition, read back the same way."""
    mirror = f"{ours.flow_ins_id}~go"
    go_record(db, instance_id=mirror, graph_id=ours.proc_def_id, **record)
    (row,) = go_read_tasks(db, mirror)
    return row


def _fields(row: GoTaskRow) -> dict[str, Any]:
    return {k: v for k, v in asdict(row).items() if k not in _OWN}


def _forward(ex: WorkflowExecutor, instance_id: str, actor: str, message: str | None) -> None:
    ctx = FlowContext.of(instance_id, {"actor": actor})
    task = ex.claim_task("leave", ctx)
    assert task is not None and task.node.meta.get("actor") == actor
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx, message=message)


def test_a_go_instance_stored_with_a_bare_graph_id_is_continued(
    go_db: sa.Engine, graph: Graph
) -> None:
    _go_started(go_db, "go-1", 3, "leave")  # the graph column holds only the id
    migrations.upgrade(go_db)
    ex = _executor(go_db, graph)
    _forward(ex, "go-1", "lead", message="   ")

    go_row = go_read_instance(go_db, "go-1")
    assert go_row.states["leave:lead"] == 1002
    assert go_row.vars == {"days": 3.0, "note": "trip"}  # actor/instanceId not written back
    assert go_row.graph == "leave"  # never replaced: the first writer's choice stays

    snapshot = ex.state_repository.load_snapshot("go-1")  # type: ignore[attr-defined]
    assert snapshot.graph_id == "leave"
    assert json.loads(snapshot.graph_json) == graph.to_dict()  # resolved through the engine
    bare = SqlStateRepository(go_db).load_snapshot("go-1")
    assert bare is not None and (bare.graph_id, bare.graph_json) == ("leave", None)

    go_written, ours = go_read_tasks(go_db, "go-1")
    assert (go_written.task_id, ours.task_id) == ("apply", "lead")
    expected = _go_equivalent(
        go_db,
        ours,
        source=LEAD,
        target=END,
        assignee="lead",
        status=1002,
        form_id=None,
        variables={"days": 3, "note": "trip"},
        message="   ",
        auditor="lead",
    )
    assert _fields(ours) == _fields(expected)
    assert (ours.source_node_name, ours.target_node_name, ours.form_id, ours.message) == (
        "",
        "",
        None,
        None,
    )
    assert (ours.updater, ours.update_time) == (None, None)


@pytest.mark.parametrize("stored", ["1001", '"1001"', "leave"])
def test_a_graph_column_holding_only_an_id_names_the_graph_whatever_its_spelling(
    go_db: sa.Engine, stored: str
) -> None:
    """A numeric id stored bare (``1001`` is valid JSON: every dialect takes it) or quoted,
    and on SQLite any bare text, is the graph's id — never a document."""
    graph_id = stored.strip('"')
    if graph_id == "leave" and backend(go_db) != "sqlite":
        pytest.skip(f"{backend(go_db)} stores only valid JSON in the graph column")
    graph = Graph.from_dict({**LEAVE, "id": graph_id})
    insert = sa.text(
        "INSERT INTO bpm_flow_repository (instant_id, graph, states, creator, create_time,"
        f" updater, update_time) VALUES ('n-1', {json_param(go_db, 'g')},"
        f" {json_param(go_db, 's')}, 'go', CURRENT_TIMESTAMP, 'go', CURRENT_TIMESTAMP)"
    )
    with go_db.begin() as conn:
        conn.execute(insert, {"g": stored, "s": json.dumps({f"{graph_id}:apply": 1001})})
    migrations.upgrade(go_db)
    ex = _executor(go_db, graph)

    snapshot = ex.state_repository.load_snapshot("n-1")  # type: ignore[attr-defined]
    assert snapshot.graph_id == graph_id
    assert json.loads(snapshot.graph_json) == graph.to_dict()
    bare = SqlStateRepository(go_db).load_snapshot("n-1")
    assert bare is not None and (bare.graph_id, bare.graph_json) == (graph_id, None)
    task = ex.claim_task(graph_id, FlowContext.of("n-1", {"actor": "employee"}))
    assert task is not None and task.node.id == "apply"


def test_a_go_instance_stored_with_its_graph_document_is_continued(
    go_db: sa.Engine, graph: Graph
) -> None:
    _go_started(go_db, "go-2", 12, graph.to_dict())
    migrations.upgrade(go_db)
    ex = _executor(go_db, graph)
    _forward(ex, "go-2", "hr", message="Approved <10 days> & signed")

    go_row = go_read_instance(go_db, "go-2")
    assert go_row.states["leave:hr"] == 1002 and "leave:lead" not in go_row.states
    assert go_row.vars == {"days": 12.0, "note": "trip"}
    assert go_row.graph == graph.to_dict()
    snapshot = SqlStateRepository(go_db).load_snapshot("go-2")
    assert snapshot is not None and snapshot.graph_id == "leave"
    assert json.loads(snapshot.graph_json or "") == graph.to_dict()

    ours = go_read_tasks(go_db, "go-2")[-1]
    expected = _go_equivalent(
        go_db,
        ours,
        source=HR,
        target=END,
        assignee="hr",
        status=1002,
        form_id=9,
        variables={"days": 12, "note": "trip"},
        message="Approved <10 days> & signed",
        auditor="hr",
    )
    assert _fields(ours) == _fields(expected)


def test_an_instance_we_start_reads_in_go_as_the_go_plugin_writes_it(
    go_db: sa.Engine, graph: Graph
) -> None:
    migrations.upgrade(go_db)
    ex = _executor(go_db, graph)
    employee = FlowContext.of("py-1", {"actor": "employee", "days": 2, "note": "dentist"})
    task = ex.claim_task("leave", employee)
    assert task is not None
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, employee, message="")
    lead = FlowContext.of("py-1", {"actor": "lead"})
    task = ex.claim_task("leave", lead)
    assert task is not None
    ex.submit_task(task, TaskAction.BACK, lead, message="which day?")

    go_row = go_read_instance(go_db, "py-1")
    assert go_row.vars == {"days": 2.0, "note": "dentist"}
    assert go_row.graph["id"] == "leave"
    assert [node["id"] for node in go_row.graph["layout"]] == [n["id"] for n in LEAVE["layout"]]
    assert all(isinstance(node["type"], str) for node in go_row.graph["layout"])
    with go_db.connect() as conn:
        creator, updater = conn.execute(
            sa.text("SELECT creator, updater FROM bpm_flow_repository WHERE instant_id = 'py-1'")
        ).one()
    assert (creator, updater) == ("employee", "lead")

    applied, sent_back = go_read_tasks(go_db, "py-1")
    variables = {"days": 2, "note": "dentist"}
    common = {"variables": variables}
    assert _fields(applied) == _fields(
        _go_equivalent(
            go_db,
            applied,
            source=APPLY,
            target=LEAD,
            assignee="employee",
            status=1002,
            form_id=7,
            message="",
            auditor="employee",
            **common,
        )
    )
    assert sent_back.status == 1001 and sent_back.message == "which day?"
    assert (sent_back.source_node_name, sent_back.target_node_code) == ("", "apply")


def test_restart_leaves_states_go_reads_as_an_empty_map(go_db: sa.Engine, graph: Graph) -> None:
    migrations.upgrade(go_db)
    ex = _executor(go_db, graph)
    _forward(ex, "py-2", "employee", message=None)
    ex.submit_task_at("leave", "apply", TaskAction.RESTART, FlowContext.of("py-2", {"actor": "hr"}))
    go_row = go_read_instance(go_db, "py-2")
    assert all(code in (1001, 1002, 1003) for code in go_row.states.values())
    (restart,) = [row for row in go_read_tasks(go_db, "py-2") if row.status == 0]
    assert restart.assignee == "hr" and restart.form_id == 7


def test_the_go_reader_emulation_is_strict() -> None:
    """The emulated Go parse refuses what Go refuses, so the checks above can fail."""
    assert go_unmarshal_states('{"g:a":1002}') == {"g:a": 1002}
    for bad in ('{"g:a":1002.0}', '{"g:a":"1002"}', '{"g:a":true}', "[1]", None, "{"):
        with pytest.raises(GoParseError):
            go_unmarshal_states(bad)


def test_who_writes_is_an_empty_string_when_the_context_names_nobody(
    go_db: sa.Engine, graph: Graph
) -> None:
    """The Go plugin writes ``auditor(ctx)``, a Go string: never NULL."""
    migrations.upgrade(go_db)
    repo = SqlStateRepository(go_db)
    repo.save_snapshot(FlowContext.of("nobody-1", {"days": 1}), graph)
    snapshot = repo.load_snapshot("nobody-1")
    assert snapshot is not None and (snapshot.creator, snapshot.updater) == ("", "")
