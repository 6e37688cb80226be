"""The task index on SQLite, MariaDB and PostgreSQL (aggregate.md §3-§6): invariants by random
walks, statement budgets, rollbacks, concurrency at the server's default isolation, bad input,
index=False and reindex."""

from __future__ import annotations

import importlib
import json
import threading
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
from _support import approve, count_rows, counting, ctx, every_row, executor, migrate, raw_row

from flow import FlowContext, FlowEngine, Graph
from flow.errors import (
    ConditionError,
    GraphDefinitionError,
    GraphNotFoundError,
    SnapshotError,
)
from flow.workflow import (
    ActorStateController,
    ConcurrentSubmitError,
    GraphMismatchError,
    IndexUnavailableError,
    InstanceClosedError,
    InstanceStatus,
    OpenTask,
    SendBackError,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)
from flow_sqla import FlowTables, RepositoryError, migrations, reindex
from flow_sqla.errors import InvalidArgumentError, UnstorableGraphError
from flow_sqla.reindex import MAX_BATCH_SIZE
from flow_sqla.wiring import sql_workflow
from tests.unit.workflow.aggregate_walk import (
    CALLS_SUB_GRAPH,
    GRADE,
    GRADED,
    JUMP_TO_GATEWAY,
    SUB_GRAPH_REVIEW,
    SWITCH_A,
    SWITCH_B,
    check_invariants,
    controller,
    flow_engine,
    new_walker,
    sent_back_twice_routes,
)

TIMEOUT = 60.0
#: The module (``flow_sqla.reindex`` names the function once the package is imported).
reindex_module = importlib.import_module("flow_sqla.reindex")


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


#: The todo rows of tasks: on MySQL/MariaDB an instance also has its sentinel row (candidate
#: ``""``, see ``flow_sqla._todo.SENTINEL_NODE``), which no query lists.
_TASK_ROWS = "candidate <> ''"


def _rows(db: sa.Engine) -> dict[str, int]:
    """Row counts of every table (what "nothing written" compares)."""
    with db.connect() as conn:
        return {
            t: int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one())
            for t in ("bpm_flow_repository", "bpm_flow_task", "bpm_flow_todo")
        }


def _index_rows(db: sa.Engine) -> list[tuple[Any, ...]]:
    with db.connect() as conn:
        todo = conn.execute(
            sa.text(
                "SELECT instant_id, node_id, candidate, state FROM bpm_flow_todo "
                f"WHERE {_TASK_ROWS} ORDER BY instant_id, node_id, candidate"
            )
        ).all()
        status = conn.execute(
            sa.text("SELECT instant_id, status FROM bpm_flow_repository ORDER BY instant_id")
        ).all()
    return [tuple(r) for r in todo] + [tuple(r) for r in status]


def _stray_todo_row(
    db: sa.Engine, instance_id: str, node_id: str, title: str, state: int, candidate: str
) -> None:
    """A todo row no task of the instance has (another writer's, or a hand edit)."""
    stray = sa.text(
        "INSERT INTO bpm_flow_todo (instant_id, graph_id, node_id, node_name, state, "
        "candidate, lineage, create_time) VALUES (:i, 'oa', :n, :title, :s, :c, '[]', :t)"
    ).bindparams(sa.bindparam("t", type_=sa.DateTime()))  # typed: see _set_row
    with db.begin() as conn:
        conn.execute(
            stray,
            {
                "i": instance_id,
                "n": node_id,
                "title": title,
                "s": state,
                "c": candidate,
                "t": datetime(2020, 1, 1),
            },
        )


# -- §6 invariants -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2])
def test_invariants_hold_after_every_operation_of_a_random_walk(db: sa.Engine, seed: int) -> None:
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    walker = new_walker(ex, seed, instances=4)
    for _ in range(60):
        walker.step()
        check_invariants(walker)


@pytest.mark.parametrize("seed", [3, 4])
def test_invariants_hold_when_claims_and_submits_share_caller_transactions(
    db: sa.Engine, seed: int
) -> None:
    """Random walks in the README pattern: each transaction claims and submits one to three
    times (forward or back, random identities), so later writes start from the rows earlier
    ones of the same transaction left, todo rows inserted moments before included."""
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    walker = new_walker(ex, seed, instances=4)
    rng = walker.rng
    for _ in range(40):
        inst = rng.choice(walker.instances)
        with db.begin() as conn:
            walker.context = lambda instance_id, data: FlowContext.of(
                instance_id, data, connection=conn
            )
            for _ in range(rng.randint(1, 3)):
                c = walker.ctx(inst)
                action = rng.choice([TaskAction.FORWARD, TaskAction.FORWARD, TaskAction.BACK])
                ex.submit_task_if_waiting(ex.claim_task(inst.graph_id, c), action, c)
        check_invariants(walker)


def test_a_rolled_back_caller_transaction_leaves_index_and_status_untouched(
    db: sa.Engine,
) -> None:
    ex = executor(db, index=True)
    approve(ex, "r-1", "employee", amount=1)
    before = _index_rows(db)
    with db.connect() as conn:
        tx = conn.begin()
        c = ctx("r-1", "manager", conn)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        assert ex.withdraw("oa", ctx("r-2", "employee", conn)) is False
        c2 = ctx("r-3", "employee", conn, amount=1)
        ex.claim_task("oa", c2)
        tx.rollback()
    assert _index_rows(db) == before
    assert ex.status("r-1") == InstanceStatus.RUNNING
    assert [t.node_id for t in ex.open_tasks("r-1")] == ["manager"]
    # The process remembers nothing of the rolled-back work either.
    approve(ex, "r-1", "manager")
    assert ex.status("r-1") == InstanceStatus.COMPLETED


def test_a_find_on_an_unknown_instance_stores_nothing(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    assert ex.find_task("oa", ctx("ghost", "nobody")) is not None
    assert ex.status("ghost") is None
    assert _rows(db) == {"bpm_flow_repository": 0, "bpm_flow_task": 0, "bpm_flow_todo": 0}


# -- §3 statement budgets (index on; index=False keeps test_sql_statement_budget.py's) ------
def test_forward_closing_one_task_and_opening_one_takes_at_most_five_statements(
    db: sa.Engine,
) -> None:
    ex = executor(db, index=True)
    c = ctx("b-1", "employee", amount=1)
    task = ex.claim_task("oa", c)
    with counting(db) as counter:
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert counter.count <= 5, counter.statements
    # PostgreSQL folds the todo DELETE and INSERT into the row's UPDATE (data-modifying CTEs):
    # locking read, UPDATE, history INSERT.
    if db.dialect.name == "postgresql":
        assert counter.count == 3, counter.statements
    assert [t.node_id for t in ex.open_tasks("b-1")] == ["manager"]


def test_claim_that_changes_nothing_takes_one_statement(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    approve(ex, "b-2", "employee", amount=1)
    ex.claim_task("oa", ctx("b-2", "manager"))
    with counting(db) as counter:
        assert ex.claim_task("oa", ctx("b-2", "manager")) is not None
    assert counter.count == 1, counter.statements


def test_claim_that_marks_waiting_takes_at_most_three_statements(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    approve(ex, "b-3", "employee", amount=1)
    with counting(db) as counter:
        assert ex.claim_task("oa", ctx("b-3", "manager")) is not None
    assert counter.count <= 3, counter.statements
    # MySQL/MariaDB (multi-table UPDATE) and PostgreSQL (CTE) re-state the todo rows in the
    # row's own UPDATE: locking read + one UPDATE.
    if db.dialect.name != "sqlite":
        assert counter.count == 2, counter.statements
    assert [t.state for t in ex.open_tasks("b-3")] == [TaskState.WAITING]
    assert _todo_states(db, "b-3") == {int(TaskState.WAITING)}


def test_operations_on_neighbouring_instances_do_not_wait_for_each_other(db_url: str) -> None:
    """At the server's default isolation. A transaction withdraws n-3 and stays open; a
    forward of n-2 (a closing and an opening task of its neighbour in the todo index) must
    not wait for it — then the first transaction forwards n-1 and both commit. On MariaDB
    the withdraw's delete took a next-key lock on n-3's first todo key, whose gap held n-2's
    next key: n-2's forward waited, and with the first transaction's forward of n-1 (whose
    gap n-2's delete locked) the two deadlocked, every time. A 10 s lock wait limit stands
    for the wait (a real wait fails the test instead of hanging it)."""
    backend = sa.make_url(db_url).get_backend_name()
    if backend == "sqlite":
        pytest.skip("SQLite serializes writers on the whole file")
    limit = (
        {"options": "-c lock_timeout=10000"}
        if backend == "postgresql"
        else {"init_command": "SET SESSION innodb_lock_wait_timeout = 10"}
    )
    db = migrate(sa.create_engine(db_url, connect_args=limit))
    try:
        ex = executor(db, index=True)
        for instance_id in ("n-1", "n-2", "n-3"):
            assert ex.claim_task("oa", ctx(instance_id, "employee", amount=1)) is not None
        outcome: list[object] = []

        def forward_n2() -> None:
            try:
                outcome.append(approve(ex, "n-2", "employee", amount=1))
            except BaseException as exc:  # reported by the assert below
                outcome.append(exc)

        with db.begin() as conn:
            assert ex.withdraw("oa", ctx("n-3", "employee", conn))
            other = threading.Thread(target=forward_n2)
            other.start()
            other.join(60)
            assert outcome == [True]  # done while this transaction still holds n-3
            c = ctx("n-1", "employee", conn, amount=1)
            assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        assert [ex.status(i) for i in ("n-1", "n-2", "n-3")] == [
            InstanceStatus.RUNNING,
            InstanceStatus.RUNNING,
            InstanceStatus.WITHDRAWN,
        ]
    finally:
        db.dispose()


def test_a_row_left_under_a_task_s_key_takes_the_opened_task_s_values(db: sa.Engine) -> None:
    """MySQL/MariaDB insert todo rows keeping an instance's sentinel row: a row a hand edit
    left under the key of a task that opens is overwritten with that task's values — never
    kept as it was (a stale title, a WAITING nobody claimed, another lineage)."""
    if db.dialect.name not in ("mysql", "mariadb"):
        pytest.skip("the other dialects refuse the duplicate key (a RepositoryError)")
    ex = executor(db, index=True)
    assert ex.claim_task("oa", ctx("d-1", "employee", amount=1)) is not None
    with db.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO bpm_flow_todo (instant_id, graph_id, node_id, node_name, state, "
                "candidate, lineage, create_time) VALUES ('d-1', 'oa', 'manager', 'Stale', "
                "1001, 'actor:manager', '[\"x\"]', '2020-01-01 00:00:00')"
            )
        )
    assert approve(ex, "d-1", "employee", amount=1)
    (task,) = ex.open_tasks("d-1")
    assert (task.node_id, task.node_title, task.state, task.lineage) == (
        "manager",
        "Manager approval",
        TaskState.UNKNOWN,
        ("apply",),
    )


def _todo_states(db: sa.Engine, instance_id: str) -> set[int]:
    with db.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT state FROM bpm_flow_todo WHERE instant_id = :i AND {_TASK_ROWS}"),
            {"i": instance_id},
        )
        return {int(state) for (state,) in rows}


def test_a_claim_whose_todo_rows_were_deleted_by_hand_still_marks_the_row_waiting(
    db: sa.Engine,
) -> None:
    """MySQL's multi-table UPDATE changes nothing when a todo row is missing; the repository
    notices (matched rows) and writes with separate statements: the state is never lost."""
    ex = executor(db, index=True)
    approve(ex, "b-gone", "employee", amount=1)
    with db.begin() as conn:
        conn.execute(sa.text("DELETE FROM bpm_flow_todo WHERE instant_id = 'b-gone'"))
    task = ex.claim_task("oa", ctx("b-gone", "manager"))
    assert task is not None and task.state == TaskState.WAITING
    assert raw_row(db, "b-gone")["states"]["oa:manager"] == int(TaskState.WAITING)  # type: ignore[index]
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx("b-gone", "manager"))
    assert ex.status("b-gone") == InstanceStatus.COMPLETED


def test_back_and_forward_again_keep_one_todo_row_per_open_task_and_candidate(
    db: sa.Engine,
) -> None:
    """BACK closes one task and re-opens an earlier one in one write (one statement on
    PostgreSQL); forward again: the todo table holds exactly the open task's rows."""
    ex = executor(db, index=True)
    approve(ex, "b-again", "employee", amount=1)
    task = ex.claim_task("oa", ctx("b-again", "manager"))
    assert task is not None
    assert ex.submit_task_if_waiting(task, TaskAction.BACK, ctx("b-again", "manager"))
    again = ex.claim_task("oa", ctx("b-again", "employee"))
    assert again is not None and again.node_id == "apply"
    assert ex.submit_task_if_waiting(again, TaskAction.FORWARD, ctx("b-again", "employee"))
    assert [t.node_id for t in ex.open_tasks("b-again")] == ["manager"]
    with db.connect() as conn:
        count = conn.execute(
            sa.text(
                f"SELECT COUNT(*) FROM bpm_flow_todo WHERE instant_id = 'b-again' AND {_TASK_ROWS}"
            )
        ).scalar()
    assert count == len(ex.open_tasks("b-again")[0].candidates)


def _todo_ids(db: sa.Engine, instance_id: str) -> list[tuple[str, int]]:
    with db.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT node_id, id FROM bpm_flow_todo "
                f"WHERE instant_id = :i AND {_TASK_ROWS} ORDER BY id"
            ),
            {"i": instance_id},
        )
        return [(node, int(row_id)) for node, row_id in rows]


def test_starting_and_forwarding_in_one_transaction_leaves_only_the_opened_task(
    db: sa.Engine,
) -> None:
    """The README pattern on a new instance: the claim opens ``apply``, the submit closes it
    and opens ``manager``, in one transaction."""
    ex = executor(db, index=True)
    with db.begin() as conn:
        c = ctx("s-1", "employee", conn, amount=1)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
    assert [(t.node_id, t.candidates) for t in ex.open_tasks("s-1")] == [
        ("manager", ("actor:manager",))
    ]
    assert [node for node, _ in _todo_ids(db, "s-1")] == ["manager"]
    assert [t.instance_id for t in ex.inbox(ctx(None, "manager"))] == ["s-1"]  # type: ignore[arg-type]
    assert ex.inbox(ctx(None, "employee")) == []  # type: ignore[arg-type]
    approve(ex, "s-1", "manager")
    assert ex.status("s-1") == InstanceStatus.COMPLETED and _todo_ids(db, "s-1") == []


def test_a_task_opened_later_sorts_after_one_opened_earlier(db: sa.Engine) -> None:
    """A task opened by a later submit gets a new id, after every task opened in between —
    even when the task it closes was opened (claimed) earlier in the same transaction: the
    inbox's oldest-first order and its keyset cursors rely on it. (Re-using the closed
    task's todo row would save a statement on MySQL, but its id was drawn when it was
    opened, so the new task would sort before those opened meanwhile.)"""
    ex = executor(db, index=True)
    with db.begin() as conn:
        assert ex.claim_task("oa", ctx("o-1", "employee", conn, amount=1)) is not None
    approve(ex, "o-2", "employee", amount=1)  # opens o-2's manager task
    with db.begin() as conn:
        c = ctx("o-1", "employee", conn, amount=1)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
    (o2,) = _todo_ids(db, "o-2")
    (o1,) = _todo_ids(db, "o-1")
    assert o1[0] == "manager" and o1[1] > o2[1]
    page = ex.inbox(ctx(None, "manager"))  # type: ignore[arg-type]
    assert [t.instance_id for t in page] == ["o-2", "o-1"]


def test_tasks_opened_one_after_another_in_one_transaction_keep_that_order(
    db: sa.Engine,
) -> None:
    """A parallel split opens ``legal`` and ``finance``; forwarding ``legal`` in the same
    transaction opens ``sign``, which must sort after ``finance``."""
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    with db.begin() as conn:
        for who in ({"actor": "alice"}, {"role": "legal"}):
            c = FlowContext.of("par-1", {"amount": 1, **who}, connection=conn)
            assert ex.submit_task_if_waiting(ex.claim_task("par", c), TaskAction.FORWARD, c)
    ids = dict(_todo_ids(db, "par-1"))
    assert ids.keys() == {"finance", "sign"} and ids["finance"] < ids["sign"]
    page = ex.inbox(FlowContext.of(None, {"actor": "bob", "role": "boss"}))
    assert [t.node_id for t in page] == ["finance", "sign"]


