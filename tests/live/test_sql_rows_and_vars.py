"""What is stored in ``vars``, how it comes back, and what a malformed row does."""

from __future__ import annotations

import enum
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
import sqlalchemy as sa
from _support import APPLIED_STATES, approve, count_rows, ctx, executor, migrate, raw_row

from flow.context import NonSerializable
from flow.errors import SnapshotError
from flow.workflow import TaskAction
from flow_sqla import SqlStateRepository


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


class Level(enum.Enum):
    HIGH = "high"


class Service(NonSerializable):
    pass


class Opaque:
    pass


def _set_column(db: sa.Engine, instance_id: str, column: str, text: str) -> None:
    with db.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE bpm_flow_repository SET {column} = :v WHERE instant_id = :i"),
            {"v": text, "i": instance_id},
        )


def test_codec_values_round_trip_through_the_vars_column(db: sa.Engine) -> None:
    values = {
        "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "day": date(2026, 1, 2),
        "price": Decimal("12.50"),
        "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "level": Level.HIGH,
    }
    approve(executor(db), "codec-1", "employee", amount=1, **values)
    restored = SqlStateRepository(db).restore_context("codec-1")
    assert {k: restored.get(k) for k in values} == {**values, "level": "high"}


def test_a_variable_missing_from_the_context_is_kept(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "keep-1", "employee", amount=1, note="first")
    approve(ex, "keep-1", "manager")
    assert raw_row(db, "keep-1")["vars"] == {"amount": 1, "note": "first"}  # type: ignore[index]


def test_stored_variables_flow_back_into_a_new_context(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "back-1", "employee", amount=9000)
    c = ctx("back-1", "director")
    task = ex.claim_task("oa", c)
    assert task is not None and task.node_id == "director"
    assert c.get("amount") == 9000


def test_identity_and_opaque_values_are_not_stored(db: sa.Engine) -> None:
    approve(
        executor(db),
        "id-1",
        "employee",
        amount=1,
        auditor="boss",
        creator="hr",
        service=Service(),
        handle=Opaque(),
    )
    assert raw_row(db, "id-1")["vars"] == {"amount": 1}  # type: ignore[index]


@pytest.mark.parametrize("bad", [{1, 2}, b"bytes", float("nan"), {"k": {3}}])
def test_an_unrepresentable_variable_is_rejected_and_nothing_is_written(
    db: sa.Engine, bad: object
) -> None:
    ex = executor(db)
    approve(ex, "bad-1", "employee", amount=1)
    c = ctx("bad-1", "manager", attachment=bad)
    with pytest.raises(SnapshotError, match=r"'attachment'.*'bad-1'"):
        ex.submit_task_if_waiting(
            ex.claim_task("oa", ctx("bad-1", "manager")), TaskAction.FORWARD, c
        )
    assert raw_row(db, "bad-1")["states"] == {**APPLIED_STATES, "oa:manager": 1001}  # type: ignore[index]
    assert count_rows(db, "bpm_flow_task", "bad-1") == 1


def test_malformed_states_raise_snapshot_error_naming_the_instance(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "shape-1", "employee", amount=1)
    _set_column(db, "shape-1", "states", '{"oa:apply": "done"}')
    with pytest.raises(SnapshotError, match="shape-1"):
        ex.claim_task("oa", ctx("shape-1", "manager"))
    assert approve(ex, "shape-2", "employee", amount=1)


def test_states_that_are_not_an_object_raise_snapshot_error(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "shape-3", "employee", amount=1)
    _set_column(db, "shape-3", "states", "[1002]")
    with pytest.raises(SnapshotError, match="shape-3"):
        SqlStateRepository(db).states("shape-3")


def test_unknown_state_codes_read_as_unknown(db: sa.Engine) -> None:
    ex = executor(db)
    approve(ex, "code-1", "employee", amount=1)
    _set_column(db, "code-1", "states", '{"oa:apply": 1002, "oa:amount": 1002, "oa:x": 4242}')
    assert SqlStateRepository(db).states("code-1")["oa:x"] == 0


