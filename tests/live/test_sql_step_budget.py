"""A runaway walk ends its transaction and releases the instance row lock (issue 11 item 4).

A FORWARD into an edge back to an earlier task walks the completed cycle forever; with
``flow_sqla`` it did so inside the submit's transaction, holding the row lock. The step budget
ends it with StepBudgetError: nothing is written and another connection can lock the row at
once (checked with a short lock-wait timeout, not with sleeps).
"""

from __future__ import annotations

import textwrap

import pytest
import sqlalchemy as sa
from _support import count_rows, migrate, raw_row

from flow import FlowContext, FlowEngine, Graph, StepBudgetError
from flow.workflow import ActorStateController, TaskAction, WorkflowExecutor
from flow_sqla.wiring import sql_workflow

REJECT = """
id: reject
layout:
  - {id: s, type: start}
  - {id: apply, meta: {actor: employee}}
  - {id: review, meta: {actor: manager}}
  - {id: gw, type: exclusive, link: [{nextId: e, when: "approved == true"}, {nextId: apply}]}
  - {id: e, type: end}
"""
AUTO_CYCLE = """
id: auto
layout:
  - {id: s, type: start}
  - {id: a, type: exclusive, link: b}
  - {id: b, type: exclusive, link: a}
"""


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _workflow(db: sa.Engine) -> WorkflowExecutor:
    flows = FlowEngine()
    flows.load(Graph.from_text(textwrap.dedent(REJECT)))
    flows.load(Graph.from_text(textwrap.dedent(AUTO_CYCLE)))
    return sql_workflow(db, flows, state_controller=ActorStateController(), max_steps=2_000)


def _impatient(db: sa.Engine) -> sa.Engine:
    """An engine on the same database whose lock waits give up after at most a second."""
    if db.dialect.name == "sqlite":
        return sa.create_engine(db.url, connect_args={"timeout": 0.05})
    if db.dialect.name == "postgresql":
        return sa.create_engine(db.url, connect_args={"options": "-c lock_timeout=200"})
    return sa.create_engine(
        db.url, connect_args={"init_command": "SET SESSION innodb_lock_wait_timeout=1"}
    )


def _lock_row(conn: sa.Connection, instance_id: str) -> None:
    """Take the instance row's write lock (an UPDATE locks the row everywhere; SQLite locks
    the database)."""
    conn.execute(
        sa.text("UPDATE bpm_flow_repository SET updater = 'probe' WHERE instant_id = :i"),
        {"i": instance_id},
    )


def _ctx(actor: str, approved: bool) -> FlowContext:
    return FlowContext.of("rej-1", {"actor": actor, "approved": approved})


def test_runaway_forward_rolls_back_and_releases_the_row_lock(db: sa.Engine) -> None:
    workflow = _workflow(db)
    employee = _ctx("employee", False)
    task = workflow.claim_task("reject", employee)
    assert task is not None
    workflow.submit_task(task, TaskAction.FORWARD, employee)
    manager = _ctx("manager", False)
    task = workflow.claim_task("reject", manager)
    assert task is not None and task.node.id == "review"
    row_before = raw_row(db, "rej-1")
    history_before = count_rows(db, "bpm_flow_task", "rej-1")

    impatient = _impatient(db)
    try:
        # The probe does notice a held lock: while a holder keeps the row, it times out.
        with db.connect() as holder, holder.begin():
            _lock_row(holder, "rej-1")
            with (
                pytest.raises(sa.exc.OperationalError),
                impatient.connect() as probe,
                probe.begin(),
            ):
                _lock_row(probe, "rej-1")

        with pytest.raises(StepBudgetError) as caught:
            workflow.submit_task(task, TaskAction.FORWARD, manager)
        assert (caught.value.graph_id, caught.value.instance_id) == ("reject", "rej-1")
        assert db.pool.checkedout() == 0  # type: ignore[attr-defined]

        # Right after the error another connection locks the row without waiting.
        with impatient.connect() as probe, probe.begin():
            _lock_row(probe, "rej-1")
            probe.rollback()
        assert impatient.pool.checkedout() == 0  # type: ignore[attr-defined]
    finally:
        impatient.dispose()
    assert raw_row(db, "rej-1") == row_before
    assert count_rows(db, "bpm_flow_task", "rej-1") == history_before


def test_runaway_claim_on_a_cycle_of_automatic_nodes_leaves_nothing(db: sa.Engine) -> None:
    workflow = _workflow(db)
    with pytest.raises(StepBudgetError, match="graph 'auto'"):
        workflow.claim_task("auto", FlowContext.of("auto-1"))
    assert raw_row(db, "auto-1") is None
    assert db.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_sql_workflow_uses_the_default_step_budget(db: sa.Engine) -> None:
    flows = FlowEngine()
    assert sql_workflow(db, flows).max_steps == WorkflowExecutor.MAX_STEPS