def test_a_todo_row_deleted_by_hand_in_the_transaction_still_ends_with_the_opened_task(
    db: sa.Engine,
) -> None:
    """The row the claim inserted is gone when the submit comes (the caller's own SQL): the
    multi-table UPDATE matches nothing and the separate statements write the change."""
    ex = executor(db, index=True)
    with db.begin() as conn:
        c = ctx("h-1", "employee", conn, amount=1)
        task = ex.claim_task("oa", c)
        conn.execute(sa.text("DELETE FROM bpm_flow_todo WHERE instant_id = 'h-1'"))
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert [node for node, _ in _todo_ids(db, "h-1")] == ["manager"]
    assert raw_row(db, "h-1")["states"]["oa:apply"] == int(TaskState.COMPLETED)  # type: ignore[index]


def test_a_forward_rolled_back_to_a_savepoint_leaves_the_claimed_task_open(
    db: sa.Engine,
) -> None:
    ex = executor(db, index=True)
    with db.begin() as conn:
        c = ctx("p-1", "employee", conn, amount=1)
        task = ex.claim_task("oa", c)
        savepoint = conn.begin_nested()
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        savepoint.rollback()
    assert [(t.node_id, t.state) for t in ex.open_tasks("p-1")] == [("apply", TaskState.WAITING)]
    assert _todo_states(db, "p-1") == {int(TaskState.WAITING)}
    assert approve(ex, "p-1", "employee", amount=1)
    assert [node for node, _ in _todo_ids(db, "p-1")] == ["manager"]


def test_inbox_and_instances_pages_take_one_statement_each(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    for n in range(4):
        approve(ex, f"b-{n}", "employee", amount=1)
    with counting(db) as counter:
        page = ex.inbox(FlowContext.of(None, {"actor": "manager"}), limit=3)
    assert counter.count == 1 and len(page) == 3
    with counting(db) as counter:
        nxt = ex.inbox(FlowContext.of(None, {"actor": "manager"}), after=page[-1].cursor)
    assert counter.count == 1 and [t.instance_id for t in page + nxt] == [
        f"b-{n}" for n in range(4)
    ]
    with counting(db) as counter:
        summaries = ex.instances(status=InstanceStatus.RUNNING, graph_id="oa", limit=2)
    assert counter.count == 1 and [s.instance_id for s in summaries] == ["b-3", "b-2"]


# -- concurrency at the server's default isolation ---------------------------------------
def _threads(*jobs: Any) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(job: Any) -> Any:
        def run() -> None:
            try:
                job()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(j)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    return errors


def test_concurrent_submits_on_one_instance_have_exactly_one_winner(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    approve(ex, "c-1", "employee", amount=1)
    workers = 4
    tasks = [ex.claim_task("oa", ctx("c-1", "manager")) for _ in range(workers)]
    start = threading.Barrier(workers, timeout=TIMEOUT)
    won: list[bool] = []

    def submit(n: int) -> Any:
        def job() -> None:
            start.wait()
            won.append(
                ex.submit_task_if_waiting(tasks[n], TaskAction.FORWARD, ctx("c-1", "manager"))
            )

        return job

    assert _threads(*[submit(n) for n in range(workers)]) == []
    assert sorted(won) == [False] * (workers - 1) + [True]
    assert count_rows(db, "bpm_flow_task", "c-1") == 2
    assert (ex.status("c-1"), ex.open_tasks("c-1")) == (InstanceStatus.COMPLETED, [])


@pytest.mark.parametrize("db_url", ["mysql", "postgresql"], indirect=True)
def test_operations_on_neighbouring_instances_do_not_deadlock(db: sa.Engine) -> None:
    """Two transactions each claim an instance (todo rows updated), meet while both hold
    their locks, then forward (todo rows deleted and inserted next to the other instance's
    rows in the unique index). Gap locks would make the inserts wait on each other."""
    ex = executor(db, index=True)
    for instance_id in ("n-1", "n-2"):
        approve(ex, instance_id, "employee", amount=1)
    both_claimed = threading.Barrier(2, timeout=TIMEOUT)

    def work(instance_id: str) -> Any:
        def job() -> None:
            with db.connect() as conn, conn.begin():
                if conn.dialect.name in ("mysql", "mariadb"):
                    conn.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 10")
                c = ctx(instance_id, "manager", conn)
                task = ex.claim_task("oa", c)
                both_claimed.wait()
                assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
                ex.withdraw("oa", ctx(instance_id, "employee", conn))

        return job

    assert _threads(work("n-1"), work("n-2")) == []
    assert [ex.status(i) for i in ("n-1", "n-2")] == [InstanceStatus.COMPLETED] * 2


# -- bad input -------------------------------------------------------------------------------
def test_unknown_closed_refused_and_foreign_calls_write_nothing(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    approve(ex, "x-1", "employee", amount=1)
    assert ex.withdraw("oa", ctx("x-2", "employee")) is False  # unknown
    assert ex.status("x-2") is None and ex.open_tasks("x-2") == []
    before = _rows(db)
    manager = ctx("x-1", "manager")
    task = ex.claim_task("oa", manager)
    assert ex.send_back(task, ctx("x-1", "director")) is False  # not a candidate
    before = _rows(db)
    assert ex.send_back(task, manager)  # back to apply
    after_back = _rows(db)
    assert after_back["bpm_flow_task"] == before["bpm_flow_task"] + 1
    employee = ctx("x-1", "employee")
    again = ex.claim_task("oa", employee)
    with pytest.raises(SendBackError, match="first task"):
        ex.send_back(again, employee)
    assert ex.withdraw("oa", employee)
    closed = _rows(db)
    assert ex.withdraw("oa", employee) is False
    with pytest.raises(InstanceClosedError):
        ex.submit_task_at("oa", "apply", TaskAction.FORWARD, employee)
    assert ex.submit_task_if_waiting(again, TaskAction.FORWARD, employee) is False
    assert ex.claim_task("oa", employee) is None
    assert _rows(db) == closed
    assert ex.inbox(FlowContext.of(None, {"actor": "employee"})) == []


def test_an_inbox_task_carries_the_callers_first_matching_candidate(db: sa.Engine) -> None:
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    c = FlowContext.of("c-1", {"actor": "alice", "amount": 9000})
    assert ex.submit_task_if_waiting(ex.claim_task("excl", c), TaskAction.FORWARD, c)
    both = ex.inbox(FlowContext.of(None, {"actor": "carol", "role": "boss"}))
    assert [t.candidates for t in both] == [("actor:carol",)]
    role = ex.inbox(FlowContext.of(None, {"role": "boss"}))
    assert [t.candidates for t in role] == [("role:boss",)]
    assert ex.open_tasks("c-1")[0].candidates == ("actor:carol", "role:boss")


def test_an_instance_written_by_nobody_has_no_creator(db: sa.Engine) -> None:
    """The row stores '' (what the Go plugin writes for no auditor); the summary says None,
    as the in-memory repository does."""
    ex = executor(db, index=True)
    ex.submit_task_at("oa", "apply", TaskAction.FORWARD, FlowContext.of("n-1", {"amount": 1}))
    (summary,) = ex.instances()
    assert summary.instance_id == "n-1" and summary.creator is None


def test_the_inbox_reads_on_the_callers_connection(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    with db.begin() as conn:
        c = ctx("t-1", "employee", conn, amount=1)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        mine = ex.inbox(FlowContext.of(None, {"actor": "manager"}, connection=conn))
        assert [t.instance_id for t in mine] == ["t-1"]
        conn.rollback()
    assert ex.inbox(FlowContext.of(None, {"actor": "manager"})) == []


def test_status_open_tasks_and_instances_read_on_the_callers_connection(db: sa.Engine) -> None:
    """They see the caller's uncommitted step, and take no second pooled connection while the
    caller holds one (a request that did waited for others' connections under load)."""
    ex = executor(db, index=True)
    checked_out: list[int] = []
    sa.event.listen(db.pool, "checkout", lambda *args: checked_out.append(1))
    with db.begin() as conn:
        c = ctx("t-2", "employee", conn, amount=1)
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        checked_out.clear()
        assert ex.status("t-2", connection=conn) == InstanceStatus.RUNNING
        assert [t.node_id for t in ex.open_tasks("t-2", connection=conn)] == ["manager"]
        assert [s.instance_id for s in ex.instances(connection=conn)] == ["t-2"]
        assert checked_out == []
        conn.rollback()
    assert ex.status("t-2") is None
    assert ex.open_tasks("t-2") == [] and ex.instances() == []


@pytest.mark.parametrize("query", ["status", "open_tasks", "instances"])
def test_the_queries_refuse_a_connection_that_is_not_one(db: sa.Engine, query: str) -> None:
    """An Engine (or a Session, a string) would be read around: outside the caller's
    transaction, on a second pooled connection."""
    ex = executor(db, index=True)
    call = {
        "status": lambda c: ex.status("t-3", connection=c),
        "open_tasks": lambda c: ex.open_tasks("t-3", connection=c),
        "instances": lambda c: ex.instances(connection=c),
    }[query]
    for wrong in (db, "conn"):
        with pytest.raises(InvalidArgumentError, match="connection"):
            call(wrong)


def _stored_vars(db: sa.Engine, instance_id: str) -> Any:
    row = raw_row(db, instance_id)
    assert row is not None
    return row["vars"]


def test_a_submit_that_changes_no_state_still_stores_its_variables(db: sa.Engine) -> None:
    """Forwarding a completed task again re-decides the gateway with the new amount: its
    history row, the stored variables and the index must all say director."""
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    alice = FlowContext.of("s-1", {"actor": "alice", "amount": 1})
    assert ex.submit_task_if_waiting(ex.claim_task("excl", alice), TaskAction.FORWARD, alice)
    again = FlowContext.of("s-1", {"actor": "alice", "amount": 9000})
    ex.submit_task_at("excl", "apply", TaskAction.FORWARD, again)
    assert _stored_vars(db, "s-1")["amount"] == 9000
    assert [t.node_id for t in ex.open_tasks("s-1")] == ["director"]
    carol = FlowContext.of("s-1", {"actor": "carol"})
    claimed = ex.claim_task("excl", carol)
    assert claimed is not None and claimed.node_id == "director"


def test_a_read_of_an_instance_not_yet_indexed_indexes_nothing(db: sa.Engine) -> None:
    """A find with other variables must not index the instance from variables it does not
    store; reindex then works from the stored ones — also when handed other variables."""
    plain = sql_workflow(db, flow_engine(), state_controller=controller(), index=False)
    alice = FlowContext.of("r-1", {"actor": "alice", "amount": 1})
    assert plain.submit_task_if_waiting(plain.claim_task("excl", alice), TaskAction.FORWARD, alice)
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    assert ex.find_task("excl", FlowContext.of("r-1", {"actor": "x", "amount": 9000})) is not None
    assert ex.status("r-1") is None and _stored_vars(db, "r-1") == {"amount": 1}
    assert ex.reindex("excl", FlowContext.of("r-1", {"amount": 9000}))
    assert [t.node_id for t in ex.open_tasks("r-1")] == ["manager"]


def test_a_bad_row_failing_in_its_write_leaves_nothing_behind(db: sa.Engine) -> None:
    if db.dialect.name == "mysql":
        pytest.skip("MariaDB's JSON check refuses the lone surrogate in the stored graph")
    engine = FlowEngine()
    graph = Graph.from_text(
        "id: g1\nlayout:\n  - {id: start, type: start, link: apply}\n"
        "  - {id: apply, title: Apply, meta: {actor: alice}, link: end}\n  - {id: end, type: end}\n"
    )
    engine.load(graph)
    plain = sql_workflow(db, engine, state_controller=ActorStateController(), index=False)
    for n in range(3):
        plain.claim_task("g1", FlowContext.of(f"w-{n}", {"actor": "alice"}))
    with db.begin() as conn:
        doc = json.dumps(graph.to_dict()).replace('"Apply"', '"\\ud800x"')
        conn.execute(
            sa.text("UPDATE bpm_flow_repository SET graph = :g WHERE instant_id = 'w-1'"),
            {"g": doc},
        )
    bad: list[str] = []
    indexed = reindex(
        db, FlowEngine(), state_controller=ActorStateController(),
        on_bad_row=lambda instance_id, error: bad.append(instance_id),
    )  # fmt: skip
    assert indexed == 2 and bad == ["w-1"]
    with db.connect() as conn:
        status = conn.execute(
            sa.text("SELECT status FROM bpm_flow_repository WHERE instant_id = 'w-1'")
        ).scalar()
    assert status is None  # left unindexed: a later pass visits it again


def test_calls_that_decline_write_nothing_whatever_their_context_holds(db: sa.Engine) -> None:
    """False (or None) means nothing written: not the context's new variables either, which
    would also move the gateways the stored open tasks were computed with."""
    ex = executor(db, index=True)
    approve(ex, "v-1", "employee", amount=1)
    stale = ex.claim_task("oa", ctx("v-1", "manager"))
    approve(ex, "v-1", "manager")
    approve(ex, "v-2", "employee", amount=1)
    task = ex.claim_task("oa", ctx("v-2", "manager"))
    before = every_row(db)
    big = {"amount": 9000, "note": "changed"}
    assert (
        ex.submit_task_if_waiting(stale, TaskAction.FORWARD, ctx("v-1", "manager", **big)) is False
    )
    assert ex.withdraw("oa", ctx("v-1", "employee", **big)) is False  # completed
    assert ex.send_back(task, ctx("v-2", "director", **big)) is False  # not a candidate
    assert ex.claim_task("oa", ctx("v-2", "director", note="changed")) is None
    assert ex.find_task("oa", ctx("v-2", "manager", **big)) is not None
    assert every_row(db) == before
    assert [t.node_id for t in ex.inbox(FlowContext.of(None, {"actor": "manager"}))] == ["manager"]


def test_nothing_found_on_an_unknown_id_leaves_no_row_whatever_the_context_holds(
    db: sa.Engine,
) -> None:
    ex = executor(db, index=True)
    data = {"amount": 1, "v": 1}
    assert ex.claim_task("oa", ctx("ghost", "nobody", **data)) is None
    assert ex.find_next_tasks("oa", ctx("ghost", "nobody", **data)) is not None
    assert ex.withdraw("oa", ctx("ghost", "nobody", **data)) is False
    assert _rows(db) == {"bpm_flow_repository": 0, "bpm_flow_task": 0, "bpm_flow_todo": 0}


@pytest.mark.parametrize("action", [TaskAction.BACK, TaskAction.BACK_JUMP, TaskAction.RESTART])
def test_a_submit_that_sets_no_state_on_an_unknown_id_starts_no_instance(
    db: sa.Engine, action: TaskAction
) -> None:
    """Its history record is written (as in memory), its variables alone create no row: such
    a row would have no status, yet a withdraw would take it for a running instance."""
    ex = executor(db, index=True)
    c = ctx("fresh", "manager", amount=1, note="kept nowhere")
    ex.submit_task_at("oa", "manager", action, c)
    assert _rows(db) == {"bpm_flow_repository": 0, "bpm_flow_task": 1, "bpm_flow_todo": 0}
    assert ex.status("fresh") is None and ex.instances() == []
    assert ex.withdraw("oa", ctx("fresh", "employee")) is False
    assert _rows(db) == {"bpm_flow_repository": 0, "bpm_flow_task": 1, "bpm_flow_todo": 0}


def test_a_role_is_never_stored_for_the_next_caller(db: sa.Engine) -> None:
    """The controller's keys are who acts, like ``actor``: a ``role`` stored with the
    variables would be merged into a later context without one, and its holder could claim
    the role's task while the inbox (rightly) shows nothing."""
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    alice = FlowContext.of("leak", {"actor": "alice", "role": "boss", "amount": 1})
    assert ex.submit_task_if_waiting(ex.claim_task("excl", alice), TaskAction.FORWARD, alice)
    dave = FlowContext.of("leak", {"actor": "dave"})
    assert ex.inbox(dave) == []
    assert ex.claim_task("excl", dave) is None
    stored = raw_row(db, "leak")
    assert stored is not None and "role" not in stored["vars"]
    boss = FlowContext.of("leak", {"actor": "erin", "role": "boss"})
    task = ex.claim_task("excl", boss)
    assert task is not None and task.node_id == "manager"


# -- index=False and reindex -----------------------------------------------------------------
def test_index_false_runs_on_the_reference_tables_alone(engine: sa.Engine) -> None:
    migrations.upgrade(engine, "flow0003")
    ex = executor(engine, index=False)
    assert approve(ex, "g-1", "employee", amount=1)
    assert approve(ex, "g-1", "manager")
    with pytest.raises(IndexUnavailableError, match="keeps the task index"):
        ex.inbox(FlowContext.of(None, {"actor": "manager"}))
    with pytest.raises(IndexUnavailableError):
        ex.withdraw("oa", ctx("g-1", "employee"))


def test_reindex_indexes_rows_written_without_the_index(db: sa.Engine) -> None:
    plain = executor(db, index=False)
    for n in range(7):
        approve(plain, f"g-{n}", "employee", amount=1)
    approve(plain, "g-0", "manager")
    indexed = executor(db, index=True)
    assert indexed.status("g-1") is None
    seen: list[tuple[int, int]] = []
    assert reindex(
        db, flow_engine_oa(), state_controller=controller_oa(), batch_size=3,
        progress=lambda rows, done: seen.append((rows, done)),
    ) == 7  # fmt: skip
    assert seen[-1] == (7, 7) and len(seen) == 3
    assert indexed.status("g-0") == InstanceStatus.COMPLETED
    assert [t.node_id for t in indexed.inbox(FlowContext.of(None, {"actor": "manager"}))] == [
        "manager"
    ] * 6
    # Resumable: nothing left to do.
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa()) == 0


@pytest.mark.parametrize("db_url", ["mysql", "postgresql"], indirect=True)
def test_two_reindexes_at_once_count_each_instance_once(db: sa.Engine) -> None:
    """Two ``flow reindex`` processes (or one and live operations) on one table: a row the
    other indexed after this one read its window is neither indexed again nor counted."""
    plain = executor(db, index=False)
    for n in range(300):
        approve(plain, f"rx-{n}", "employee", amount=1)
    counts: list[int] = []

    def run() -> None:
        counts.append(
            reindex(db, flow_engine_oa(), state_controller=controller_oa(), batch_size=10)
        )

    assert _threads(run, run) == []
    assert sum(counts) == 300
    indexed = executor(db, index=True)
    assert len(indexed.inbox(FlowContext.of(None, {"actor": "manager"}), limit=500)) == 300


def test_reindex_of_one_instance_indexed_already_can_leave_it(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    assert approve(ex, "ri-1", "employee", amount=1)
    assert not ex.reindex("oa", ctx("ri-1", "x"), unindexed_only=True)
    assert ex.reindex("oa", ctx("ri-1", "x"))


def _set_row(db: sa.Engine, instance_id: str, **values: Any) -> None:
    """Write columns of an instance row behind the library's back (as another writer would)."""
    names = ", ".join(f"{name} = :{name}" for name in values)
    # Dates typed, bound as each dialect stores them (sqlite3's own datetime adapter is
    # deprecated since Python 3.12); JSON columns get the text as given.
    dates = [sa.bindparam(k, type_=sa.DateTime()) for k, v in values.items() if _is_date(v)]
    statement = sa.text(f"UPDATE bpm_flow_repository SET {names} WHERE instant_id = :i")
    with db.begin() as conn:
        conn.execute(statement.bindparams(*dates), {**values, "i": instance_id})


def _is_date(value: Any) -> bool:
    return isinstance(value, datetime)


def _audit(db: sa.Engine, instance_id: str) -> tuple[Any, ...]:
    with db.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT updater, update_time, finish_time FROM bpm_flow_repository "
                "WHERE instant_id = :i"
            ),
            {"i": instance_id},
        ).one()
    return tuple(
        datetime.fromisoformat(v) if isinstance(v, str) and v[:1] == "2" else v for v in row
    )


def test_reindex_writes_only_the_index_and_dates_it_by_the_last_change(db: sa.Engine) -> None:
    """A reindex is bookkeeping: the row's updater and update time stay those of the last
    real step, and the finish time and the open task's opening time are that update time,
    not the hour the reindex ran."""
    plain = executor(db, index=False)
    approve(plain, "d-open", "employee", amount=1)
    approve(plain, "d-done", "employee", amount=1)
    approve(plain, "d-done", "manager")
    stepped = datetime(2020, 5, 4, 3, 2, 1)
    for instance_id in ("d-open", "d-done"):
        _set_row(db, instance_id, update_time=stepped)
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa()) == 2
    indexed = executor(db, index=True)
    assert _audit(db, "d-open") == ("employee", stepped, None)
    assert _audit(db, "d-done") == ("manager", stepped, stepped)
    (task,) = indexed.open_tasks("d-open")
    assert (task.node_id, task.opened_at) == ("manager", stepped)
    assert indexed.instances(status=InstanceStatus.COMPLETED)[0].finished_at == stepped


@pytest.mark.parametrize("column", ["states", "graph"])
def test_reindex_names_a_row_that_does_not_decode_and_can_skip_it(
    db: sa.Engine, column: str
) -> None:
    plain = executor(db, index=False)
    for n in range(5):
        approve(plain, f"b-{n}", "employee", amount=1)
    if db.dialect.name != "sqlite":
        pytest.skip(f"{db.dialect.name} refuses to store text that is not JSON in {column}")
    _set_row(db, "b-2", **{column: '{"oa:apply": 10'})
    with pytest.raises(SnapshotError, match="'b-2'") as raised:
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), batch_size=2)
    assert raised.value.instance_id == "b-2"
    indexed = executor(db, index=True)
    assert [indexed.status(f"b-{n}") for n in range(5)] == [InstanceStatus.RUNNING] * 2 + [None] * 3
    bad: list[tuple[str, str]] = []

    def note(instance_id: str, error: Exception) -> None:
        bad.append((instance_id, type(error).__name__))

    controller = controller_oa()
    assert (
        reindex(db, flow_engine_oa(), state_controller=controller, batch_size=2, on_bad_row=note)
        == 2
    )
    assert bad == [("b-2", "SnapshotError")]
    assert [indexed.status(f"b-{n}") for n in range(5)] == [
        InstanceStatus.RUNNING, InstanceStatus.RUNNING, None,
        InstanceStatus.RUNNING, InstanceStatus.RUNNING,
    ]  # fmt: skip