# Only SQLite can hold invalid JSON: MariaDB has a json_valid CHECK, PostgreSQL a json type.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_invalid_json_raises_snapshot_error_while_other_instances_work(
    db: sa.Engine,
) -> None:
    ex = executor(db)
    approve(ex, "json-1", "employee", amount=1)
    _set_column(db, "json-1", "vars", "{not json")
    with pytest.raises(SnapshotError, match="json-1"):
        ex.claim_task("oa", ctx("json-1", "manager"))
    assert approve(ex, "json-2", "employee", amount=1)


# SQLite keeps the text of a JSON number written into a column declared JSON as a number.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("column", "text"), [("states", "42"), ("vars", "7"), ("states", "4.5")])
def test_a_json_number_in_a_sqlite_column_raises_snapshot_error_naming_the_instance(
    db: sa.Engine, column: str, text: str
) -> None:
    ex = executor(db)
    approve(ex, "num-1", "employee", amount=1)
    _set_column(db, "num-1", column, text)
    with pytest.raises(SnapshotError, match="num-1"):
        ex.claim_task("oa", ctx("num-1", "manager"))
    with pytest.raises(SnapshotError, match="num-1"):
        SqlStateRepository(db).load_snapshot("num-1")
    assert approve(ex, "num-2", "employee", amount=1)


# NaN (.nan) never gets this far: no graph text can hold it, so the graph is refused when it
# loads (tests/unit/test_export.py).
@pytest.mark.parametrize("value", ["!!timestamp 2020-01-01", "!!binary aGk="])
def test_a_graph_whose_meta_json_cannot_hold_is_refused_naming_it(
    db: sa.Engine, value: str
) -> None:
    from flow import FlowContext, FlowEngine, Graph
    from flow.errors import GraphDefinitionError
    from flow.workflow import ActorStateController
    from flow_sqla.wiring import sql_workflow

    graph = Graph.from_text(
        f"""
        id: typed-meta
        layout:
          - {{id: start, type: start, link: apply}}
          - {{id: apply, meta: {{actor: employee, due: {value}}}, link: end}}
          - {{id: end, type: end}}
        """
    )
    wf = sql_workflow(db, FlowEngine(), state_controller=ActorStateController())
    with pytest.raises(GraphDefinitionError, match="'typed-meta'"):
        wf.claim_task(graph, FlowContext.of("tm-1", {"actor": "employee"}))
    assert count_rows(db, "bpm_flow_repository", "tm-1") == 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_graph_document_that_aliases_expand_past_the_limit_is_refused(db: sa.Engine) -> None:
    """About 130 KB of YAML that repeats one long list through an alias (under the loader's
    value limit: its ids are short) would store some 40 MB of JSON with every instance."""
    from flow import FlowContext, FlowEngine, Graph
    from flow.errors import GraphDefinitionError
    from flow.workflow import ActorStateController
    from flow_sqla.wiring import sql_workflow

    count = 980
    ids = [f"{i:04d}" + "x" * 27 for i in range(count)]  # 31 characters: one value each
    hubs = [f"h{i:04d}" + "y" * 26 for i in range(count)]
    text = (
        f"id: amp\nx: &L [{','.join(ids)}]\nlayout:\n  - {{id: s, type: start, link: {hubs[0]}}}\n"
        + "".join(f"  - {{id: {h}, type: exclusive, link: *L}}\n" for h in hubs)
        + "".join(f"  - {{id: {i}, link: act}}\n" for i in ids)
        + "  - {id: act, meta: {actor: employee}}\n"
    )
    wf = sql_workflow(db, FlowEngine(), state_controller=ActorStateController())
    with pytest.raises(GraphDefinitionError, match=r"(?s)'amp'.*MAX_GRAPH_DOC_BYTES"):
        wf.claim_task(Graph.from_text(text), FlowContext.of("amp-1", {"actor": "employee"}))
    assert count_rows(db, "bpm_flow_repository", "amp-1") == 0
