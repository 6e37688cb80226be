"""The driver-level path (``flow_sqla._prepared``) on real servers.

The repository's hot statements run on the DBAPI cursor inside the ``Connection``'s
transaction, unless the ``Connection`` must see them. What a user relies on: the writes belong
to their transaction (commit keeps them, rollback drops them, also when the ``Connection`` had
not begun one yet), instrumentation still sees every statement, and driver errors arrive as the
same SQLAlchemy exceptions ``Connection.execute`` raises.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
from _support import approve, count_rows, ctx, executor, flow_engine, migrate, raw_row

from flow.graph import Node
from flow.workflow import ActorStateController, TaskAction, TaskState, WorkflowExecutor
from flow_sqla import RepositoryError, UnstorableValueError
from flow_sqla._prepared import PreparedStatement, driver_path_open
from flow_sqla.tables import FlowTables
from flow_sqla.wiring import sql_workflow


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def test_the_driver_path_is_open_only_inside_a_transaction_nobody_listens_to(
    db: sa.Engine,
) -> None:
    with db.connect() as conn:
        assert not driver_path_open(conn)  # nothing begun: autobegin must start it
        with conn.begin():
            assert driver_path_open(conn)
    listened = sa.create_engine(db.url)
    sa.event.listen(listened, "before_cursor_execute", lambda *_: None)
    with listened.begin() as conn:
        assert not driver_path_open(conn)
    listened.dispose()
    echoing = sa.create_engine(db.url, echo=True)
    with echoing.begin() as conn:
        assert not driver_path_open(conn)
    echoing.dispose()


def test_transaction_and_error_listeners_leave_the_driver_path_open(db: sa.Engine) -> None:
    """Listeners that see no statement — the library's own on a caller's engine (commit,
    rollback, savepoint, handle_error), an app's commit hook — keep the driver-level path;
    a statement listener added next to them closes it."""
    listened = sa.create_engine(db.url)
    for name in ("commit", "rollback", "savepoint"):
        sa.event.listen(listened, name, lambda *_: None)
    sa.event.listen(listened, "handle_error", lambda *_: None)
    with listened.begin() as conn:
        assert driver_path_open(conn)
    sa.event.listen(listened, "after_cursor_execute", lambda *_: None)
    with listened.begin() as conn:
        assert not driver_path_open(conn)
    listened.dispose()


def test_statements_of_an_approval_reach_cursor_listeners(db: sa.Engine) -> None:
    """Tracing and statement counters keep seeing every statement (the ``Connection`` path)."""
    seen: list[str] = []
    listened = sa.create_engine(db.url)
    sa.event.listen(listened, "before_cursor_execute", lambda _c, _cur, sql, *_: seen.append(sql))
    ex = executor(listened)
    approve(ex, "dp-listen", "employee", amount=10)
    listened.dispose()
    assert any("bpm_flow_repository" in sql and "UPDATE" in sql.upper() for sql in seen) or any(
        "bpm_flow_repository" in sql and "INSERT" in sql.upper() for sql in seen
    )
    assert any("bpm_flow_task" in sql for sql in seen)


def test_echo_logs_the_statements(db: sa.Engine, caplog: pytest.LogCaptureFixture) -> None:
    echoing = sa.create_engine(db.url, echo=True)
    with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
        approve(executor(echoing), "dp-echo", "employee", amount=10)
    echoing.dispose()
    assert "bpm_flow_task" in caplog.text


def test_writes_join_a_connection_that_has_not_begun_and_commit_with_it(db: sa.Engine) -> None:
    ex = executor(db)
    with db.connect() as conn:  # no begin(): the first statement autobegins
        c = ctx("dp-autobegin", "employee", conn, amount=10)
        task = ex.claim_task("oa", c)
        assert task is not None
        assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        conn.commit()
    assert raw_row(db, "dp-autobegin") is not None
    assert count_rows(db, "bpm_flow_task", "dp-autobegin") == 1


def test_writes_on_the_driver_path_roll_back_with_the_caller(db: sa.Engine) -> None:
    ex = executor(db)
    with db.connect() as conn:
        tx = conn.begin()
        c = ctx("dp-rollback", "employee", conn, amount=10)
        task = ex.claim_task("oa", c)
        assert driver_path_open(conn)
        assert task is not None and ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        tx.rollback()
    assert raw_row(db, "dp-rollback") is None
    assert count_rows(db, "bpm_flow_task", "dp-rollback") == 0


_NOW = datetime(2026, 12, 2, 9, 0)


def _insert(tables: FlowTables) -> sa.Insert:
    t = tables.repository
    values: dict[str, Any] = {
        name: sa.bindparam(name, type_=t.c[name].type)
        for name in ("instant_id", "states", "creator", "create_time")
    }
    return t.insert().inline().values(values)


def test_a_time_written_on_the_driver_path_reads_back_as_written(db: sa.Engine) -> None:
    """MySQL's drivers get a naive time as its text (``flow_sqla._dialect``), the others
    the ``datetime``; either way the column holds the time given."""
    stmt = _insert(FlowTables())
    t = FlowTables().repository
    with db.begin() as conn:
        assert driver_path_open(conn)
        row = {"instant_id": "dp-time", "states": {}, "creator": "x", "create_time": _NOW}
        PreparedStatement(stmt, conn.dialect).execute(conn, row)
    with db.connect() as conn:
        stored = conn.execute(sa.select(t.c.create_time).where(t.c.instant_id == "dp-time"))
        assert stored.scalar_one() == _NOW


def test_a_driver_error_is_the_exception_connection_execute_raises(db: sa.Engine) -> None:
    stmt = _insert(FlowTables())
    row = {"instant_id": "dp-dup", "states": {}, "creator": "x", "create_time": _NOW}
    with db.begin() as conn:
        conn.execute(stmt, row)
    prepared = PreparedStatement(stmt, db.dialect)
    with db.connect() as conn, conn.begin():
        assert driver_path_open(conn)
        with pytest.raises(sa.exc.IntegrityError) as on_driver_path:
            prepared.execute(conn, row)
    with (
        db.connect() as conn,
        conn.begin(),
        pytest.raises(sa.exc.IntegrityError) as on_connection,
    ):
        conn.execute(stmt, row)
    assert type(on_driver_path.value.orig) is type(on_connection.value.orig)
    assert on_driver_path.value.statement == prepared.sql


def test_a_lost_connection_on_the_driver_path_is_invalidated(db: sa.Engine) -> None:
    """As with ``Connection.execute``: the error says the connection is invalidated and the
    pool does not hand that connection out again."""
    if db.dialect.name == "sqlite":
        pytest.skip("SQLite has no server connection to lose")
    prepared = PreparedStatement(_insert(FlowTables()), db.dialect)
    with db.connect() as conn:
        conn.begin()
        killer = db.connect()
        if db.dialect.name == "postgresql":
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            killer.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid or 0)})")
        else:
            cid = conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar()
            killer.exec_driver_sql(f"KILL {int(cid or 0)}")
        killer.close()
        with pytest.raises(sa.exc.DBAPIError) as caught:
            prepared.execute(
                conn, {"instant_id": "dp-lost", "states": {}, "creator": "x", "create_time": _NOW}
            )
        assert caught.value.connection_invalidated
        assert conn.invalidated


class _Candidates(ActorStateController):
    """Every task's candidates: ``extra`` first, then the usual actor."""

    def __init__(self, extra: tuple[str, ...]) -> None:
        super().__init__()
        self.extra = extra

    def candidates(self, node: Node) -> tuple[str, ...]:
        return self.extra + super().candidates(node)