_HUGE_NUMBER = "9" * 5000  # beyond Python's 4,300 digits of int("...")
_TOO_DEEP = "[" * 5000 + "]" * 5000  # beyond the recursion limit of Python 3.11/3.12's json


def _python_decodes(text: str) -> bool:
    """Whether this Python's json module decodes ``text`` (3.13 decodes 5,000-deep JSON)."""
    try:
        json.loads(text)
    except RecursionError:
        return False
    return True


_DECODES_TOO_DEEP = _python_decodes(_TOO_DEEP)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("open_tasks", f"[{_HUGE_NUMBER}]"),
        ("states", f'{{"oa:apply": {_HUGE_NUMBER}}}'),
        ("states", _TOO_DEEP),
        ("graph", _TOO_DEEP),
    ],
    ids=["open_tasks-huge-number", "states-huge-number", "states-too-deep", "graph-too-deep"],
)
def test_a_full_reindex_reports_json_python_cannot_decode_as_a_bad_row(
    db: sa.Engine, column: str, value: str
) -> None:
    """Valid JSON that Python's decoder refuses (too many digits, too deep) is a bad row of
    its instance on every dialect: the pass goes on with the other rows. psycopg decoded such
    a column while fetching the batch and let ValueError/RecursionError stop the pass."""
    if db.dialect.name == "mysql" and value == _TOO_DEEP:
        pytest.skip("MariaDB's JSON check refuses JSON nested 5,000 deep")
    if value == _TOO_DEEP and _DECODES_TOO_DEEP:
        pytest.skip("this Python's json decodes JSON nested 5,000 deep: no decoder error")
    plain = executor(db, index=False)
    for n in range(3):
        approve(plain, f"j-{n}", "employee", amount=1)
    _set_row(db, "j-1", **{column: value})
    bad: list[tuple[str, str]] = []
    indexed = reindex(
        db, flow_engine_oa(), state_controller=controller_oa(), everything=True,
        on_bad_row=lambda instance_id, error: bad.append((instance_id, type(error).__name__)),
    )  # fmt: skip
    assert (indexed, bad) == (2, [("j-1", "SnapshotError")])
    ex = executor(db, index=True)
    assert [ex.status(f"j-{n}") for n in (0, 2)] == [InstanceStatus.RUNNING] * 2
    with pytest.raises(SnapshotError, match="'j-1'"):
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True)


@pytest.mark.parametrize("everything", [False, True], ids=["unindexed", "every-row"])
def test_reindex_replaces_the_todo_rows_of_a_row_whose_index_was_cleared(
    db: sa.Engine, everything: bool
) -> None:
    """A row whose status was cleared (by hand) while its todo rows stayed: the rebuild
    replaces them. Their insert failed on the unique key on every pass, so the pass never
    got past that instance and the rows after it were never indexed."""
    ex = executor(db, index=True)
    for instance_id in ("c-1", "c-2"):
        approve(ex, instance_id, "employee", amount=1)
    before = _index_rows(db)
    with db.begin() as conn:
        conn.execute(sa.text("UPDATE bpm_flow_repository SET status = NULL, open_tasks = NULL"))
    controller = controller_oa()
    assert reindex(db, flow_engine_oa(), state_controller=controller, everything=everything) == 2
    assert _index_rows(db) == before
    assert [t.node_id for t in ex.open_tasks("c-1")] == ["manager"]
    assert approve(ex, "c-1", "manager")
    assert ex.status("c-1") == InstanceStatus.COMPLETED


def test_reindex_names_an_instance_whose_stored_graph_does_not_load(db: sa.Engine) -> None:
    plain = executor(db, index=False)
    approve(plain, "s-1", "employee", amount=1)
    _set_row(db, "s-1", graph='{"id": "zz", "layout": 7}', states='{"zz:apply": 1002}')
    with pytest.raises(GraphDefinitionError, match="instance 's-1'"):
        reindex(db, flow_engine_oa(), state_controller=controller_oa())


def test_reindex_names_a_row_that_names_no_graph(db: sa.Engine) -> None:
    plain = executor(db, index=False)
    approve(plain, "n-1", "employee", amount=1)
    _set_row(db, "n-1", graph=None, states=None)
    with pytest.raises(SnapshotError, match=r"names no graph.*instance 'n-1'"):
        reindex(db, flow_engine_oa(), state_controller=controller_oa())


def _bad_rows(
    db: sa.Engine,
    engine: FlowEngine | None = None,
    controller: Any = None,
    **options: Any,
) -> list[tuple[str, str]]:
    """Reindex reporting bad rows (default: the OA graph and its controller); the rows
    reported, as (instance id, error type name)."""
    bad: list[tuple[str, str]] = []
    reindex(
        db,
        engine if engine is not None else flow_engine_oa(),
        state_controller=controller if controller is not None else controller_oa(),
        on_bad_row=lambda instance_id, error: bad.append((instance_id, type(error).__name__)),
        **options,
    )
    return bad


def test_reindex_reads_a_graph_column_holding_json_null_as_no_graph(db: sa.Engine) -> None:
    """Go's ``json.Marshal`` of a nil value writes the literal ``null``: no graph stored, as a
    SQL NULL — the row is indexed by its states' graph (it was taken for a graph named
    "null": ``GraphNotFoundError``)."""
    plain = executor(db, index=False)
    approve(plain, "jn-1", "employee", amount=1)
    _set_row(db, "jn-1", graph="null")
    assert _bad_rows(db) == []
    assert [t.node_id for t in executor(db, index=True).open_tasks("jn-1")] == ["manager"]


def test_reindex_refuses_a_row_whose_variables_route_past_the_task_it_waits_on(
    db: sa.Engine,
) -> None:
    """The Go plugin stores an instance's first variables only: a later step decided on
    others (``amount: 1``, the manager's task, now WAITING) while the stored ones
    (``amount: 9000``) lead to the director's. Indexed on those, the director's inbox listed
    a task nobody waits on and a withdraw terminated it, leaving the manager's WAITING. The
    row is a bad row instead (nothing written); its next submit indexes it on its own
    variables."""
    plain = executor(db, index=False)
    assert approve(plain, "gv-1", "employee", amount=1)
    assert plain.claim_task("oa", ctx("gv-1", "manager")) is not None  # manager WAITING
    _set_row(db, "gv-1", vars='{"amount": 9000}')
    before = every_row(db)
    assert _bad_rows(db) == [("gv-1", "SnapshotError")]
    assert every_row(db) == before
    indexed = executor(db, index=True)
    assert approve(indexed, "gv-1", "manager", amount=1)
    assert indexed.status("gv-1") == InstanceStatus.COMPLETED


def _terminate_one_branch(ex: WorkflowExecutor, instance_id: str) -> None:
    """Parallel split: the finance task claimed (WAITING), the legal branch TERMINATEd."""
    alice = FlowContext.of(instance_id, {"actor": "alice"})
    assert ex.submit_task_if_waiting(ex.claim_task("par", alice), TaskAction.FORWARD, alice)
    boss = FlowContext.of(instance_id, {"role": "boss"})
    assert ex.claim_task("par", boss) is not None
    legal = FlowContext.of(instance_id, {"role": "legal"})
    task = ex.claim_task("par", legal)
    assert task is not None and task.node.id == "legal"
    assert ex.submit_task_if_waiting(task, TaskAction.TERMINATE, legal)


@pytest.mark.parametrize("index", [True, False])
def test_reindex_indexes_a_terminated_instance_whose_other_branch_waits(
    db: sa.Engine, index: bool
) -> None:
    """A TERMINATE on one branch of a parallel split leaves the other branch's claimed task
    WAITING, and the instance TERMINATED with no open task — as the live index stores it. The
    reindex refused such a row as one whose variables route past its waiting task, so a
    ``flow reindex`` stopped at it on every run."""
    ex = sql_workflow(db, flow_engine(), state_controller=controller(), index=index)
    _terminate_one_branch(ex, "tb-1")
    for everything in (False, True):
        assert _bad_rows(db, flow_engine(), controller(), everything=everything) == []
    indexed = sql_workflow(db, flow_engine(), state_controller=controller())
    assert indexed.status("tb-1") == InstanceStatus.TERMINATED
    assert indexed.open_tasks("tb-1") == []


def test_reindex_keeps_an_index_a_live_operation_stored_beside_a_task_left_waiting(
    db: sa.Engine,
) -> None:
    """The manager claimed (WAITING), then a step with ``amount: 9000`` routed the instance
    to the director: the live index lists the director's task and the stored variables say
    9000. A full reindex computes the same index and must not refuse the row for the
    manager's WAITING state."""
    ex = executor(db, index=True)
    assert approve(ex, "lv-1", "employee", amount=1)
    assert ex.claim_task("oa", ctx("lv-1", "manager")) is not None
    assert ex.claim_task("oa", ctx("lv-1", "director", amount=9000)) is not None
    assert [t.node_id for t in ex.open_tasks("lv-1")] == ["director"]
    before = every_row(db)
    assert _bad_rows(db, everything=True) == []
    assert every_row(db) == before


@pytest.mark.parametrize("everything", [False, True])
def test_reindex_refuses_a_row_whose_variables_route_past_its_waiting_task_to_the_end(
    db: sa.Engine, everything: bool
) -> None:
    """The Go plugin's claim left the boss's task WAITING while the stored (first) variables
    route straight to the END: indexed on them, a running instance read COMPLETED — its task
    in no inbox, a withdraw refused. A bad row, nothing written."""
    engine = FlowEngine()
    engine.load(Graph.from_text(JUMP_TO_GATEWAY))
    ex = sql_workflow(db, engine, state_controller=ActorStateController(), index=everything)
    alice = FlowContext.of("st-1", {"actor": "alice", "amount": 100})
    assert ex.submit_task_if_waiting(ex.claim_task("g", alice), TaskAction.FORWARD, alice)
    plain = sql_workflow(db, engine, state_controller=ActorStateController(), index=False)
    assert plain.claim_task("g", FlowContext.of("st-1", {"actor": "boss"})) is not None
    _set_row(db, "st-1", vars='{"amount": 1}')
    before = every_row(db)
    bad = _bad_rows(db, engine, ActorStateController(), everything=everything)
    assert bad == [("st-1", "SnapshotError")]
    assert every_row(db) == before


def test_reindex_passes_over_a_row_that_holds_no_instance(db: sa.Engine) -> None:
    """A row with no graph, no states and no variables — what an ``index=False`` find on an
    unknown id by someone who may not operate its first task left behind — holds no instance:
    the pass goes on past it (it stopped there with "names no graph" on every run)."""
    plain = executor(db, index=False)
    approve(plain, "e-2", "employee", amount=1)
    with db.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO bpm_flow_repository (instant_id, create_time, update_time) "
                "VALUES ('e-1', :t, :t)"
            ).bindparams(sa.bindparam("t", type_=sa.DateTime())),
            {"t": datetime(2026, 1, 2)},
        )
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa()) == 1
    indexed = executor(db, index=True)
    assert indexed.status("e-1") is None
    assert [t.node_id for t in indexed.open_tasks("e-2")] == ["manager"]


def test_a_find_on_an_unknown_id_leaves_no_row_without_the_index(db: sa.Engine) -> None:
    """Without the index too, an operation that stores nothing leaves no row: the row its
    locking read created (all NULL) was kept, and a reindex could not index it."""
    plain = executor(db, index=False)
    assert plain.find_task("oa", ctx("u-1", "manager")) is not None
    assert plain.claim_task("oa", ctx("u-2", "manager")) is None
    assert _rows(db)["bpm_flow_repository"] == 0


