"""How an operation writes the instance row back: in place when it holds the row locked."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from _support import approve, ctx, executor, migrate, oa_graph, raw_row

from flow.workflow import TaskState
from flow_sqla import SqlStateRepository
from flow_sqla.tables import FlowTables


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _row_id(engine: sa.Engine, instance_id: str) -> int:
    table = FlowTables().repository
    with engine.connect() as conn:
        stmt = sa.select(table.c.id).where(table.c.instant_id == instance_id)
        return int(conn.execute(stmt).scalar_one())


def test_operations_on_an_existing_row_consume_no_generated_id(db: sa.Engine) -> None:
    ex = executor(db)
    assert approve(ex, "ids-a", "employee", amount=1)
    assert approve(ex, "ids-a", "manager")
    assert approve(ex, "ids-b", "employee", amount=1)
    assert _row_id(db, "ids-b") == _row_id(db, "ids-a") + 1


def test_a_row_deleted_inside_the_operations_own_transaction_is_written_again(
    db: sa.Engine,
) -> None:
    repo = SqlStateRepository(db)
    apply = oa_graph().get_node_or_throw("apply")
    table = FlowTables().repository
    with db.begin() as conn:
        c = ctx("gone-1", "employee", conn, amount=1)
        with repo.unit_of_work(c):
            conn.execute(sa.delete(table).where(table.c.instant_id == "gone-1"))
            repo.state_put(c, apply, TaskState.WAITING)
    row = raw_row(db, "gone-1")
    assert row is not None
    assert (row["states"], row["vars"]) == ({"oa:apply": 1001}, {"amount": 1})