def _first_claim_error(engine: sa.Engine, controller: ActorStateController) -> BaseException:
    ex = sql_workflow(engine, flow_engine(), state_controller=controller, index=True)
    with pytest.raises(Exception) as caught:
        ex.claim_task("oa", ctx("dp-bad", "employee", amount=1))
    return caught.value


def test_a_value_the_driver_refuses_is_the_same_typed_error_on_both_paths(db: sa.Engine) -> None:
    """A candidate with a lone surrogate: not a driver error, so it is not wrapped — the same
    typed error as through ``Connection.execute`` (which a listener forces)."""
    bad = _Candidates(("actor:bad\ud800",))
    on_driver_path = _first_claim_error(db, bad)
    listened = sa.create_engine(db.url)
    sa.event.listen(listened, "before_cursor_execute", lambda *_: None)
    try:
        on_connection = _first_claim_error(listened, bad)
    finally:
        listened.dispose()
    assert type(on_driver_path) is type(on_connection)
    assert isinstance(on_driver_path, (UnstorableValueError, RepositoryError))
    assert "dp-bad" in str(on_driver_path)


def test_a_task_with_thousands_of_candidates_is_written(db: sa.Engine) -> None:
    """Beyond a few rows the todo writes leave the merged statement for batched separate
    ones: 8,200 candidates would be 65,600 parameters in one PostgreSQL statement."""
    count = 8_200 if db.dialect.name == "postgresql" else 300
    many = _Candidates(tuple(f"actor:u{n}" for n in range(count)))
    ex = sql_workflow(db, flow_engine(), state_controller=many, index=True)
    task = ex.claim_task("oa", ctx("dp-many", "employee", amount=1))
    assert task is not None
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx("dp-many", "employee"))
    [manager] = ex.open_tasks("dp-many")
    assert manager.node_id == "manager" and len(manager.candidates) == count + 1