def test_without_the_index_a_find_removes_a_blank_row_and_keeps_another_writer_s_empty_one(
    db: sa.Engine,
) -> None:
    """A row whose states, vars and graph are all NULL was left by a locking read (before such
    rows were removed): the next operation that stores nothing removes it. A row another
    writer left empty — ``{}`` states and vars, as a restart writes — is an instance: kept."""
    insert = sa.text(
        "INSERT INTO bpm_flow_repository (instant_id, states, vars, create_time, update_time) "
        "VALUES (:i, :s, :v, :t, :t)"
    ).bindparams(sa.bindparam("t", type_=sa.DateTime()))
    with db.begin() as conn:
        conn.execute(insert, {"i": "blank-1", "s": None, "v": None, "t": datetime(2026, 1, 2)})
        conn.execute(insert, {"i": "empty-1", "s": "{}", "v": "{}", "t": datetime(2026, 1, 2)})
    plain = executor(db, index=False)
    for instance_id in ("blank-1", "empty-1"):
        assert plain.claim_task("oa", ctx(instance_id, "manager")) is None
    assert raw_row(db, "blank-1") is None
    assert raw_row(db, "empty-1") == {"states": {}, "vars": {}, "graph": None}


def test_reindex_names_the_instance_whose_walk_or_graph_fails(db: sa.Engine) -> None:
    """A condition failing on a row's stored variables and a stored graph whose node id the
    SQL storage refuses are raised by code that does not know the instance: the reindex's
    error (its type kept) names the row it stopped at."""
    plain = executor(db, index=False)
    approve(plain, "cv-1", "employee", amount=1)
    _set_row(db, "cv-1", vars='{"amount": "abc"}')
    with pytest.raises(ConditionError, match="instance 'cv-1'") as raised:
        reindex(db, flow_engine_oa(), state_controller=controller_oa())
    assert getattr(raised.value, "instance_id", None) == "cv-1"
    _set_row(db, "cv-1", vars='{"amount": 1}')
    long_id = "n" * 65
    graph = {
        "id": "long",
        "layout": [
            {"id": "start", "type": "start", "link": long_id},
            {"id": long_id, "meta": {"actor": "x"}, "link": "end"},
            {"id": "end", "type": "end"},
        ],
    }
    approve(plain, "ug-1", "employee", amount=1)
    _set_row(db, "ug-1", graph=json.dumps(graph), states="{}")
    with pytest.raises(UnstorableGraphError, match="instance 'ug-1'"):
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True)


def test_reindex_runs_a_batch_again_after_a_lock_conflict(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadlock with a live transaction rolls a batch back (seen beside an application's
    traffic): the batch runs again — a pass over millions of rows stopped at the first one —
    and its bad row is reported once, after the attempt that committed. After
    ``BATCH_ATTEMPTS`` conflicts the error is raised, the batch's writes rolled back."""
    plain = executor(db, index=False)
    for instance_id in ("rb-1", "rb-2"):
        approve(plain, instance_id, "employee", amount=1)
    _set_row(db, "rb-2", graph=None, states='{"zz:apply": 1002}')  # graph zz: not loaded
    real_run = reindex_module._Batch.run
    conflicts = {"left": 2}

    def run_then_conflict(self: Any, conn: sa.Connection, last: int, size: int) -> Any:
        result = real_run(self, conn, last, size)  # its writes are in the transaction
        if conflicts["left"] and result[0]:
            conflicts["left"] -= 1
            raise ConcurrentSubmitError("rb-1", "deadlock (simulated)")
        return result

    delays: list[float] = []
    monkeypatch.setattr(reindex_module._Batch, "run", run_then_conflict)
    monkeypatch.setattr(importlib.import_module("flow_sqla.retry"), "_sleep", delays.append)
    bad: list[tuple[str, str]] = []

    def report(instance_id: str, error: Exception) -> None:
        bad.append((instance_id, type(error).__name__))

    indexed = reindex(db, flow_engine_oa(), state_controller=controller_oa(), on_bad_row=report)
    assert (indexed, bad, len(delays)) == (1, [("rb-2", "GraphNotFoundError")], 2)
    assert executor(db, index=True).status("rb-1") == InstanceStatus.RUNNING

    approve(plain, "rb-3", "employee", amount=1)
    before = every_row(db)
    conflicts["left"] = reindex_module.BATCH_ATTEMPTS
    with pytest.raises(ConcurrentSubmitError):
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), on_bad_row=report)
    assert every_row(db) == before
    assert len(bad) == 1


def test_reindex_names_a_graph_it_does_not_have_and_the_instance(db: sa.Engine) -> None:
    """A row that names its graph only by id (its states' keys), the graph not loaded: the
    error carries the graph id and the instance apart, for a caller to act on."""
    plain = executor(db, index=False)
    approve(plain, "ng-1", "employee", amount=1)
    _set_row(db, "ng-1", graph=None)
    with pytest.raises(GraphNotFoundError) as raised:
        reindex(db, FlowEngine(), state_controller=controller_oa())
    assert (raised.value.graph_id, raised.value.instance_id) == ("oa", "ng-1")
    assert str(raised.value) == "Flow graph not found: 'oa' (instance 'ng-1')"


def test_reindex_fails_with_the_library_s_errors_never_sqlalchemy_s(db: sa.Engine) -> None:
    """The batch's own statements (the window of ids) fail as RepositoryError too."""
    missing = FlowTables(repo_table="no_such_repo", task_table="no_such_task")
    with pytest.raises(RepositoryError) as raised:
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), tables=missing)
    assert not isinstance(raised.value, sa.exc.SQLAlchemyError)
    assert isinstance(raised.value.__cause__, sa.exc.DBAPIError)


def test_reindex_indexes_a_row_whose_states_were_cleared(db: sa.Engine) -> None:
    """The Go plugin's restart stores ``{}``: still an instance, open at its first task."""
    plain = executor(db, index=False)
    approve(plain, "e-1", "employee", amount=1)
    _set_row(db, "e-1", states="{}")
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa()) == 1
    indexed = executor(db, index=True)
    assert indexed.status("e-1") == InstanceStatus.RUNNING
    assert [t.node_id for t in indexed.open_tasks("e-1")] == ["apply"]
    assert indexed.reindex("oa", ctx("never-stored", "employee")) is False
    assert indexed.status("never-stored") is None
    assert _rows(db)["bpm_flow_repository"] == 1


def test_only_a_reindex_leaves_the_audit_columns(db: sa.Engine) -> None:
    """Index-only writes by anything else stamp who and when: a withdraw that closes no task
    (the instance is stuck before any), a first touch of a row written without the index."""
    stuck = Graph.from_dict(
        {
            "id": "st",
            "layout": [
                {"id": "start", "type": "start", "link": "apply"},
                {"id": "apply", "meta": {"actor": "employee"}, "link": "gw"},
                {
                    "id": "gw",
                    "type": "exclusive",
                    "link": [{"nextId": "boss", "when": "amount > 10"}],
                },
                {"id": "boss", "meta": {"actor": "boss"}, "link": "end"},
                {"id": "end", "type": "end"},
            ],
        }
    )
    engine = flow_engine_oa()
    engine.load(stuck)
    ex = sql_workflow(db, engine, state_controller=controller_oa())
    c = ctx("st-1", "employee", amount=1)
    assert ex.submit_task_if_waiting(ex.claim_task("st", c), TaskAction.FORWARD, c)
    assert ex.open_tasks("st-1") == [] and ex.status("st-1") == InstanceStatus.RUNNING
    _set_row(db, "st-1", update_time=datetime(2020, 1, 1))
    assert ex.withdraw("st", ctx("st-1", "admin"))
    updater, update_time, _ = _audit(db, "st-1")
    assert updater == "admin" and update_time > datetime(2020, 1, 1)


@pytest.mark.parametrize("index", [True, False])
def test_save_snapshot_stamps_the_audit_columns(db: sa.Engine, index: bool) -> None:
    ex = executor(db, index=index)
    approve(ex, "p-1", "employee", amount=1)
    _set_row(db, "p-1", update_time=datetime(2020, 1, 1))
    ex.state_repository.save_snapshot(  # type: ignore[attr-defined]
        ctx("p-1", "admin", amount=1), ex.engine.get_graph_or_throw("oa")
    )
    updater, update_time, _ = _audit(db, "p-1")
    assert updater == "admin" and update_time > datetime(2020, 1, 1)


def test_a_row_with_identity_keys_stays_cacheable(db: sa.Engine) -> None:
    """Go-plugin vars may hold identity keys, which the first write drops: the process cache
    must hold the row as stored (else the next claim sees a 'changed' row)."""
    plain = executor(db, index=False)
    approve(plain, "k-1", "employee", amount=1)
    _set_row(db, "k-1", vars='{"amount": 1, "actor": "employee"}')
    ex = executor(db, index=True, cache="process")
    assert ex.find_task("oa", ctx("k-1", "nobody")) is not None
    task = ex.claim_task("oa", ctx("k-1", "manager"))
    assert task is not None and task.state == TaskState.WAITING


def test_skipping_bad_rows_indexes_each_row_once(db: sa.Engine, monkeypatch: Any) -> None:
    from flow.workflow import WorkflowExecutor

    plain = executor(db, index=False)
    for n in range(12):
        approve(plain, f"q-{n}", "employee", amount=1)
        if n % 2:
            _set_row(db, f"q-{n}", graph='"missing"', states='{"missing:apply": 1002}')
    calls: list[str] = []
    original = WorkflowExecutor.reindex

    def counted(self: Any, graph: Any, ctx: Any, **kw: Any) -> bool:
        calls.append(ctx.instance_id)
        return original(self, graph, ctx, **kw)

    monkeypatch.setattr(WorkflowExecutor, "reindex", counted)
    bad: list[str] = []
    indexed = reindex(
        db, flow_engine_oa(), state_controller=controller_oa(), batch_size=5,
        on_bad_row=lambda instance_id, error: bad.append(instance_id),
    )  # fmt: skip
    assert indexed == 6 and bad == [f"q-{n}" for n in range(1, 12, 2)]
    assert sorted(calls) == sorted(f"q-{n}" for n in range(0, 12, 2))


def test_a_lock_conflict_is_not_a_bad_row(db: sa.Engine) -> None:
    if db.dialect.name != "mysql":
        pytest.skip("the lock wait timeout is set per session on MariaDB/MySQL")
    plain = executor(db, index=False)
    for n in range(3):
        approve(plain, f"l-{n}", "employee", amount=1)
    impatient = sa.create_engine(
        db.url, connect_args={"init_command": "SET innodb_lock_wait_timeout = 1"}
    )
    holder = db.connect()
    try:
        held = holder.begin()
        holder.execute(
            sa.text("SELECT id FROM bpm_flow_repository WHERE instant_id = 'l-1' FOR UPDATE")
        ).all()
        bad: list[str] = []
        with pytest.raises(ConcurrentSubmitError):
            reindex(
                impatient,
                flow_engine_oa(),
                state_controller=controller_oa(),
                on_bad_row=lambda i, e: bad.append(i),
            )
        held.rollback()
    finally:
        holder.close()
        impatient.dispose()
    assert bad == []
    assert executor(db, index=True).status("l-0") is None  # the batch was rolled back


def test_reindex_decides_on_the_variables_of_the_row_it_locks(
    db: sa.Engine, monkeypatch: Any
) -> None:
    """At REPEATABLE READ a plain read in the batch's transaction returns the row as of the
    batch's first read; a change committed meanwhile is seen only by the locking read, which
    the gateways must then decide with."""
    import importlib

    reindex_module = importlib.import_module(
        "flow_sqla.reindex"
    )  # the package re-exports the function

    plain = sql_workflow(db, flow_engine(), state_controller=controller(), index=False)
    alice = FlowContext.of("z-1", {"actor": "alice", "amount": 1})
    assert plain.submit_task_if_waiting(plain.claim_task("excl", alice), TaskAction.FORWARD, alice)
    original = reindex_module._Batch._index

    def changed_meanwhile(self: Any, conn: Any, row: Any) -> bool:
        _set_row(db, row.instant_id, vars='{"amount": 9000}')  # another writer commits
        return original(self, conn, row)

    monkeypatch.setattr(reindex_module._Batch, "_index", changed_meanwhile)
    assert reindex(db, flow_engine(), state_controller=controller()) == 1
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    assert [t.node_id for t in ex.open_tasks("z-1")] == ["director"]


def test_a_database_error_rolls_the_whole_batch_back_even_when_skipping_bad_rows(
    db: sa.Engine, monkeypatch: Any
) -> None:
    """With on_bad_row each row runs in a savepoint; on SQLite the first SAVEPOINT must not
    open (and its RELEASE commit) the batch's transaction."""
    import importlib

    reindex_module = importlib.import_module("flow_sqla.reindex")
    plain = executor(db, index=False)
    for n in range(3):
        approve(plain, f"d-{n}", "employee", amount=1)
    original = reindex_module._Batch._index

    def failing_on_the_second(self: Any, conn: Any, row: Any) -> bool:
        if row.instant_id == "d-1":
            raise RepositoryError("the server went away", instance_id=row.instant_id)
        return bool(original(self, conn, row))

    monkeypatch.setattr(reindex_module._Batch, "_index", failing_on_the_second)
    with pytest.raises(RepositoryError):
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), on_bad_row=print)
    indexed = executor(db, index=True)
    assert [indexed.status(f"d-{n}") for n in range(3)] == [None, None, None]


def test_an_everything_pass_resumes_after_its_checkpoint(db: sa.Engine) -> None:
    plain = executor(db, index=False)
    for n in range(5):
        approve(plain, f"r-{n}", "employee", amount=1)
    passed: list[int] = []
    everything = {"everything": True, "state_controller": controller_oa(), "batch_size": 2}
    assert reindex(db, flow_engine_oa(), checkpoint=passed.append, **everything) == 5
    assert len(passed) == 3 and passed == sorted(passed)
    assert reindex(db, flow_engine_oa(), after=passed[0], **everything) == 3
    assert reindex(db, flow_engine_oa(), after=passed[-1], **everything) == 0


def test_reindex_refuses_a_batch_size_or_start_out_of_range(db: sa.Engine) -> None:
    for bad in ({"batch_size": 0}, {"batch_size": MAX_BATCH_SIZE + 1}, {"after": -1}):
        with pytest.raises(ValueError):
            reindex(db, flow_engine_oa(), state_controller=controller_oa(), **bad)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"everything": "no"}, "everything must be True or False"),
        ({"batch_size": "500"}, "batch_size must be an integer"),
        ({"batch_size": 2.5}, "batch_size must be an integer"),
        ({"batch_size": None}, "batch_size must be an integer"),
        ({"after": "3"}, "after must be an integer"),
        ({"after": 1.5}, "after must be an integer"),
        ({"progress": 5}, "progress must be callable"),
        ({"checkpoint": 5}, "checkpoint must be callable"),
        ({"on_bad_row": 5}, "on_bad_row must be callable"),
    ],
    ids=repr,
)
def test_reindex_refuses_arguments_of_the_wrong_type_before_any_batch(
    db: sa.Engine, bad: dict[str, Any], named: str
) -> None:
    """``everything="no"`` ran the full pass; the others failed naming nothing, or (a hook)
    only after the first batch had committed."""
    approve(executor(db, index=False), "w-1", "employee", amount=1)
    with pytest.raises(TypeError, match=named):
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), **{"batch_size": 1, **bad})
    assert executor(db, index=True).status("w-1") is None  # not indexed


def test_a_todo_row_id_is_never_handed_out_twice(db: sa.Engine) -> None:
    """Ids are the inbox's cursors: a task closed and opened again is a new item after any
    cursor handed out before (SQLite gave a new row the id of the newest one deleted)."""
    ex = executor(db, index=True)
    manager = FlowContext.of(None, {"actor": "manager"})
    employee = FlowContext.of(None, {"actor": "employee"})
    assert approve(ex, "t-1", "employee", amount=1)
    (first,) = ex.inbox(manager)
    assert ex.claim_task("oa", ctx("t-1", "manager")) is not None
    assert ex.send_back(first, ctx("t-1", "manager"))  # the employee's task again
    (again,) = ex.inbox(employee)
    assert again.cursor > first.cursor
    assert approve(ex, "t-1", "employee", amount=1)
    (last,) = ex.inbox(manager)
    assert last.cursor > again.cursor
    assert ex.inbox(manager, after=first.cursor) == [last]


def flow_engine_oa() -> Any:
    from _support import flow_engine as oa_engine

    return oa_engine()


def controller_oa() -> Any:
    from flow.workflow import ActorStateController

    return ActorStateController()


