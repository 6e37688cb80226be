"""Values the tables cannot hold fail with the library's typed errors, the same on every
backend, before anything is written: ids longer than their ``VARCHAR(64)`` columns, messages
longer than MySQL's ``TEXT``, lone surrogates, and corrupt or too deeply nested stored JSON."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from _support import APPLIED_STATES, approve, count_rows, ctx, executor, migrate, raw_row

from flow.engine import FlowEngine
from flow.errors import SnapshotError
from flow.graph import Graph
from flow.workflow import ActorStateController, InvalidInstanceIdError, TaskAction
from flow_sqla import (
    InvalidArgumentError,
    SqlStateRepository,
    TaskHistoryRecorder,
    UnstorableGraphError,
    UnstorableValueError,
    sql_workflow,
)

LONG = "x" * 65
FULL = "y" * 64


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _graph(graph_id: str = "g", node_id: str = "review") -> Graph:
    return Graph.from_dict(
        {
            "id": graph_id,
            "layout": [
                {"id": "s", "type": "start", "link": node_id},
                {"id": node_id, "meta": {"actor": "boss"}, "link": "e"},
                {"id": "e", "type": "end"},
            ],
        }
    )


def _workflow(db: sa.Engine, graph: Graph) -> Any:
    engine = FlowEngine()
    engine.load(graph)
    return sql_workflow(db, engine, state_controller=ActorStateController())


def _approve(ex: Any, graph: Graph, instance_id: str, **data: Any) -> bool:
    c = ctx(instance_id, "boss", **data)
    return bool(ex.submit_task_if_waiting(ex.claim_task(graph, c), TaskAction.FORWARD, c))


# -- ids too long for their columns -----------------------------------------------------------
@pytest.mark.parametrize(
    ("graph_id", "node_id", "named"),
    [("g", LONG, "node id"), (LONG, "review", "graph id")],
    ids=["node-id", "graph-id"],
)
def test_a_graph_whose_ids_do_not_fit_is_rejected_before_anything_is_written(
    db: sa.Engine, graph_id: str, node_id: str, named: str
) -> None:
    graph = _graph(graph_id, node_id)
    assert graph.validate() == [] or all(p.level != "error" for p in graph.validate())
    ex = _workflow(db, graph)
    with pytest.raises(UnstorableGraphError) as caught:
        ex.claim_task(graph, ctx("long-1", "boss"))
    assert caught.value.graph_id == graph_id
    assert any(named in p and "65 characters" in p for p in caught.value.problems)
    assert count_rows(db, "bpm_flow_repository") == 0
    with pytest.raises(UnstorableGraphError):
        ex.submit_task_at(graph, node_id, TaskAction.FORWARD, ctx("long-1", "boss"))
    assert count_rows(db, "bpm_flow_task") == 0


@pytest.mark.parametrize("form_id", [2**63, -(2**63) - 1, "99999999999999999999999"])
def test_a_form_id_past_the_bigint_column_is_rejected_before_anything_is_written(
    db: sa.Engine, form_id: object
) -> None:
    """Every submit of that node would fail (the history's ``form_id`` is a ``BIGINT``),
    leaving the instance at a task nobody can pass: the graph is refused at its first use."""
    graph = Graph.from_dict(
        {
            "id": "forms",
            "layout": [
                {"id": "start", "type": "start", "link": "review"},
                {"id": "review", "meta": {"actor": "boss", "formId": form_id}, "link": "end"},
                {"id": "end", "type": "end"},
            ],
        }
    )
    ex = _workflow(db, graph)
    with pytest.raises(UnstorableGraphError) as caught:
        ex.claim_task(graph, ctx("form-1", "boss"))
    assert any("formId of node 'review'" in p for p in caught.value.problems)
    assert count_rows(db, "bpm_flow_repository") == 0


def test_ids_of_exactly_64_characters_work_on_every_backend(db: sa.Engine) -> None:
    graph = _graph(FULL, "n" * 64)
    ex = _workflow(db, graph)
    assert _approve(ex, graph, "i" * 64, note="ok")
    (entry,) = TaskHistoryRecorder(db).history("i" * 64)
    assert (entry.graph_id, entry.task_id, entry.assignee) == (FULL, "n" * 64, "boss")


@pytest.mark.parametrize(
    ("instance_id", "actor", "field"),
    [
        (LONG, "employee", "instance id"),
        ("long-2", "e" * 65, "auditor"),
    ],
    ids=["instance-id", "actor"],
)
def test_an_instance_id_or_actor_longer_than_its_column_is_rejected(
    db: sa.Engine, instance_id: str, actor: str, field: str
) -> None:
    ex = executor(db)
    with pytest.raises(UnstorableValueError) as caught:
        ex.claim_task("oa", ctx(instance_id, actor, amount=1))
    assert caught.value.field == field and "65 characters" in str(caught.value)
    assert count_rows(db, "bpm_flow_repository") == 0


def test_an_assignee_longer_than_its_column_fails_the_submit_and_keeps_nothing(
    db: sa.Engine,
) -> None:
    ex = executor(db)
    c = ctx("long-3", "employee", amount=1, auditor="clerk")
    task = ex.claim_task("oa", c)
    c.put("actor", "e" * 65)
    with pytest.raises(UnstorableValueError, match="assignee"):
        ex.submit_task(task, TaskAction.FORWARD, c)  # type: ignore[arg-type]
    assert count_rows(db, "bpm_flow_task") == 0
    assert raw_row(db, "long-3")["states"] == {"oa:apply": 1001}  # type: ignore[index]


def test_a_message_over_65535_utf8_bytes_is_rejected_on_every_backend(db: sa.Engine) -> None:
    ex = executor(db)
    ex.claim_task("oa", ctx("msg-1", "employee", amount=1))
    c = ctx("msg-1", "employee", amount=1)
    task = ex.claim_task("oa", c)
    too_long = "€" * 21_846  # 65,538 bytes in 21,846 characters
    with pytest.raises(UnstorableValueError, match="65538 UTF-8 bytes") as caught:
        ex.submit_task_if_waiting(task, TaskAction.FORWARD, c, message=too_long)
    assert caught.value.instance_id == "msg-1"
    assert count_rows(db, "bpm_flow_task") == 0
    fits = "a" * 65_535
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c, message=fits)
    assert TaskHistoryRecorder(db).history("msg-1")[0].message == fits


# -- empty and blank instance ids -------------------------------------------------------------
@pytest.mark.parametrize("instance_id", ["", " ", "\t\n"])
def test_an_empty_or_blank_instance_id_is_rejected(db: sa.Engine, instance_id: str) -> None:
    ex = executor(db)
    with pytest.raises(InvalidInstanceIdError):
        ex.claim_task("oa", ctx(instance_id, "employee"))
    repo = SqlStateRepository(db)
    with pytest.raises(InvalidInstanceIdError):
        repo.save_snapshot(ctx(instance_id, "employee"), ex.engine.get_graph_or_throw("oa"))
    assert count_rows(db, "bpm_flow_repository") == 0


# -- lone surrogates --------------------------------------------------------------------------
SURROGATE = "a\ud800b"


def test_a_lone_surrogate_in_an_instance_id_is_a_typed_error(db: sa.Engine) -> None:
    ex = executor(db)
    with pytest.raises(UnstorableValueError, match="surrogate") as caught:
        ex.claim_task("oa", ctx(SURROGATE, "employee"))
    assert caught.value.field == "instance id"
    repo, history = SqlStateRepository(db), TaskHistoryRecorder(db)
    for read in (repo.states, repo.load_snapshot, repo.restore_context, history.history):
        with pytest.raises(UnstorableValueError, match="surrogate"):
            read(SURROGATE)
    with pytest.raises(UnstorableValueError, match="surrogate"):
        history.by_assignee(SURROGATE)


@pytest.mark.parametrize("where", ["actor", "auditor", "message"])
def test_a_lone_surrogate_in_an_actor_auditor_or_message_is_a_typed_error(
    db: sa.Engine, where: str
) -> None:
    ex = executor(db)
    assert approve(ex, "sur-1", "employee", amount=1)
    c = ctx("sur-1", "manager")
    task = ex.claim_task("oa", c)
    message = None
    if where == "message":
        message = SURROGATE
    else:
        c.put(where, SURROGATE)
    with pytest.raises(UnstorableValueError, match="surrogate") as caught:
        ex.submit_task(task, TaskAction.FORWARD, c, message=message)  # type: ignore[arg-type]
    assert caught.value.instance_id == "sur-1"
    assert count_rows(db, "bpm_flow_task", "sur-1") == 1  # only the employee's
    assert raw_row(db, "sur-1")["states"] == {**APPLIED_STATES, "oa:manager": 1001}  # type: ignore[index]


# -- corrupt stored JSON ----------------------------------------------------------------------
DEEP = "[" * 5000 + "]" * 5000


def _can_store(db: sa.Engine, text: str) -> bool:
    """MySQL/MariaDB refuse invalid and deeply nested JSON themselves (CHECK json_valid);
    PostgreSQL refuses invalid JSON; SQLite stores anything."""
    name = db.dialect.name
    return name == "sqlite" or (name == "postgresql" and text == DEEP)


def _corrupt_task_row(db: sa.Engine, instance_id: str, text: str) -> None:
    with db.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO bpm_flow_task (flow_ins_id, proc_def_id, task_id, source_node_code,"
                " source_node_type, target_node_code, target_node_name, target_node_type,"
                " assignee, variables) VALUES (:i, 'oa', 'manager', 'manager', 'ACTIVITY',"
                " 'end', 'End', 'END', 'manager', :v)"
            ),
            {"i": instance_id, "v": text},
        )


@pytest.mark.parametrize("text", ["{not json", DEEP, "[1, 2]", '"just text"'])
def test_one_corrupt_history_row_is_marked_and_the_page_still_reads(
    db: sa.Engine, text: str
) -> None:
    if text in ("{not json", DEEP) and not _can_store(db, text):
        pytest.skip(f"{db.dialect.name} refuses to store this JSON")
    ex = executor(db)
    assert approve(ex, "bad-h", "employee", amount=1)
    _corrupt_task_row(db, "bad-h", text)
    assert approve(ex, "bad-h", "manager")
    history = TaskHistoryRecorder(db)
    entries = history.history("bad-h")
    assert [e.problem is None for e in entries] == [True, False, True]
    assert entries[1].variables == {} and "variables unreadable" in (entries[1].problem or "")
    assert entries[0].variables["amount"] == 1
    assert [e.id for e in history.by_assignee("manager")] == [entries[2].id, entries[1].id]


#: Values a history row can hold that no driver reads, by dialect: the column and its SQL.
_UNREADABLE_HISTORY = {
    ("sqlite", "variables not utf-8"): ("variables", "X'FFFE'"),
    ("sqlite", "create_time text"): ("create_time", "'garbage'"),
    ("postgresql", "create_time infinity"): ("create_time", "'infinity'"),
    ("postgresql", "create_time bc"): ("create_time", "'0044-03-15 BC'"),
}


@pytest.mark.parametrize(
    "damage",
    ["variables not utf-8", "create_time text", "create_time infinity", "create_time bc"],
)
def test_a_history_row_no_driver_reads_is_marked_and_the_page_still_reads(
    db: sa.Engine, damage: str
) -> None:
    """Bytes that are not UTF-8 in SQLite's variables (sqlite3 failed the fetch: a
    RepositoryError) and a create_time that is no time (a SnapshotError) broke every page
    holding the row; now it comes back marked, its unreadable field empty."""
    found = _UNREADABLE_HISTORY.get((db.dialect.name, damage))
    if found is None:
        pytest.skip(f"{db.dialect.name} cannot hold {damage}")
    column, literal = found
    ex = executor(db)
    assert approve(ex, "odd-h", "employee", amount=1)
    _corrupt_task_row(db, "odd-h", '{"n": 1}')
    assert approve(ex, "odd-h", "manager")
    history = TaskHistoryRecorder(db)
    odd = history.history("odd-h")[1].id
    with db.begin() as conn:
        conn.execute(sa.text(f"UPDATE bpm_flow_task SET {column} = {literal} WHERE id = {odd}"))
    entries = history.history("odd-h")
    assert [e.problem is None for e in entries] == [True, False, True]
    assert f"{column} unreadable" in (entries[1].problem or "")
    assert (entries[1].id, entries[1].assignee, entries[1].target_node_id) == (
        odd,
        "manager",
        "end",
    )
    if column == "variables":
        assert entries[1].variables == {}
    else:
        assert entries[1].created_at is None and entries[1].variables == {"n": 1}
    assert entries[0].variables["amount"] == 1 and entries[0].created_at is not None
    assert [e.id for e in history.history("odd-h", limit=2)] == [e.id for e in entries[:2]]
    assert [e.id for e in history.by_assignee("manager")] == [entries[2].id, odd]


def test_a_deeply_nested_states_column_is_a_snapshot_error_for_that_instance_only(
    db: sa.Engine,
) -> None:
    if not _can_store(db, DEEP):
        pytest.skip(f"{db.dialect.name} refuses to store this JSON")
    ex = executor(db)
    assert approve(ex, "deep-1", "employee", amount=1)
    assert approve(ex, "fine-1", "employee", amount=1)
    with db.begin() as conn:
        conn.execute(
            sa.text("UPDATE bpm_flow_repository SET states = :s WHERE instant_id = 'deep-1'"),
            {"s": DEEP},
        )
    with pytest.raises(SnapshotError) as caught:
        ex.claim_task("oa", ctx("deep-1", "manager"))
    assert caught.value.instance_id == "deep-1"
    with pytest.raises(SnapshotError):
        SqlStateRepository(db).load_snapshot("deep-1")
    assert approve(ex, "fine-1", "manager")


# -- history paging -----------------------------------------------------------------------------
def test_history_pages_by_keyset_oldest_first(db: sa.Engine) -> None:
    ex = executor(db)
    assert approve(ex, "page-1", "employee", amount=1)
    for n in range(5):
        _corrupt_task_row(db, "page-1", f'{{"n": {n}}}')
    history = TaskHistoryRecorder(db)
    everything = history.history("page-1")
    assert len(everything) == 6
    first = history.history("page-1", limit=4)
    second = history.history("page-1", limit=4, after_id=first[-1].id)
    assert [e.id for e in first + second] == [e.id for e in everything]
    assert history.history("page-1", limit=4, after_id=second[-1].id) == []


@pytest.mark.parametrize(
    "kwargs",
    [{"limit": 0}, {"limit": -1}, {"limit": "10"}, {"after_id": "1 OR 1=1"}, {"limit": True}],
)
def test_history_rejects_bad_paging_arguments(db: sa.Engine, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        TaskHistoryRecorder(db).history("page-2", **kwargs)


@pytest.mark.parametrize("limit", [0, 2**63])
def test_a_page_size_out_of_range_names_the_range(db: sa.Engine, limit: int) -> None:
    with pytest.raises(InvalidArgumentError, match=r"from 1 to 2\*\*63 - 1"):
        TaskHistoryRecorder(db).history("page-3", limit=limit)