def test_a_schema_translate_map_sends_every_statement_to_the_tenant_schema(
    db: sa.Engine,
) -> None:
    """SQLAlchemy's multi-tenant recipe (``execution_options(schema_translate_map=...)``):
    the prepared statements are compiled with the connection's map, so the state row, the
    history row and the todo rows land in the tenant's tables — where the reads look."""
    if db.dialect.name == "sqlite":
        pytest.skip("SQLite has schemas only as ATTACHed files")
    tenant_schema = f"{db.url.database}_tenant" if db.dialect.name != "postgresql" else "tenant1"
    with db.begin() as conn:
        conn.execute(sa.schema.CreateSchema(tenant_schema))
    tenant = db.execution_options(schema_translate_map={None: tenant_schema})
    try:
        FlowTables().metadata.create_all(tenant)
        ex = executor(tenant, index=True)
        with tenant.begin() as conn:  # the README pattern, in the caller's transaction
            c = ctx("st-1", "employee", conn, amount=10)
            assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        assert [t.node_id for t in ex.open_tasks("st-1")] == ["manager"]
        assert approve(ex, "st-1", "manager")  # the claim reads what the first approval wrote
        tables = ("bpm_flow_repository", "bpm_flow_task", "bpm_flow_todo")
        with db.connect() as conn:
            default = [conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar() for t in tables]
            tenants = [  # the todo table's task rows (MySQL/MariaDB keep a sentinel row)
                conn.execute(
                    sa.text(f"SELECT COUNT(*) FROM {tenant_schema}.{t}")
                    if t != "bpm_flow_todo"
                    else sa.text(f"SELECT COUNT(*) FROM {tenant_schema}.{t} WHERE candidate <> ''")
                ).scalar()
                for t in tables
            ]
        assert default == [0, 0, 0]
        assert tenants == [1, 2, 0]
    finally:
        with db.begin() as conn:
            conn.execute(
                sa.schema.DropSchema(tenant_schema, cascade=db.dialect.name == "postgresql")
            )


@contextlib.contextmanager
def _tenant_schema(db: sa.Engine) -> Iterator[str]:
    """A second schema holding the flow tables, dropped afterwards."""
    if db.dialect.name == "sqlite":
        pytest.skip("SQLite has schemas only as ATTACHed files")
    tenant_schema = f"{db.url.database}_tb" if db.dialect.name != "postgresql" else "tb"
    with db.begin() as conn:
        conn.execute(sa.schema.CreateSchema(tenant_schema))
    try:
        FlowTables().metadata.create_all(
            db.execution_options(schema_translate_map={None: tenant_schema})
        )
        yield tenant_schema
    finally:
        with db.begin() as conn:
            conn.execute(
                sa.schema.DropSchema(tenant_schema, cascade=db.dialect.name == "postgresql")
            )


def _tenant_rows(db: sa.Engine, tenant_schema: str) -> int:
    with db.connect() as conn:
        sql = f"SELECT COUNT(*) FROM {tenant_schema}.bpm_flow_repository"
        return int(conn.execute(sa.text(sql)).scalar_one())


def test_a_connection_switching_its_schema_map_does_not_reuse_another_tenants_row(
    db: sa.Engine,
) -> None:
    """``Connection.execution_options(schema_translate_map=...)`` changes the connection in
    place: a row held for one tenant's table must not serve the same id in another's."""
    with _tenant_schema(db) as tenant_schema:
        ex = executor(db, index=True)
        with db.connect() as conn, conn.begin():
            c = ctx("sw-1", "employee", conn, amount=10)
            assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
            conn.execution_options(schema_translate_map={None: tenant_schema})
            assert ex.claim_task("oa", ctx("sw-1", "manager", conn)) is None  # unknown there
        assert _tenant_rows(db, tenant_schema) == 0
        assert [t.node_id for t in ex.open_tasks("sw-1")] == ["manager"]