def test_todo_rows_are_deleted_and_restated_through_the_unique_key_whatever_the_statistics(
    db: sa.Engine,
) -> None:
    """MySQL/MariaDB: the DELETE and UPDATE by key read the todo table as a const table
    through ``(instant_id, node_id, candidate)`` — never a walk of ``(candidate, id)``, which
    would lock every task of that candidate and let unrelated instances deadlock. Checked on
    a table whose statistics were taken while it was empty."""
    if db.dialect.name not in ("mysql", "mariadb"):
        pytest.skip("the join form is MySQL/MariaDB's")
    from flow_sqla._prepared import PreparedStatement
    from flow_sqla._todo import TodoTable
    from flow_sqla.tables import FlowTables

    with db.begin() as conn:
        conn.exec_driver_sql("ANALYZE TABLE bpm_flow_todo")  # statistics of an empty table
    ex = executor(db, index=True)
    for n in range(20):
        approve(ex, f"plan-{n}", "employee", amount=1)  # each opens the manager's task
    todo = TodoTable(FlowTables(), keys_through_join=True)
    key = {"k_instant_id": "plan-3", "k_node_id": "manager", "k_candidate": "actor:manager"}
    for stmt, params in ((todo._delete, key), (todo._update, {**key, "k_state": 1001})):
        prepared = PreparedStatement(stmt, db.dialect)
        with db.connect() as conn:
            plan = conn.exec_driver_sql("EXPLAIN " + prepared.sql, prepared.bind(params)).all()
        by_table = {row[2]: row for row in plan}
        assert by_table["bpm_flow_todo"][3] == "const", plan
        assert by_table["bpm_flow_todo"][5] == "uq_bpm_flow_todo_task", plan


def test_a_forward_jump_onto_a_gateway_is_indexed_as_its_states_give(db: sa.Engine) -> None:
    """The jump leaves the gateway WAITING; a gateway has no task code to wait on, so the
    instance is complete: never listed as running with no open task (as in memory)."""
    engine = FlowEngine()
    engine.load(Graph.from_text(JUMP_TO_GATEWAY))
    wf = sql_workflow(db, engine, state_controller=ActorStateController())
    alice = FlowContext.of("gj", {"actor": "alice", "amount": 1})
    wf.claim_task("g", alice)
    wf.submit_task_at("g", "gw", TaskAction.FORWARD_JUMP, alice)
    assert (wf.status("gj"), wf.open_tasks("gj")) == (InstanceStatus.COMPLETED, [])
    assert wf.instances(status=InstanceStatus.RUNNING) == []


# -- a stored index that does not read: a typed error, rebuilt by a reindex of every row ------


@pytest.mark.parametrize(
    "damage",
    [
        {"status": 7},  # a code no status has
        {"open_tasks": '[{"node": "manager"}]'},  # an open task without its fields
        {"open_tasks": '{"node": "manager"}'},  # not a list
    ],
)
def test_an_unreadable_stored_index_is_a_typed_error_and_a_full_reindex_rebuilds_it(
    db: sa.Engine, damage: dict[str, Any]
) -> None:
    ex = executor(db, index=True)
    for instance_id in ("ix-good", "ix-bad"):
        approve(ex, instance_id, "employee", amount=1)
    before = _index_rows(db)
    # Another writer damages the row's index and leaves a todo row no task has.
    _set_row(db, "ix-bad", **damage)
    _stray_todo_row(db, "ix-bad", "stale", "Stale", 1001, "actor:manager")
    if "status" in damage:
        with pytest.raises(SnapshotError, match="'ix-bad'"):
            ex.status("ix-bad")
        with pytest.raises(SnapshotError, match="'ix-bad'"):
            ex.instances()
    for operation in (
        lambda: ex.claim_task("oa", ctx("ix-bad", "manager")),
        lambda: ex.withdraw("oa", ctx("ix-bad", "employee")),
    ):
        with pytest.raises(SnapshotError, match="'ix-bad'") as raised:
            operation()
        assert "flow reindex --all" in str(raised.value)
    assert ex.open_tasks("ix-good")[0].node_id == "manager"  # the others read on
    # The default pass takes only rows without a status; every row's pass rebuilds it.
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True) == 2
    assert _index_rows(db) == before
    for instance_id in ("ix-good", "ix-bad"):
        assert approve(ex, instance_id, "manager")
        assert ex.status(instance_id) == InstanceStatus.COMPLETED


def test_a_reindex_reads_a_time_no_driver_reads_as_the_present(db: sa.Engine) -> None:
    """PostgreSQL's 'infinity' and, on SQLite, text that is no time: the window's fetch does
    not fail on them; the row is indexed as of now and a finish time that does not read is
    rebuilt."""
    plain = executor(db, index=False)
    approve(plain, "t-1", "employee", amount=1)
    approve(plain, "t-2", "employee", amount=1)
    odd = {"postgresql": "infinity", "sqlite": "garbage"}.get(db.dialect.name)
    if odd is None:
        pytest.skip(f"{db.dialect.name} refuses a time that is not one")
    with db.begin() as conn:
        conn.execute(
            sa.text("UPDATE bpm_flow_repository SET update_time = :t WHERE instant_id = 't-1'"),
            {"t": odd},
        )
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa()) == 2
    indexed = executor(db, index=True)
    assert [indexed.status(i) for i in ("t-1", "t-2")] == [InstanceStatus.RUNNING] * 2
    (task,) = indexed.open_tasks("t-1")
    assert task.node_id == "manager"


def test_a_full_reindex_keeps_a_withdrawn_status_whatever_the_session_date_style(
    db: sa.Engine,
) -> None:
    """The pass reads times as text to find those no driver reads; PostgreSQL's text follows
    the session's DateStyle, and a finish time judged unreadable would have cleared the
    WITHDRAWN status that only the stored index knows."""
    if db.dialect.name != "postgresql":
        _withdrawn_survives_a_full_reindex(db)
        return
    styled = sa.create_engine(db.url, connect_args={"options": "-c datestyle=SQL,DMY"})
    try:
        _withdrawn_survives_a_full_reindex(styled)
    finally:
        styled.dispose()


def _withdrawn_survives_a_full_reindex(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    approve(ex, "w-1", "employee", amount=1)
    assert ex.withdraw("oa", ctx("w-1", "employee"))
    before = _index_rows(db)
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True)
    assert ex.status("w-1") == InstanceStatus.WITHDRAWN
    assert _index_rows(db) == before


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("bpm_flow_todo", "create_time", "time"),
        ("bpm_flow_todo", "create_time", "bc time"),
        ("bpm_flow_todo", "lineage", "json"),
        ("bpm_flow_todo", "lineage", "deep json"),
        ("bpm_flow_repository", "update_time", "time"),
    ],
)
def test_a_value_no_driver_reads_is_a_typed_error_naming_its_instance(
    db: sa.Engine, table: str, column: str, value: str
) -> None:
    """A hand-edited time (SQLite text, PostgreSQL 'infinity') or JSON text fails the fetch
    deep in the column type or driver; the reads say which instance, table and column, and
    todo rows are rebuilt by a full reindex."""
    odd = {
        ("sqlite", "time"): "garbage",
        ("sqlite", "json"): "not json",
        # valid JSON nested deeper than Python decodes: a raw RecursionError escaped the reads
        ("sqlite", "deep json"): _TOO_DEEP,
        ("postgresql", "deep json"): _TOO_DEEP,
        ("postgresql", "time"): "infinity",
        ("postgresql", "bc time"): "0044-03-15 BC",  # to_char's YYYY would drop the era
    }.get((db.dialect.name, value))
    if odd is None:
        pytest.skip(f"{db.dialect.name} refuses such a {value} in its column")
    if odd == _TOO_DEEP and _DECODES_TOO_DEEP:
        pytest.skip("this Python's json decodes JSON nested 5,000 deep: no decoder error")
    ex = executor(db, index=True)
    for instance_id in ("v-good", "v-bad"):
        approve(ex, instance_id, "employee", amount=1)
    with db.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE {table} SET {column} = :v WHERE instant_id = 'v-bad'"), {"v": odd}
        )
    reads = {
        "bpm_flow_todo": [
            lambda: ex.inbox(ctx("q", "manager")),
            lambda: ex.open_tasks("v-bad"),
        ],
        "bpm_flow_repository": [lambda: ex.instances()],
    }[table]
    for read in reads:
        with pytest.raises(SnapshotError, match="'v-bad'") as raised:
            read()
        assert f"{table}.{column} holds" in str(raised.value)
    assert ex.open_tasks("v-good")[0].node_id == "manager"  # other rows read on
    if table == "bpm_flow_todo":
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True)
        assert [t.instance_id for t in ex.inbox(ctx("q", "manager"))] == ["v-good", "v-bad"]


def _todo_rows(db: sa.Engine) -> list[tuple[Any, ...]]:
    """Every todo row whole (id included), in id order."""
    with db.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                sa.text(
                    "SELECT id, instant_id, graph_id, node_id, node_name, state, candidate, "
                    f"lineage, create_time FROM bpm_flow_todo WHERE {_TASK_ROWS} ORDER BY id"
                )
            )
        ]


def test_a_full_reindex_repairs_todo_rows_edited_by_hand_and_leaves_the_others(
    db: sa.Engine,
) -> None:
    """The rows of an instance whose own stored index reads fine, but whose todo rows were
    deleted, edited or joined by a stray row, are rewritten from that index; the todo rows
    of every other instance keep their ids (their place in the inboxes)."""
    ex = executor(db, index=True)
    for instance_id in ("r-good", "r-gone", "r-edited", "r-stray"):
        approve(ex, instance_id, "employee", amount=1)
    before = _todo_rows(db)
    claimed = ctx("r-edited", "manager")
    assert ex.claim_task("oa", claimed) is not None  # WAITING: its row's state re-stated
    expected = _todo_rows(db)
    _stray_todo_row(db, "r-stray", "manager", "Manager approval", 0, "actor:mallory")
    with db.begin() as conn:
        conn.execute(sa.text("DELETE FROM bpm_flow_todo WHERE instant_id = 'r-gone'"))
        conn.execute(
            sa.text(
                "UPDATE bpm_flow_todo SET state = 0, node_name = 'x', lineage = '[\"y\"]' "
                "WHERE instant_id = 'r-edited'"
            )
        )
    assert reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True) == 4
    after = _todo_rows(db)
    # The good instance's row is untouched (same id); the repaired ones are new rows with
    # exactly the values the operations wrote.
    assert [r for r in after if r[1] == "r-good"] == [r for r in before if r[1] == "r-good"]
    assert sorted(r[1:] for r in after) == sorted(r[1:] for r in expected)
    assert approve(ex, "r-edited", "manager") and approve(ex, "r-stray", "manager")
    assert [t.instance_id for t in ex.inbox(ctx("q", "manager"))] == ["r-good", "r-gone"]
    assert ex.inbox(ctx("q", "mallory")) == []


def test_send_back_clears_a_sub_graph_called_on_the_way_so_its_gateway_decides_again(
    db: sa.Engine,
) -> None:
    """The stored variables and states of a sub-graph called between the application and
    the approver's task: after a send-back the sub-graph runs again on the new amount (its
    states kept, the third application — 500 — went to the manager)."""
    engine = FlowEngine()
    engine.load(Graph.from_text(GRADE))
    engine.load(Graph.from_text(GRADED))
    ex = sql_workflow(db, engine, state_controller=ActorStateController(), index=True)
    assert sent_back_twice_routes(ex, "sb-1") == [["director"], ["manager"], ["director"]]
    row = raw_row(db, "sb-1")
    assert row is not None and row["vars"]["lvl"] == "big"


def test_send_back_through_an_inclusive_split_that_took_only_its_branch(db: sa.Engine) -> None:
    """As in memory: the split's state and the task's go, P is WAITING again and its todo
    row is back in P's inbox; forwarding P re-evaluates the split's conditions."""
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    ask = FlowContext.of("in-1", {"amount": 1, "actor": "alice"})
    assert ex.submit_task_if_waiting(ex.claim_task("incl", ask), TaskAction.FORWARD, ask)
    boss = FlowContext.of("in-1", {"amount": 1, "role": "boss"})
    task = ex.claim_task("incl", boss)
    assert task is not None and task.node_id == "boss"
    assert ex.send_back(task, boss)
    assert [(t.node_id, t.state) for t in ex.inbox(FlowContext.of(None, {"actor": "alice"}))] == [
        ("ask", TaskState.WAITING)
    ]
    assert ex.inbox(FlowContext.of(None, {"role": "boss"})) == []
    again = FlowContext.of("in-1", {"amount": 500, "actor": "alice"})
    assert ex.submit_task_if_waiting(ex.claim_task("incl", again), TaskAction.FORWARD, again)
    assert sorted(t.node_id for t in ex.open_tasks("in-1")) == ["boss", "hr", "it"]


def test_a_full_reindex_repairs_from_the_latest_row_not_the_batchs_snapshot(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At REPEATABLE READ (MariaDB's default) the batch's first read fixes a snapshot; an
    approval another service commits on an instance before the pass reaches it must be what
    the repair compares the todo rows with — else it re-inserts the task just approved."""
    if db.dialect.name == "sqlite":
        pytest.skip("SQLite serializes writers on the whole file: no commit lands in a batch")
    reindex_module = importlib.import_module("flow_sqla.reindex")
    ex = executor(db, index=True)
    for instance_id in ("s-first", "s-x"):
        approve(ex, instance_id, "employee", amount=1)
    _stray_todo_row(db, "s-x", "manager", "Manager approval", 0, "actor:mallory")
    index_one = reindex_module._Batch._index

    def approved_meanwhile(batch: Any, conn: Any, row: Any) -> bool:
        if row.instant_id == "s-x":  # another service, its own transaction, committed now
            other = threading.Thread(target=approve, args=(ex, "s-x", "manager"))
            other.start()
            other.join(TIMEOUT)
        return bool(index_one(batch, conn, row))

    monkeypatch.setattr(reindex_module._Batch, "_index", approved_meanwhile)
    reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True)
    assert ex.status("s-x") == InstanceStatus.COMPLETED
    assert ex.open_tasks("s-x") == []
    assert [t.instance_id for t in ex.inbox(ctx("q", "manager"))] == ["s-first"]


def test_a_number_in_a_sqlite_time_column_is_a_typed_error_naming_its_instance(
    db: sa.Engine,
) -> None:
    """SQLite keeps a number in a DATETIME column as a number (a hand edit): the column type
    fails with a TypeError, which must come out as the same SnapshotError as bad text."""
    if db.dialect.name != "sqlite":
        pytest.skip(f"{db.dialect.name} refuses a number in a time column")
    ex = executor(db, index=True)
    for instance_id in ("n-good", "n-bad"):
        approve(ex, instance_id, "employee", amount=1)
    with db.begin() as conn:
        conn.execute(
            sa.text("UPDATE bpm_flow_todo SET create_time = 20240101 WHERE instant_id = 'n-bad'")
        )
        conn.execute(
            sa.text(
                "UPDATE bpm_flow_repository SET update_time = 1700000000 WHERE instant_id = 'n-bad'"
            )
        )
    for read, where in (
        (lambda: ex.open_tasks("n-bad"), "bpm_flow_todo.create_time"),
        (lambda: ex.instances(), "bpm_flow_repository.update_time"),
    ):
        with pytest.raises(SnapshotError, match="'n-bad'") as raised:
            read()
        assert f"{where} holds" in str(raised.value)


REVIEW = """
id: rv
layout:
  - {id: start, type: start, link: review}
  - {id: review, meta: {actor: employee}, link: approve}
  - {id: approve, meta: {actor: manager}, link: end}
  - {id: end, type: end}
"""


def test_a_full_reindex_does_not_hold_neighbouring_instances_new_tasks(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forward on an instance later in the batch opens a todo row whose key sorts right
    after an instance the batch already checked; it must not wait for the batch (at
    MySQL/MariaDB's REPEATABLE READ a locking read of the checked rows locked that gap, and
    the batch then deadlocked on the forwarded instance's row)."""
    if db.dialect.name == "sqlite":
        pytest.skip("SQLite serializes writers on the whole file: no commit lands in a batch")
    engine = FlowEngine()
    engine.load(Graph.from_text(REVIEW))
    ex = sql_workflow(db, engine, state_controller=ActorStateController("actor"), index=True)
    for instance_id in ("g-b", "g-c", "g-d"):  # one batch; todo keys g-b < g-c < g-d
        assert ex.claim_task("rv", FlowContext.of(instance_id, {"actor": "employee"}))
    short_wait = (
        {"options": "-c lock_timeout=1000"}
        if db.dialect.name == "postgresql"
        else {"init_command": "SET SESSION innodb_lock_wait_timeout = 1"}
    )
    impatient = sa.create_engine(db.url, connect_args=short_wait)
    other = sql_workflow(
        impatient, engine, state_controller=ActorStateController("actor"), index=True
    )
    outcome: list[object] = []

    def forward() -> None:
        c = FlowContext.of("g-c", {"actor": "employee"})
        try:
            outcome.append(
                other.submit_task_if_waiting(other.claim_task("rv", c), TaskAction.FORWARD, c)
            )
        except ConcurrentSubmitError as exc:
            outcome.append(exc)

    reindex_module = importlib.import_module("flow_sqla.reindex")
    index_one = reindex_module._Batch._index

    def forward_after_the_first(batch: Any, conn: Any, row: Any) -> bool:
        done = bool(index_one(batch, conn, row))
        if row.instant_id == "g-b":  # another service forwards g-c now, inside the batch
            thread = threading.Thread(target=forward)
            thread.start()
            thread.join(TIMEOUT)
        return done

    monkeypatch.setattr(reindex_module._Batch, "_index", forward_after_the_first)
    try:
        assert (
            reindex(db, engine, state_controller=ActorStateController("actor"), everything=True)
            == 3
        )
    finally:
        impatient.dispose()
    assert outcome == [True]
    assert [t.node_id for t in ex.open_tasks("g-c")] == ["approve"]


def test_an_instance_driven_on_through_another_graph_keeps_no_todo_row_of_the_old_one(
    db: sa.Engine,
) -> None:
    """Restarted through another graph whose task has the same node id and candidate, the
    instance's open task and its inbox entry name the new graph (the todo row is not kept
    from the old one because its key matches)."""
    engine = FlowEngine()
    engine.load(Graph.from_text(SWITCH_A))
    engine.load(Graph.from_text(SWITCH_B))
    ex = sql_workflow(db, engine, state_controller=ActorStateController("actor", "role"))
    hr = FlowContext.of(None, {"role": "hr"})
    ex.claim_task("switch-a", FlowContext.of("sw-1", {"role": "hr"}))
    ex.submit_task_at("switch-b", "t", TaskAction.RESTART, FlowContext.of("sw-1", {"role": "hr"}))
    ex.claim_task("switch-b", FlowContext.of("sw-1", {"role": "hr"}))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-1")] == [("switch-b", "t")]
    assert [(t.graph_id, t.node_id) for t in ex.inbox(hr, graph_id="switch-b")] == [
        ("switch-b", "t")
    ]
    assert ex.inbox(hr, graph_id="switch-a") == []


_OTHER_GRAPH = {
    "claim_task": lambda ex, c: ex.claim_task("par", c),
    "find_task": lambda ex, c: ex.find_task("par", c),
    "find_next_tasks": lambda ex, c: ex.find_next_tasks("par", c),
    "submit_task_at": lambda ex, c: ex.submit_task_at("par", "draft", TaskAction.FORWARD, c),
}


def _apply(ex: WorkflowExecutor, instance_id: str, conn: sa.Connection | None = None) -> None:
    """Alice's approval of a new ``excl`` instance (the manager's task opens)."""
    c = FlowContext.of(instance_id, {"actor": "alice", "amount": 1}, connection=conn)
    assert ex.submit_task_if_waiting(ex.claim_task("excl", c), TaskAction.FORWARD, c)


@pytest.mark.parametrize("operation", sorted(_OTHER_GRAPH))
@pytest.mark.parametrize("caller_transaction", [False, True], ids=["own", "caller"])
def test_an_operation_naming_another_graph_leaves_the_instance_and_its_inbox_rows(
    db: sa.Engine, operation: str, caller_transaction: bool
) -> None:
    """The instance runs ``excl``; a claim, find or submit naming ``par`` raises
    GraphMismatchError and writes nothing — in its own unit of work or in the caller's
    transaction, which stays usable (its own row commits)."""
    ex = sql_workflow(db, flow_engine(), state_controller=controller())
    _apply(ex, "x-1")
    before = (_rows(db), _index_rows(db), raw_row(db, "x-1"))
    alice = {"actor": "alice", "amount": 1}
    if caller_transaction:
        with db.begin() as conn:
            with pytest.raises(GraphMismatchError, match="'x-1' runs graph 'excl'"):
                _OTHER_GRAPH[operation](ex, FlowContext.of("x-1", alice, connection=conn))
            _apply(ex, "x-2", conn)
        assert ex.status("x-2") == InstanceStatus.RUNNING
    else:
        with pytest.raises(GraphMismatchError, match="'x-1' runs graph 'excl'"):
            _OTHER_GRAPH[operation](ex, FlowContext.of("x-1", alice))
    assert raw_row(db, "x-1") == before[2]
    assert [r for r in _index_rows(db) if r[0] == "x-1"] == [r for r in before[1] if r[0] == "x-1"]
    boss = FlowContext.of(None, {"role": "boss"})
    assert [(t.instance_id, t.graph_id, t.node_id) for t in ex.inbox(boss)][:1] == [
        ("x-1", "excl", "manager")
    ]


def test_an_instance_started_over_as_another_graph_stays_on_it_through_a_full_reindex(
    db: sa.Engine,
) -> None:
    """A RESTART naming another graph starts the instance over as that graph's: the row's
    graph document follows, so a full reindex (which takes the graph from it) does not walk
    the old graph over the new one's states and re-open the old graph's task."""
    engine = FlowEngine()
    engine.load(Graph.from_text(SWITCH_A))
    engine.load(Graph.from_text(SWITCH_B))
    hr_controller = ActorStateController("actor", "role")
    ex = sql_workflow(db, engine, state_controller=hr_controller)

    def hr() -> FlowContext:
        return FlowContext.of("sw-r", {"role": "hr"})

    ex.claim_task("switch-a", hr())
    ex.submit_task_at("switch-b", "t", TaskAction.RESTART, hr())
    task = ex.claim_task("switch-b", hr())
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, hr())
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-r")] == [("switch-b", "u")]
    row = raw_row(db, "sw-r")
    assert row is not None and row["graph"]["id"] == "switch-b"
    assert reindex(db, engine, state_controller=hr_controller, everything=True) == 1
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-r")] == [("switch-b", "u")]


def _switch_executor(db: sa.Engine, *, index: bool = True) -> WorkflowExecutor:
    engine = FlowEngine()
    engine.load(Graph.from_text(SWITCH_A))
    engine.load(Graph.from_text(SWITCH_B))
    return sql_workflow(
        db, engine, state_controller=ActorStateController("actor", "role"), index=index
    )


def _hr(instance_id: str) -> FlowContext:
    return FlowContext.of(instance_id, {"role": "hr"})


def test_a_restart_as_another_graph_of_an_instance_with_no_state_left_moves_it(
    db: sa.Engine,
) -> None:
    """The states are empty already (an earlier RESTART): the RESTART naming another graph
    still changes the instance's graph, as in memory."""
    ex = _switch_executor(db)
    ex.claim_task("switch-a", _hr("sw-e"))
    ex.submit_task_at("switch-a", "t", TaskAction.RESTART, _hr("sw-e"))
    ex.submit_task_at("switch-b", "t", TaskAction.RESTART, _hr("sw-e"))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-e")] == [("switch-b", "t")]
    assert ex.claim_task("switch-b", _hr("sw-e")) is not None
    row = raw_row(db, "sw-e")
    assert row is not None and row["graph"]["id"] == "switch-b"


def test_a_restart_as_another_graph_of_a_row_never_indexed_survives_a_full_reindex(
    db: sa.Engine,
) -> None:
    """Written with ``index=False`` (or by the Go plugin), the row has no stored graph id: the
    RESTART still writes the new graph's document, which a reindex then reads."""
    _switch_executor(db, index=False).claim_task("switch-a", _hr("sw-n"))
    ex = _switch_executor(db)
    ex.submit_task_at("switch-b", "t", TaskAction.RESTART, _hr("sw-n"))
    task = ex.claim_task("switch-b", _hr("sw-n"))
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, _hr("sw-n"))
    engine = ex.engine
    reindex(db, engine, state_controller=ActorStateController("actor", "role"), everything=True)
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-n")] == [("switch-b", "u")]


_CALLS_SUB = """
id: calls
layout:
  - {id: s, type: start, link: call}
  - {id: call, task: "#sub", link: t}
  - {id: t, meta: {role: hr}, link: e}
  - {id: e, type: end}
"""
_SUB = """
id: sub
layout:
  - {id: s, type: start, link: y}
  - {id: y, task: "v = 1", link: e}
  - {id: e, type: end}
"""


def test_a_row_never_indexed_holding_only_a_sub_graph_s_states_is_not_taken_for_another_graph(
    db: sa.Engine,
) -> None:
    """Before it is indexed, an instance is not judged by its state keys: after a BACK the
    row of graph ``calls`` holds only ``sub:`` states, and claims of ``calls`` still work."""
    engine = FlowEngine()
    engine.load(Graph.from_text(_CALLS_SUB))
    engine.load(Graph.from_text(_SUB))
    controller = ActorStateController("actor", "role")
    old = sql_workflow(db, engine, state_controller=controller, index=False)
    old.claim_task("calls", _hr("sub-1"))
    old.submit_task_at("calls", "t", TaskAction.BACK, _hr("sub-1"))
    row = raw_row(db, "sub-1")
    assert row is not None and list(row["states"]) == ["sub:y"]
    ex = sql_workflow(db, engine, state_controller=controller)
    task = ex.claim_task("calls", _hr("sub-1"))
    assert task is not None and task.node.id == "t"
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sub-1")] == [("calls", "t")]


def test_a_sub_graph_s_task_claimed_on_its_own_id_keeps_the_instance_on_its_root_graph(
    db: sa.Engine,
) -> None:
    engine = FlowEngine()
    engine.load(Graph.from_text(SUB_GRAPH_REVIEW))
    engine.load(Graph.from_text(CALLS_SUB_GRAPH))
    ex = sql_workflow(db, engine, state_controller=ActorStateController())
    applicant = FlowContext.of("m-1", {"actor": "applicant"})
    reviewer = FlowContext.of("m-1", {"actor": "reviewer"})
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, applicant)
    check = ex.claim_task("review", reviewer)
    assert check is not None and ex.submit_task_if_waiting(check, TaskAction.FORWARD, reviewer)
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("m-1", "main")]
    done = ex.claim_task("main", applicant)
    assert done is not None and done.node.id == "done"
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("m-1")] == [("main", "done")]
    row = raw_row(db, "m-1")
    assert row is not None and row["graph"]["id"] == "main"


@pytest.mark.parametrize("submit", ["submit_task", "submit_task_at"])
def test_a_restart_of_a_sub_graph_s_task_starts_the_instance_over_as_its_root_graph(
    db: sa.Engine, submit: str
) -> None:
    """A RESTART submitted on the sub-graph's task (claimed on the sub-graph's id, as the
    reference does) clears every state: the instance starts over as the root graph's. It was
    re-rooted on the sub-graph — indexed and stored as ``review``, its root graph's task
    after the call lost, and a claim on ``main`` refused with GraphMismatchError."""
    ex = _main_and_review(db)
    applicant = FlowContext.of("rs-1", {"actor": "applicant"})
    reviewer = FlowContext.of("rs-1", {"actor": "reviewer"})
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, applicant)
    check = ex.claim_task("review", reviewer)
    assert check is not None and check.node.id == "check"
    if submit == "submit_task":
        ex.submit_task(check, TaskAction.RESTART, reviewer)
    else:
        ex.submit_task_at("review", "check", TaskAction.RESTART, reviewer)
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("rs-1", "main")]
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("rs-1")] == [("main", "apply")]
    row = raw_row(db, "rs-1")
    assert row is not None and row["graph"]["id"] == "main"
    again = ex.claim_task("main", applicant)
    assert again is not None and again.node.id == "apply"


# -- a row never indexed: its state keys tell which graph it runs ------------------------------
_SWITCH_B_OPERATIONS = {
    "claim_task": lambda ex, c: ex.claim_task("switch-b", c),
    "find_task": lambda ex, c: ex.find_task("switch-b", c),
    "find_next_tasks": lambda ex, c: ex.find_next_tasks("switch-b", c),
    "submit_task_at": lambda ex, c: ex.submit_task_at("switch-b", "t", TaskAction.FORWARD, c),
    "reindex": lambda ex, c: ex.reindex("switch-b", c),
}


@pytest.mark.parametrize("operation", sorted(_SWITCH_B_OPERATIONS))
def test_an_operation_naming_another_graph_on_a_row_never_indexed_merges_nothing(
    db: sa.Engine, operation: str
) -> None:
    """The row (written with ``index=False``, as by the Go plugin) holds ``switch-a``'s
    states only: an operation naming ``switch-b`` raises GraphMismatchError naming
    ``switch-a`` and writes nothing — it would have put ``switch-b``'s states into the row and
    indexed the instance under ``switch-b``. The instance then goes on as ``switch-a``'s."""
    _switch_executor(db, index=False).claim_task("switch-a", _hr("sw-x"))
    before = (_rows(db), _index_rows(db), raw_row(db, "sw-x"))
    ex = _switch_executor(db)
    with pytest.raises(GraphMismatchError, match="'sw-x' runs graph 'switch-a', not graph 'swi"):
        _SWITCH_B_OPERATIONS[operation](ex, _hr("sw-x"))
    assert (_rows(db), _index_rows(db), raw_row(db, "sw-x")) == before
    task = ex.claim_task("switch-a", _hr("sw-x"))
    assert task is not None and ex.submit_task_if_waiting(task, TaskAction.FORWARD, _hr("sw-x"))
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("sw-x", "switch-a")]


_GO_RESTARTED_GRAPH = {
    "as the Go plugin may store it, its id": lambda db: '"switch-a"',
    "as flow_sqla stores it, its document": lambda db: None,
}


@pytest.mark.parametrize("stored_graph", sorted(_GO_RESTARTED_GRAPH))
@pytest.mark.parametrize("operation", sorted({*_SWITCH_B_OPERATIONS, "withdraw"}))
def test_an_operation_naming_another_graph_on_a_row_restarted_by_go_merges_nothing(
    db: sa.Engine, operation: str, stored_graph: str
) -> None:
    """The Go plugin's restart leaves a row not indexed with ``{}`` states and the graph
    stored with it: no state key tells its graph, the stored graph does. An operation naming
    ``switch-b`` raises GraphMismatchError naming ``switch-a`` and writes nothing — it would
    have indexed the instance as ``switch-b`` while its graph column still said ``switch-a``
    (status and snapshot disagreeing, a reindex moving it back). It then goes on as
    ``switch-a``'s, and its stored graph, snapshot and status agree."""
    _switch_executor(db, index=False).claim_task("switch-a", _hr("sw-g"))
    graph = _GO_RESTARTED_GRAPH[stored_graph](db)
    _set_row(db, "sw-g", states="{}", **({} if graph is None else {"graph": graph}))
    before = (_rows(db), _index_rows(db), _audit(db, "sw-g"))
    ex = _switch_executor(db)
    operations = {**_SWITCH_B_OPERATIONS, "withdraw": lambda ex, c: ex.withdraw("switch-b", c)}
    with pytest.raises(GraphMismatchError, match="'sw-g' runs graph 'switch-a', not graph 'swi"):
        operations[operation](ex, _hr("sw-g"))
    assert (_rows(db), _index_rows(db), _audit(db, "sw-g")) == before
    task = ex.claim_task("switch-a", _hr("sw-g"))
    assert task is not None and task.node.id == "t"
    snapshot = ex.state_repository.load_snapshot("sw-g")
    assert snapshot is not None and snapshot.graph_id == "switch-a"
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("sw-g", "switch-a")]


def test_a_restart_naming_another_graph_moves_a_row_restarted_by_go(db: sa.Engine) -> None:
    """A RESTART may start an instance over as another graph's, the Go plugin's restarted
    row too: its stored graph follows, so snapshot and status agree on the new graph."""
    _switch_executor(db, index=False).claim_task("switch-a", _hr("sw-r"))
    _set_row(db, "sw-r", states="{}", graph='"switch-a"')
    ex = _switch_executor(db)
    ex.submit_task_at("switch-b", "t", TaskAction.RESTART, _hr("sw-r"))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-r")] == [("switch-b", "t")]
    snapshot = ex.state_repository.load_snapshot("sw-r")
    assert snapshot is not None and snapshot.graph_id == "switch-b"


def test_a_row_never_indexed_holding_two_graphs_states_goes_on_as_the_graph_named(
    db: sa.Engine,
) -> None:
    """Without the index the reference lets one instance id hold two graphs' states: such a
    row is not refused — the operation goes on as the graph named, which then is the
    instance's (the other graph's states stay in the row, as without the index)."""
    old = _switch_executor(db, index=False)
    old.claim_task("switch-a", _hr("sw-2"))
    old.claim_task("switch-b", _hr("sw-2"))
    ex = _switch_executor(db)
    task = ex.claim_task("switch-b", _hr("sw-2"))
    assert task is not None and ex.submit_task_if_waiting(task, TaskAction.FORWARD, _hr("sw-2"))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-2")] == [("switch-b", "u")]
    with pytest.raises(GraphMismatchError, match="runs graph 'switch-b'"):
        ex.claim_task("switch-a", _hr("sw-2"))