def test_a_claim_before_a_schema_map_switch_lands_in_its_own_tenant_s_table(
    db: sa.Engine,
) -> None:
    """A claim's write waiting for the submit (persistence.md §3) is sent before the
    connection's options change, to the table the claim read — never to the next tenant's."""
    with _tenant_schema(db) as tenant_schema:
        ex = executor(db, index=True)
        assert approve(ex, "sw-2", "employee", amount=10)
        with db.connect() as conn, conn.begin():
            assert ex.claim_task("oa", ctx("sw-2", "manager", conn)) is not None
            conn.execution_options(schema_translate_map={None: tenant_schema})
        assert _tenant_rows(db, tenant_schema) == 0
        assert [(t.node_id, t.state) for t in ex.open_tasks("sw-2")] == [
            ("manager", TaskState.WAITING)
        ]


def _tenant_executor(bind: sa.Engine, schema: str | None) -> WorkflowExecutor:
    return sql_workflow(
        bind,
        flow_engine(),
        state_controller=ActorStateController(),
        tables=FlowTables(schema=schema),
        index=True,
    )


def _default_schema(db: sa.Engine) -> str:
    return "public" if db.dialect.name == "postgresql" else str(db.url.database)


@pytest.mark.parametrize("set_up", ["explicit schemas", "default and a schema", "schema maps"])
def test_evict_on_another_tenant_s_repository_keeps_this_tenant_s_claim(
    db: sa.Engine, set_up: str
) -> None:
    """Per-tenant executors in one transaction: tenant B's ``evict`` of an id says B's row
    changed, not A's row of the same id — A's claim waiting for its submit must still be
    written (it was dropped: the submit returned False, or the claim alone committed a blank
    row that no inbox lists)."""
    with _tenant_schema(db) as tenant_schema:
        if set_up == "explicit schemas":
            tenant_a = _tenant_executor(db, _default_schema(db))
            tenant_b = _tenant_executor(db, tenant_schema)
        elif set_up == "default and a schema":
            tenant_a = _tenant_executor(db, None)
            tenant_b = _tenant_executor(db, tenant_schema)
        else:  # SQLAlchemy's multi-tenant recipe: one FlowTables(), an engine per tenant
            tenant_a = _tenant_executor(db, None)
            mapped = db.execution_options(schema_translate_map={None: tenant_schema})
            tenant_b = _tenant_executor(mapped, None)
            assert tenant_b.status("ev-0") is None  # B has connected: its default is known
        for instance_id in ("ev-1", "ev-2"):
            assert approve(tenant_a, instance_id, "employee", amount=10)
        with db.begin() as conn:
            c = ctx("ev-1", "manager", conn)
            task = tenant_a.claim_task("oa", c)
            tenant_b.state_repository.evict("ev-1")  # type: ignore[attr-defined]
            assert tenant_a.submit_task_if_waiting(task, TaskAction.FORWARD, c)
        with db.begin() as conn:
            assert tenant_a.claim_task("oa", ctx("ev-2", "manager", conn)) is not None
            tenant_b.state_repository.evict("ev-2")  # type: ignore[attr-defined]
        assert [(t.node_id, t.state) for t in tenant_a.open_tasks("ev-2")] == [
            ("manager", TaskState.WAITING)
        ]


def test_evict_on_another_repository_of_the_same_table_drops_the_claim(db: sa.Engine) -> None:
    """Two spellings of one table (an explicit schema, another mapped onto it): the evict is
    about that row, so the claim waiting for its submit is dropped and the caller's own SQL
    wins (the claim, written at the commit, recreated the row the caller deleted)."""
    if db.dialect.name == "sqlite":
        pytest.skip("SQLite has schemas only as ATTACHed files")
    default_schema = _default_schema(db)
    first = _tenant_executor(db, default_schema)
    second = _tenant_executor(
        db.execution_options(schema_translate_map={"app": default_schema}), "app"
    )
    assert second.status("ev-0") is None  # connected: the server's default is known
    assert approve(first, "ev-3", "employee", amount=10)
    with db.begin() as conn:
        assert first.claim_task("oa", ctx("ev-3", "manager", conn)) is not None
        second.state_repository.evict("ev-3")  # type: ignore[attr-defined]
        for table in ("bpm_flow_todo", "bpm_flow_repository"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE instant_id = 'ev-3'"))
    assert raw_row(db, "ev-3") is None