def _main_and_review(db: sa.Engine, *, index: bool = True) -> WorkflowExecutor:
    engine = FlowEngine()
    engine.load(Graph.from_text(SUB_GRAPH_REVIEW))
    engine.load(Graph.from_text(CALLS_SUB_GRAPH))
    return sql_workflow(db, engine, state_controller=ActorStateController(), index=index)


def _applicant(instance_id: str) -> FlowContext:
    return FlowContext.of(instance_id, {"actor": "applicant"})


def _reviewer(instance_id: str) -> FlowContext:
    return FlowContext.of(instance_id, {"actor": "reviewer"})


def test_a_sub_graph_s_task_claimed_on_a_row_never_indexed_indexes_its_root_graph(
    db: sa.Engine,
) -> None:
    """The row holds ``main``'s states; a claim naming the sub-graph ``review`` it calls
    indexes the instance under ``main`` — under ``review`` it would have left every inbox
    and refused the applicant's next claim on ``main``."""
    _main_and_review(db, index=False).submit_task_at(
        "main", "apply", TaskAction.FORWARD, _applicant("m-2")
    )
    ex = _main_and_review(db)
    check = ex.claim_task("review", _reviewer("m-2"))
    assert check is not None and check.node.id == "check"
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("m-2", "main")]
    assert ex.submit_task_if_waiting(check, TaskAction.FORWARD, _reviewer("m-2"))
    done = ex.claim_task("main", _applicant("m-2"))
    assert done is not None and done.node.id == "done"
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("m-2")] == [("main", "done")]


def test_a_reindex_of_one_instance_naming_a_sub_graph_indexes_its_root_graph(
    db: sa.Engine,
) -> None:
    old = _main_and_review(db, index=False)
    old.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("m-3"))
    ex = _main_and_review(db)
    assert ex.reindex("review", FlowContext.of("m-3"))
    assert [(s.instance_id, s.graph_id) for s in ex.instances()] == [("m-3", "main")]
    check = ex.claim_task("review", _reviewer("m-3"))
    assert check is not None and ex.submit_task_if_waiting(
        check, TaskAction.FORWARD, _reviewer("m-3")
    )
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("m-3")] == [("main", "done")]


def test_withdraw_after_states_moved_on_without_the_index_acts_on_the_states(
    db: sa.Engine,
) -> None:
    """A writer without the index (the Go plugin, ``index=False``) finished or terminated an
    indexed instance: its stored open task is done. A withdraw trusting the index wrote
    TERMINATED over the completed task, marked the finished instance WITHDRAWN and recorded
    a TERMINATE for it. It now decides on the states, as for a row never indexed: the
    instance is not running, so nothing is written."""
    indexed, plain = executor(db, index=True), executor(db, index=False)
    for instance_id, action in (("done-1", TaskAction.FORWARD), ("ended-1", TaskAction.TERMINATE)):
        assert approve(indexed, instance_id, "employee", amount=1)  # the manager's task open
        assert [t.node_id for t in indexed.open_tasks(instance_id)] == ["manager"]
        c = ctx(instance_id, "manager")
        assert plain.submit_task_if_waiting(plain.claim_task("oa", c), action, c)
        before = every_row(db)
        assert indexed.withdraw("oa", ctx(instance_id, "employee")) is False
        assert every_row(db) == before


def test_withdraw_of_a_row_never_indexed_holding_only_a_sub_graph_s_states_withdraws_it(
    db: sa.Engine,
) -> None:
    """After a BACK the row of graph ``calls`` holds only ``sub:`` states: a withdraw naming
    ``calls`` withdraws the instance (it was refused as running ``sub``)."""
    engine = FlowEngine()
    engine.load(Graph.from_text(_CALLS_SUB))
    engine.load(Graph.from_text(_SUB))
    hr_controller = ActorStateController("actor", "role")
    old = sql_workflow(db, engine, state_controller=hr_controller, index=False)
    old.claim_task("calls", _hr("sub-2"))
    old.submit_task_at("calls", "t", TaskAction.BACK, _hr("sub-2"))
    ex = sql_workflow(db, engine, state_controller=hr_controller)
    assert ex.withdraw("calls", _hr("sub-2"))
    assert ex.status("sub-2") == InstanceStatus.WITHDRAWN


def test_withdraw_naming_a_sub_graph_of_a_row_never_indexed_names_the_root(
    db: sa.Engine,
) -> None:
    """The row holds ``main``'s and its sub-graph ``review``'s states: a withdraw naming
    ``review`` raises GraphMismatchError naming ``main``, nothing written (it went on as
    ``review``'s: the instance indexed under it, WITHDRAWN, ``main``'s state left open)."""
    old = _main_and_review(db, index=False)
    old.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("m-4"))
    old.claim_task("review", _reviewer("m-4"))
    before = (_rows(db), _index_rows(db), raw_row(db, "m-4"))
    ex = _main_and_review(db)
    with pytest.raises(GraphMismatchError, match="'m-4' runs graph 'main', not graph 'review'"):
        ex.withdraw("review", _reviewer("m-4"))
    assert (_rows(db), _index_rows(db), raw_row(db, "m-4")) == before


def test_a_sub_graph_s_task_of_a_row_never_indexed_is_refused_a_send_back(
    db: sa.Engine,
) -> None:
    """The sub-graph's task is open, WAITING for the reviewer, but the row was never indexed:
    no lineage says who sent it — SendBackError, nothing written."""
    old = _main_and_review(db, index=False)
    old.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("m-5"))
    old.claim_task("review", _reviewer("m-5"))
    before = (_rows(db), _index_rows(db), raw_row(db, "m-5"))
    ex = _main_and_review(db)
    task = OpenTask(
        instance_id="m-5",
        graph_id="review",
        node_id="check",
        node_title="check",
        state=TaskState.WAITING,
        candidates=("actor:reviewer",),
        lineage=("apply",),
        opened_at=datetime(2026, 1, 1),
        cursor=0,
    )
    with pytest.raises(SendBackError, match="lineage is empty"):
        ex.send_back(task, _reviewer("m-5"))
    assert (_rows(db), _index_rows(db), raw_row(db, "m-5")) == before


def test_a_sub_graph_s_tasks_are_in_the_inbox_and_follow_the_instance_on_sql(
    db: sa.Engine,
) -> None:
    """On SQL as in memory: the sub-graph's task is an open task under the sub-graph's id
    (its todo row too), claimed there it turns WAITING, and the root graph's next task opens
    when the sub-graph ends; a full reindex gives the same open tasks."""
    ex = _main_and_review(db)
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("m-6"))
    assert [(t.graph_id, t.node_id, t.state) for t in ex.inbox(_reviewer("m-6"))] == [
        ("review", "check", TaskState.UNKNOWN)
    ]
    assert [r[:3] for r in _index_rows(db) if r[0] == "m-6" and len(r) == 4] == [
        ("m-6", "check", "actor:reviewer")
    ]
    check = ex.claim_task("review", _reviewer("m-6"))
    assert check is not None
    assert [(t.graph_id, t.node_id, t.state) for t in ex.open_tasks("m-6")] == [
        ("review", "check", TaskState.WAITING)
    ]
    assert reindex(db, ex.engine, state_controller=ActorStateController(), everything=True) == 1
    assert [(t.graph_id, t.node_id, t.state) for t in ex.open_tasks("m-6")] == [
        ("review", "check", TaskState.WAITING)
    ]
    assert ex.submit_task_if_waiting(check, TaskAction.FORWARD, _reviewer("m-6"))
    assert [(t.graph_id, t.node_id) for t in ex.inbox(_applicant("m-6"))] == [("main", "done")]
    assert ex.inbox(_reviewer("m-6")) == []


_SHARED = SUB_GRAPH_REVIEW.replace("id: review", "id: shared")
_CALLS_SHARED_A = """
id: calls-a
layout:
  - {id: start, type: start}
  - {id: apply, meta: {actor: applicant}}
  - {id: call, task: "#shared"}
  - {id: end, type: end}
"""
_CALLS_SHARED_B = """
id: calls-b
layout:
  - {id: start, type: start}
  - {id: b1, meta: {actor: applicant}}
  - {id: call, task: "#shared"}
  - {id: end, type: end}
"""
_NAMING_CALLS_B = {
    "claim_task": lambda ex: ex.claim_task("calls-b", _applicant("sh-1")),
    "withdraw": lambda ex: ex.withdraw("calls-b", _applicant("sh-1")),
    "reindex": lambda ex: ex.reindex("calls-b", FlowContext.of("sh-1")),
}


@pytest.mark.parametrize("operation", sorted(_NAMING_CALLS_B))
def test_a_sub_graph_two_graphs_call_does_not_make_a_row_of_one_the_other_s(
    db: sa.Engine, operation: str
) -> None:
    """``calls-a`` and ``calls-b`` both call ``shared``; the row (never indexed) holds
    ``calls-a``'s and ``shared``'s states. An operation naming ``calls-b`` raises
    GraphMismatchError naming ``calls-a``, nothing written — the ``shared:`` states are not
    ``calls-b``'s own (a withdraw would have taken the instance for ``calls-b``'s)."""
    engine = FlowEngine()
    for text in (_SHARED, _CALLS_SHARED_A, _CALLS_SHARED_B):
        engine.load(Graph.from_text(text))
    old = sql_workflow(db, engine, state_controller=ActorStateController(), index=False)
    old.submit_task_at("calls-a", "apply", TaskAction.FORWARD, _applicant("sh-1"))
    old.claim_task("shared", _reviewer("sh-1"))
    before = (_rows(db), _index_rows(db), raw_row(db, "sh-1"))
    ex = sql_workflow(db, engine, state_controller=ActorStateController())
    with pytest.raises(
        GraphMismatchError, match="'sh-1' runs graph 'calls-a', not graph 'calls-b'"
    ):
        _NAMING_CALLS_B[operation](ex)
    assert (_rows(db), _index_rows(db), raw_row(db, "sh-1")) == before


def _calls_review_as(review_id: str) -> str:
    return CALLS_SUB_GRAPH.replace('task: "#review"', f'task: "#{review_id}"')


def test_a_sub_graph_whose_ids_the_task_table_cannot_hold_is_refused_before_any_write(
    db: sa.Engine,
) -> None:
    """The sub-graph's id is 80 characters: its tasks would go into the todo table's 64-char
    ``graph_id``. The applicant's submit is refused with UnstorableGraphError before any
    statement (it failed at the todo INSERT with the driver's error — or, on SQLite, stored
    a task no claim could then take); a reindex reports such a row as a bad row."""
    long_id = "r" * 80
    engine = FlowEngine()
    engine.load(Graph.from_text(SUB_GRAPH_REVIEW.replace("id: review", f"id: {long_id}")))
    engine.load(Graph.from_text(_calls_review_as(long_id)))
    ex = sql_workflow(db, engine, state_controller=ActorStateController())
    before = _rows(db)
    with pytest.raises(UnstorableGraphError, match="80 characters"):
        ex.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("lg-1"))
    assert _rows(db) == before
    plain = sql_workflow(db, engine, state_controller=ActorStateController(), index=False)
    plain.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("lg-2"))
    bad: list[tuple[str, type[Exception]]] = []
    indexed = reindex(
        db,
        engine,
        state_controller=ActorStateController(),
        on_bad_row=lambda instance_id, exc: bad.append((instance_id, type(exc))),
    )
    assert (indexed, bad) == (0, [("lg-2", UnstorableGraphError)])


def test_a_reindex_without_a_sub_graph_the_instance_reached_names_it(db: sa.Engine) -> None:
    """The engine lacks ``review``, which the row's instance has reached: a reindex raises
    GraphNotFoundError naming it and the instance (it indexed the instance RUNNING with no
    open task — in nobody's inbox, until a full reindex); with ``review`` loaded it lists
    the reviewer's task."""
    _main_and_review(db, index=False).submit_task_at(
        "main", "apply", TaskAction.FORWARD, _applicant("nr-1")
    )
    without = FlowEngine()
    without.load(Graph.from_text(CALLS_SUB_GRAPH))
    with pytest.raises(GraphNotFoundError, match="'review' \\(instance 'nr-1'\\)"):
        reindex(db, without, state_controller=ActorStateController())
    assert _index_rows(db) == [("nr-1", None)]
    ex = _main_and_review(db)
    assert reindex(db, ex.engine, state_controller=ActorStateController()) == 1
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("nr-1")] == [("review", "check")]


def test_a_reindex_takes_the_graph_the_states_are_of_when_the_graph_column_names_another(
    db: sa.Engine,
) -> None:
    """Written without the index, the instance restarted as ``switch-b``: the graph column
    keeps ``switch-a`` (written once, as the Go plugin does), the states are ``switch-b``'s
    only. A reindex indexes it as ``switch-b``'s (it raised GraphMismatchError: a bad row),
    as a live claim naming ``switch-b`` would."""
    plain = _switch_executor(db, index=False)
    plain.claim_task("switch-a", _hr("sw-g"))
    plain.submit_task_at("switch-b", "t", TaskAction.RESTART, _hr("sw-g"))
    plain.claim_task("switch-b", _hr("sw-g"))
    row = raw_row(db, "sw-g")
    assert row is not None and row["graph"]["id"] == "switch-a"
    assert list(row["states"]) == ["switch-b:t"]
    ex = _switch_executor(db)
    controller = ActorStateController("actor", "role")
    assert reindex(db, ex.engine, state_controller=controller) == 1
    assert [(t.graph_id, t.node_id, t.state) for t in ex.open_tasks("sw-g")] == [
        ("switch-b", "t", TaskState.WAITING)
    ]


#: States another writer (a Go service, a hand edit) may leave in an indexed row that
#: contradict its index: they do not read, or they are a graph's the index is not of.
_CONTRADICTING_STATES: dict[str, str | bytes] = {
    "a-list": "[1001]",
    "a-text-code": '{"oa:manager": "waiting"}',
    "an-unloaded-graph-s": '{"gone:t": 1001}',
    "not-json": '{"oa:manager": 10',
    "blank": " ",
    "blank-bytes": b" ",  # a BLOB on SQLite
}


def _reported(db: sa.Engine, engine: FlowEngine, controller: Any) -> list[tuple[str, str]]:
    """A full reindex reporting bad rows: (instance id, its error with its notes)."""
    bad: list[tuple[str, str]] = []

    def note(instance_id: str, error: Exception) -> None:
        bad.append((instance_id, "\n".join([str(error), *getattr(error, "__notes__", [])])))

    reindex(db, engine, state_controller=controller, everything=True, on_bad_row=note)
    return bad


@pytest.mark.parametrize("states", sorted(_CONTRADICTING_STATES))
def test_a_full_reindex_clears_the_index_of_a_bad_row_its_states_contradict(
    db: sa.Engine, states: str
) -> None:
    """An indexed instance whose states were replaced behind the index by states that do not
    read, or by another graph's only: a full pass reporting bad rows clears its index — its
    task leaves the manager's inbox — and says so; the other rows keep theirs. It kept the
    old index: the inbox listed a task the states no longer hold."""
    if states in ("not-json", "blank", "blank-bytes") and db.dialect.name != "sqlite":
        pytest.skip(f"{db.dialect.name} refuses to store text that is not JSON in states")
    ex = executor(db, index=True)
    for n in range(3):
        approve(ex, f"cx-{n}", "employee", amount=1)
    _set_row(db, "cx-1", states=_CONTRADICTING_STATES[states])
    bad = _reported(db, flow_engine_oa(), controller_oa())
    assert [(instance_id, "was cleared" in text) for instance_id, text in bad] == [("cx-1", True)]
    manager = ctx(None, "manager")  # type: ignore[arg-type]
    assert [t.instance_id for t in ex.inbox(manager)] == ["cx-0", "cx-2"]
    assert [row for row in _index_rows(db) if row[0] == "cx-1"] == [("cx-1", None)]
    # Reported again by the next pass, with nothing left to clear.
    assert [instance_id for instance_id, _ in _reported(db, flow_engine_oa(), controller_oa())] == [
        "cx-1"
    ]


def test_a_full_reindex_without_on_bad_row_stops_at_such_a_row_and_clears_nothing(
    db: sa.Engine,
) -> None:
    ex = executor(db, index=True)
    approve(ex, "cs-1", "employee", amount=1)
    before = _index_rows(db)
    _set_row(db, "cs-1", states='{"gone:t": 1001}')
    with pytest.raises(GraphMismatchError, match="'cs-1'"):
        reindex(db, flow_engine_oa(), state_controller=controller_oa(), everything=True)
    assert _index_rows(db) == before


def test_a_full_reindex_keeps_the_index_of_a_bad_row_its_states_may_agree_with(
    db: sa.Engine,
) -> None:
    """Reported, but kept: a WITHDRAWN status (the application's decision, which the states
    do not hold); an index whose graph calls a sub-graph the engine lacks (that graph's own
    calls are unknown); a row failing for another reason than its states (a graph column
    naming a graph the engine does not have, with states of the indexed graph)."""
    ex = executor(db, index=True)
    for instance_id in ("ck-w", "ck-g"):
        approve(ex, instance_id, "employee", amount=1)
    assert ex.withdraw("oa", ctx("ck-w", "employee"))
    _set_row(db, "ck-w", states='{"gone:t": 1001}')
    _set_row(db, "ck-g", graph='"nope"')
    nested = _main_and_review(db)
    nested.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("ck-s"))
    before = _index_rows(db)
    assert next(row for row in before if row[0] == "ck-s")[1:] == ("check", "actor:reviewer", 0)
    assert [i for i, _ in _reported(db, flow_engine_oa(), controller_oa())] == [
        "ck-w", "ck-g", "ck-s",
    ]  # fmt: skip
    without_review = FlowEngine()
    without_review.load(Graph.from_text(CALLS_SUB_GRAPH))
    bad = _reported(db, without_review, ActorStateController())
    assert [i for i, text in bad if "was cleared" in text] == []
    assert _index_rows(db) == before


def test_a_graph_column_naming_only_a_graph_the_engine_lacks_is_reported_not_guessed(
    db: sa.Engine,
) -> None:
    """The graph column holds only the id of ``switch-a`` (as the Go plugin may store it) and
    the states are ``switch-b``'s: without ``switch-a`` a reindex cannot tell whether it
    calls ``switch-b`` as a sub-graph — GraphNotFoundError naming ``switch-a`` and the
    instance, nothing written; with it loaded, the row is indexed as ``switch-b``'s."""
    plain = _switch_executor(db, index=False)
    plain.claim_task("switch-a", _hr("sw-i"))
    plain.submit_task_at("switch-b", "t", TaskAction.RESTART, _hr("sw-i"))
    plain.claim_task("switch-b", _hr("sw-i"))
    _set_row(db, "sw-i", graph='"switch-a"')
    only_b = FlowEngine()
    only_b.load(Graph.from_text(SWITCH_B))
    controller = ActorStateController("actor", "role")
    before = _index_rows(db)
    with pytest.raises(GraphNotFoundError, match=r"'switch-a'.*'sw-i'"):
        reindex(db, only_b, state_controller=controller)
    assert _index_rows(db) == before
    ex = _switch_executor(db)
    assert reindex(db, ex.engine, state_controller=controller) == 1
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("sw-i")] == [("switch-b", "t")]


def _caller(graph_id: str, called: str) -> str:
    """A graph whose one node calls ``called`` as a sub-graph."""
    return f"""
id: {graph_id}
layout:
  - {{id: s, type: start}}
  - {{id: call, task: "#{called}"}}
  - {{id: e, type: end}}
"""


_TOP = _caller("top", "mid")
_MID = """
id: mid
layout:
  - {id: s, type: start}
  - {id: call, task: "#leaf"}
  - {id: e, type: end}
"""
_LEAF = """
id: leaf
layout:
  - {id: s, type: start}
  - {id: t, meta: {actor: reviewer}}
  - {id: e, type: end}
"""


def test_a_full_reindex_keeps_the_index_of_a_bad_row_holding_its_called_graphs_states_only(
    db: sa.Engine,
) -> None:
    """States only of a sub-graph the indexed graph calls — directly (``main`` → ``review``)
    or at depth (``top`` → ``mid`` → ``leaf``) — do not contradict the index: the row,
    bad for another reason (its graph column names a graph the engine lacks), keeps it."""
    engine = FlowEngine()
    for text in (SUB_GRAPH_REVIEW, CALLS_SUB_GRAPH, _TOP, _MID, _LEAF):
        engine.load(Graph.from_text(text))
    ex = sql_workflow(db, engine, state_controller=ActorStateController())
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("ct-1"))
    assert ex.claim_task("top", _reviewer("ct-2")) is not None
    _set_row(db, "ct-1", states='{"review:check": 1001}', graph='"nope"')
    _set_row(db, "ct-2", states='{"leaf:t": 1001}', graph='"nope"')
    before = _index_rows(db)
    assert [row[:2] for row in before if row[0] == "ct-2"] == [("ct-2", "t"), ("ct-2", 10)]
    bad = _reported(db, engine, ActorStateController())
    assert [(i, "was cleared" in text) for i, text in bad] == [("ct-1", False), ("ct-2", False)]
    assert _index_rows(db) == before


@pytest.mark.parametrize("everything", [False, True], ids=["unindexed", "every-row"])
def test_a_bad_row_without_status_loses_its_leftover_todo_rows(
    db: sa.Engine, everything: bool
) -> None:
    """Its status cleared (by hand, or a writer that drops the index) while its todo rows
    stayed, and its states another graph's the engine lacks: reported, and its todo rows —
    stale whatever its states, no index saying which tasks they are — leave the inbox."""
    ex = executor(db, index=True)
    for instance_id in ("lt-1", "lt-2"):
        approve(ex, instance_id, "employee", amount=1)
    _set_row(db, "lt-1", status=None, open_tasks=None, states='{"gone:t": 1001}')
    bad = _bad_rows(db, everything=everything)
    assert bad == [("lt-1", "GraphMismatchError")]
    manager = ctx(None, "manager")  # type: ignore[arg-type]
    assert [t.instance_id for t in ex.inbox(manager)] == ["lt-2"]
    assert [row for row in _index_rows(db) if row[0] == "lt-1"] == [("lt-1", None)]


#: Operations naming the graph an instance is indexed as (``oa``), by its manager.
_OA_OPERATIONS = {
    "claim_task": lambda ex, c: ex.claim_task("oa", c),
    "find_task": lambda ex, c: ex.find_task("oa", c),
    "submit_task_at": lambda ex, c: ex.submit_task_at("oa", "manager", TaskAction.FORWARD, c),
    "withdraw": lambda ex, c: ex.withdraw("oa", c),
    "send_back": lambda ex, c: ex.send_back(ex.open_tasks(c.instance_id)[0], c),
}


@pytest.mark.parametrize("operation", sorted(_OA_OPERATIONS))
def test_an_operation_on_states_replaced_behind_the_index_by_another_graph_s_merges_nothing(
    db: sa.Engine, operation: str
) -> None:
    """Indexed as ``oa``, the row's states were replaced by another graph's (a Go service
    restarted it as ``gone``, unknown here): an operation naming ``oa`` is judged by the
    states, as on a row never indexed — GraphMismatchError naming ``gone``, nothing written.
    It passed the index's graph check and merged ``oa``'s states into ``gone``'s row."""
    ex = executor(db, index=True)
    approve(ex, "rb-x", "employee", amount=1)
    _set_row(db, "rb-x", states='{"gone:t": 1001}')
    before = (_rows(db), _index_rows(db), raw_row(db, "rb-x"))
    with pytest.raises(GraphMismatchError, match="'rb-x' runs graph 'gone', not graph 'oa'"):
        _OA_OPERATIONS[operation](ex, ctx("rb-x", "manager"))
    assert (_rows(db), _index_rows(db), raw_row(db, "rb-x")) == before


def test_states_of_a_sub_graph_the_engine_lacks_are_not_another_graph_s(db: sa.Engine) -> None:
    """Indexed as ``main``, the row holds only the states of ``review``, which ``main`` calls
    and this engine lacks: not another graph's — the claim goes on as before (finding no
    task it can walk to), no GraphMismatchError, nothing written."""
    full = _main_and_review(db)
    full.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("rv-m"))
    _set_row(db, "rv-m", states='{"review:check": 1001}')
    without = FlowEngine()
    without.load(Graph.from_text(CALLS_SUB_GRAPH))
    ex = sql_workflow(db, without, state_controller=ActorStateController())
    before = (_rows(db), _index_rows(db), raw_row(db, "rv-m"))
    assert ex.claim_task("main", _reviewer("rv-m")) is None
    assert (_rows(db), _index_rows(db), raw_row(db, "rv-m")) == before


#: Operations naming ``review``, the sub-graph ``main`` calls (its task is claimed there).
_REVIEW_OPERATIONS = {
    "claim_task": lambda ex, c: ex.claim_task("review", c),
    "find_task": lambda ex, c: ex.find_task("review", c),
    "submit_task_at": lambda ex, c: ex.submit_task_at("review", "check", TaskAction.FORWARD, c),
}


@pytest.mark.parametrize("operation", sorted(_REVIEW_OPERATIONS))
def test_an_operation_naming_a_sub_graph_on_states_replaced_behind_the_index_merges_nothing(
    db: sa.Engine, operation: str
) -> None:
    """Indexed as ``main`` (which calls ``review``), the states replaced by ``gone``'s: an
    operation naming the sub-graph is judged by the states too."""
    ex = _main_and_review(db)
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("rs-x"))
    _set_row(db, "rs-x", states='{"gone:t": 1001}')
    before = (_rows(db), _index_rows(db), raw_row(db, "rs-x"))
    with pytest.raises(GraphMismatchError, match="'rs-x' runs graph 'gone'"):
        _REVIEW_OPERATIONS[operation](ex, _reviewer("rs-x"))
    assert (_rows(db), _index_rows(db), raw_row(db, "rs-x")) == before


def test_states_below_a_sub_graph_the_engine_lacks_are_not_taken_for_another_graph_s(
    db: sa.Engine,
) -> None:
    """``top`` calls ``mid``, which calls ``leaf``; this engine lacks ``mid``, and the row
    indexed as ``top`` holds only ``leaf``'s states: what ``mid`` calls is unknown, so the
    withdraw goes on as before."""
    engine = FlowEngine()
    for text in (_TOP, _MID, _LEAF):
        engine.load(Graph.from_text(text))
    full = sql_workflow(db, engine, state_controller=ActorStateController())
    assert full.claim_task("top", _reviewer("lm-1")) is not None
    _set_row(db, "lm-1", states='{"leaf:t": 1001}')  # as after a BACK within ``leaf``
    without_mid = FlowEngine()
    for text in (_TOP, _LEAF):
        without_mid.load(Graph.from_text(text))
    ex = sql_workflow(db, without_mid, state_controller=ActorStateController())
    assert ex.withdraw("top", _reviewer("lm-1"))
    assert ex.status("lm-1") == InstanceStatus.WITHDRAWN


def test_a_restart_naming_a_sub_graph_on_replaced_states_starts_over_as_the_indexed_root(
    db: sa.Engine,
) -> None:
    """A RESTART clears every state: naming ``review`` on a row indexed as ``main`` whose
    states were replaced by ``gone``'s, the instance starts over as ``main`` (it was taken
    for ``review``'s, and every later ``main`` operation refused)."""
    ex = _main_and_review(db)
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("rr-1"))
    _set_row(db, "rr-1", states='{"gone:t": 1001}')
    ex.submit_task_at("review", "check", TaskAction.RESTART, _reviewer("rr-1"))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("rr-1")] == [("main", "apply")]
    assert ex.claim_task("main", _applicant("rr-1")) is not None


_OUTER = _caller("outer", "main")


def test_a_restart_naming_the_indexed_graph_on_replaced_states_starts_over_as_it(
    db: sa.Engine,
) -> None:
    """Indexed as ``main``, the states replaced by those of ``outer`` (which calls ``main``):
    a RESTART naming ``main`` starts the instance over as ``main``, as the index says (it
    started over as ``outer``)."""
    engine = FlowEngine()
    for text in (SUB_GRAPH_REVIEW, CALLS_SUB_GRAPH, _OUTER):
        engine.load(Graph.from_text(text))
    ex = sql_workflow(db, engine, state_controller=ActorStateController())
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("ro-1"))
    _set_row(db, "ro-1", states='{"outer:call": 1001}')
    ex.submit_task_at("main", "apply", TaskAction.RESTART, _applicant("ro-1"))
    assert [(t.graph_id, t.node_id) for t in ex.open_tasks("ro-1")] == [("main", "apply")]
    row = raw_row(db, "ro-1")
    assert row is not None and row["graph"]["id"] == "main"


def test_a_withdraw_of_states_replaced_by_a_loaded_graph_s_acts_on_that_graph_only(
    db: sa.Engine,
) -> None:
    """Indexed as ``switch-a``, the states replaced by ``switch-b``'s: withdrawing it as
    ``switch-a`` names ``switch-b``, and withdrawing it as ``switch-b`` works on its states
    and writes no ``switch-a`` state (it named ``switch-a`` back: refused either way)."""
    ex = _switch_executor(db)
    assert ex.claim_task("switch-a", _hr("wr-1")) is not None
    _set_row(db, "wr-1", states='{"switch-b:t": 1001}')
    with pytest.raises(GraphMismatchError, match="'wr-1' runs graph 'switch-b'"):
        ex.withdraw("switch-a", _hr("wr-1"))
    assert ex.withdraw("switch-b", _hr("wr-1"))
    assert ex.status("wr-1") == InstanceStatus.WITHDRAWN
    row = raw_row(db, "wr-1")
    assert row is not None and [key for key in row["states"] if "switch-a" in key] == []


def test_a_send_back_of_a_sub_graph_s_task_on_replaced_states_writes_nothing(
    db: sa.Engine,
) -> None:
    ex = _main_and_review(db)
    ex.submit_task_at("main", "apply", TaskAction.FORWARD, _applicant("sb-r"))
    (task,) = ex.open_tasks("sb-r")
    assert (task.graph_id, task.node_id) == ("review", "check")
    _set_row(db, "sb-r", states='{"gone:t": 1001}')
    before = (_rows(db), _index_rows(db), raw_row(db, "sb-r"))
    with pytest.raises(GraphMismatchError, match="'sb-r' runs graph 'gone'"):
        ex.send_back(task, _reviewer("sb-r"))
    assert (_rows(db), _index_rows(db), raw_row(db, "sb-r")) == before


def test_save_snapshot_with_other_routing_variables_moves_the_open_task(db: sa.Engine) -> None:
    """The variables ``save_snapshot`` stores route the instance: its open tasks — inbox,
    status, who may claim — follow them in the same write (the manager's inbox listed a task
    only the director could claim, and the director's inbox stayed empty)."""
    ex = executor(db, index=True)
    assert approve(ex, "ss-1", "employee", amount=10)
    assert [t.node_id for t in ex.open_tasks("ss-1")] == ["manager"]
    repository = ex.state_repository
    restored = repository.restore_context("ss-1")  # type: ignore[attr-defined]
    restored.put("amount", 9000)
    with db.begin() as conn:
        restored.connection = conn
        repository.save_snapshot(restored, ex.engine.get_graph("oa"))  # type: ignore[attr-defined]
    assert [t.node_id for t in ex.open_tasks("ss-1")] == ["director"]
    assert ex.inbox(ctx(None, "manager")) == []
    assert [t.node_id for t in ex.inbox(ctx(None, "director"))] == ["director"]
    assert ex.claim_task("oa", ctx("ss-1", "manager")) is None
    task = ex.claim_task("oa", ctx("ss-1", "director"))
    assert task is not None and task.node.id == "director"


def test_process_cache_goes_on_after_a_restart_and_a_snapshot(db: sa.Engine) -> None:
    """With ``cache="process"`` an operation served from the cache checks the row it locks
    against the cached one: a RESTART and a snapshot, which store the graph, leave a cached
    row that still matches (the next operation raised StaleCacheError)."""
    ex = executor(db, index=True, cache="process")
    assert approve(ex, "pc-1", "employee", amount=10)
    assert approve(ex, "pc-1", "manager")
    ex.submit_task_at("oa", "apply", TaskAction.RESTART, ctx("pc-1", "employee"))
    assert approve(ex, "pc-1", "employee", amount=10)
    repository = ex.state_repository
    restored = repository.restore_context("pc-1")  # type: ignore[attr-defined]
    restored.put("amount", 9000)
    repository.save_snapshot(restored, ex.engine.get_graph("oa"))  # type: ignore[attr-defined]
    assert approve(ex, "pc-1", "director")


def test_a_snapshot_naming_another_graph_than_the_states_is_refused(db: sa.Engine) -> None:
    """``save_snapshot`` keeps the states: naming another graph than theirs, it would index
    the instance as that graph beside its own states (an inbox task nobody can claim)."""
    ex = _switch_executor(db)
    assert ex.claim_task("switch-a", _hr("sn-1")) is not None
    before = (_rows(db), _index_rows(db), _audit(db, "sn-1"))
    snapshot = FlowContext.of("sn-1", {"note": 1})
    with pytest.raises(GraphMismatchError, match="'sn-1' runs graph 'switch-a'"):
        ex.state_repository.save_snapshot(snapshot, ex.engine.get_graph("switch-b"))  # type: ignore[attr-defined]
    assert (_rows(db), _index_rows(db), _audit(db, "sn-1")) == before
