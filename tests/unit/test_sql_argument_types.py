"""Arguments of the wrong type to flow_sqla's public API, on SQLite: the library's typed
errors, raised before anything is read or written — never a bare ``AttributeError`` or
``TypeError`` from inside SQLAlchemy or Alembic, never a call that silently does something
else than asked (a read around the caller's transaction)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from flow import FlowContext, FlowEngine, Graph, InvalidArgumentTypeError
from flow.workflow import ActorStateController, InvalidInstanceIdError, TaskAction
from flow_sqla import (
    FlowTables,
    InvalidArgumentError,
    RepositoryError,
    SqlStateRepository,
    is_retryable,
    migrations,
    reindex,
    sql_workflow,
)

_GRAPH = """
id: g
layout:
  - {id: s, type: start, link: a}
  - {id: a, meta: {actor: ann}, link: e}
  - {id: e, type: end}
"""


@pytest.fixture
def db(tmp_path: Path) -> Any:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'flow.sqlite'}")
    migrations.upgrade(engine)
    yield engine
    engine.dispose()


def _rows(db: sa.Engine) -> list[Any]:
    with db.connect() as conn:
        return list(conn.execute(sa.text("SELECT instant_id, states FROM bpm_flow_repository")))


def _started(db: sa.Engine) -> SqlStateRepository:
    engine = FlowEngine()
    engine.load(Graph.from_text(_GRAPH))
    ex = sql_workflow(db, engine, state_controller=ActorStateController(), index=False)
    ctx = FlowContext.of("i-1", {"actor": "ann", "amount": 3})
    ex.submit_task_at("g", "a", TaskAction.FORWARD, ctx)
    repository = ex.state_repository
    assert isinstance(repository, SqlStateRepository)
    return repository


@pytest.mark.parametrize(
    ("ctx", "graph", "argument"),
    [
        (None, Graph.from_text(_GRAPH), "ctx"),
        ("i-2", Graph.from_text(_GRAPH), "ctx"),
        (FlowContext.of("i-2"), "g", "graph"),  # a graph id: the repository has no engine
        (FlowContext.of("i-2"), None, "graph"),
    ],
)
def test_save_snapshot_refuses_a_context_or_graph_of_the_wrong_type(
    db: sa.Engine, ctx: Any, graph: Any, argument: str
) -> None:
    """Both failed with a bare AttributeError (``'str' object has no attribute 'id'``)."""
    repository = SqlStateRepository(db)
    before = _rows(db)
    with pytest.raises(InvalidArgumentTypeError, match=rf"^{argument} must be a"):
        repository.save_snapshot(ctx, graph)
    assert _rows(db) == before


@pytest.mark.parametrize("connection", ["engine", "text", 5], ids=str)
def test_restore_context_refuses_a_connection_that_is_not_a_connection(
    db: sa.Engine, connection: str | int
) -> None:
    """An Engine (or a Session) was read around, outside the caller's transaction, and then
    attached to the context as its ``connection``, which every operation ignores — as the
    other reads that take ``connection=`` refuse it."""
    repository = _started(db)
    given = db if connection == "engine" else connection
    with pytest.raises(InvalidArgumentError, match="connection"):
        repository.restore_context("i-1", connection=given)
    with db.connect() as conn:  # a Connection, and None, still work
        assert repository.restore_context("i-1", connection=conn).connection is conn
    assert repository.restore_context("i-1").get("amount") == 3


def test_evict_refuses_an_id_or_connection_of_the_wrong_type(db: sa.Engine) -> None:
    """``evict(["i-1"])`` raised ``TypeError: unhashable type``; ``connection=engine`` was
    ignored, which drops a deferred claim unsent instead of sending it."""
    repository = _started(db)
    for bad_id in (["i-1"], {"i": 1}, None, 5):
        with pytest.raises(InvalidInstanceIdError):
            repository.evict(bad_id)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="connection"):
        repository.evict("i-1", connection=db)
    repository.evict("i-1")
    with db.connect() as conn:
        repository.evict("i-1", connection=conn)


@pytest.mark.parametrize("metadata", [5, "flow", sa.Table], ids=lambda v: type(v).__name__)
def test_flow_tables_refuse_a_metadata_of_the_wrong_type(metadata: Any) -> None:
    """``AttributeError: 'int' object has no attribute 'schema'`` from inside SQLAlchemy."""
    with pytest.raises(InvalidArgumentTypeError, match=r"metadata must be a sqlalchemy\.MetaData"):
        FlowTables(metadata)


def test_flow_tables_refuse_a_metadata_holding_one_of_their_tables_and_add_none() -> None:
    """SQLAlchemy's own InvalidRequestError ("already defined"), raised for the second table
    after the first had been added to the caller's metadata."""
    metadata = sa.MetaData()
    sa.Table("bpm_flow_task", metadata, sa.Column("id", sa.Integer, primary_key=True))
    with pytest.raises(InvalidArgumentError, match="'bpm_flow_task'"):
        FlowTables(metadata)
    assert list(metadata.tables) == ["bpm_flow_task"]
    shared = sa.MetaData(schema="app")
    FlowTables(shared)
    with pytest.raises(InvalidArgumentError, match=r"'app\.bpm_flow_repository'"):
        FlowTables(shared)
    other = FlowTables(shared, repo_table="leave", task_table="leave_task")  # other names fit
    assert other.metadata is shared


@pytest.mark.parametrize("revision", [None, 5, b"head", ["head"]], ids=lambda v: type(v).__name__)
def test_a_revision_that_is_not_text_is_refused_before_anything_is_migrated(
    tmp_path: Path, revision: Any
) -> None:
    """Alembic raised ``TypeError: argument of type 'NoneType' is not iterable`` (downgrade:
    ``AssertionError``) from inside its revision map."""
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    for step in (migrations.upgrade, migrations.downgrade):
        with pytest.raises(InvalidArgumentTypeError, match="revision must be a revision string"):
            step(url, revision)
    assert migrations.current(url) is None


def test_an_empty_or_unresolvable_revision_is_a_typed_error(tmp_path: Path) -> None:
    """``""`` and, on an empty database, ``"head+1"`` failed with a bare AssertionError."""
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    for step in (migrations.upgrade, migrations.downgrade):
        with pytest.raises(InvalidArgumentError, match="revision"):
            step(url, " ")
    with pytest.raises(RepositoryError, match="'head\\+1' failed"):
        migrations.upgrade(url, "head+1")
    assert migrations.current(url) is None
    migrations.upgrade(url)
    assert migrations.current(url) is not None


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"index": "no"}, InvalidArgumentTypeError, "index must be True or False"),
        ({"plain_json": 1}, InvalidArgumentTypeError, "plain_json must be True or False"),
        ({"vars_filter": "actor"}, InvalidArgumentTypeError, "vars_filter must be a set"),
        ({"vars_filter": ["actor", 5]}, InvalidArgumentTypeError, "vars_filter must be a set"),
        ({"tables": "bpm"}, InvalidArgumentTypeError, "tables must be a FlowTables or None"),
        ({"limits": 5}, InvalidArgumentTypeError, "limits must be a CodecLimits or None"),
        ({"cache": "always"}, InvalidArgumentError, "Invalid cache 'always': must be"),
    ],
    ids=repr,
)
def test_sql_workflow_options_of_the_wrong_kind_are_the_typed_errors(
    db: sa.Engine, options: dict[str, Any], error: type[Exception], named: str
) -> None:
    """They were a bare ``TypeError``/``ValueError``: still one (the typed errors subclass
    them), now also a ``FlowError`` an application catches with the library's others."""
    with pytest.raises(error, match=named):
        sql_workflow(db, FlowEngine(), state_controller=ActorStateController(), **options)


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"batch_size": 0}, InvalidArgumentError, "Invalid batch_size 0: must be from 1"),
        ({"batch_size": "500"}, InvalidArgumentTypeError, "batch_size must be an integer"),
        ({"after": -1}, InvalidArgumentError, r"Invalid after -1: must be a row id"),
        ({"everything": "no"}, InvalidArgumentTypeError, "everything must be True or False"),
        ({"progress": 5}, InvalidArgumentTypeError, "progress must be callable or None"),
    ],
    ids=repr,
)
def test_reindex_options_of_the_wrong_kind_are_the_typed_errors(
    db: sa.Engine, options: dict[str, Any], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        reindex(db, FlowEngine(), state_controller=ActorStateController(), **options)


@pytest.mark.parametrize("value", [5, "deadlock", ["x"]], ids=repr)
def test_is_retryable_refuses_what_is_no_exception(value: Any) -> None:
    with pytest.raises(InvalidArgumentTypeError, match="exc must be an exception"):
        is_retryable(value)
    assert is_retryable(None) is False  # as documented


@pytest.mark.parametrize("value", [5, "engine", FlowEngine], ids=repr)
def test_a_repository_refuses_a_flow_engine_that_cannot_look_graphs_up(
    db: sa.Engine, value: Any
) -> None:
    """Used only when a row stores a graph as its bare id: accepted, it failed there, late."""
    with pytest.raises(InvalidArgumentTypeError, match="flow_engine must be a FlowEngine"):
        SqlStateRepository(db, flow_engine=value)
    assert SqlStateRepository(db, flow_engine=FlowEngine()).flow_engine is not None


_NOT_A_CONNECTION = r"ctx.connection must be a SQLAlchemy Connection"


def _not_connections(db: sa.Engine) -> list[Any]:
    """What lands in ``ctx.connection`` by mistake: the ORM ``Session`` itself, the
    ``Engine``, a DBAPI connection, a URL."""
    from sqlalchemy.orm import Session

    return [Session(db), db, db.raw_connection(), "sqlite://"]


@pytest.mark.parametrize("index", [False, True], ids=["index off", "index on"])
def test_an_operation_refuses_a_context_connection_that_is_not_a_connection(
    db: sa.Engine, index: bool
) -> None:
    """It ran and committed in a transaction of its own: the caller's rows and the flow's no
    longer committed or rolled back together, and nothing said so. Nothing is written."""
    engine = FlowEngine()
    engine.load(Graph.from_text(_GRAPH))
    ex = sql_workflow(db, engine, state_controller=ActorStateController(), index=index)
    for wrong in _not_connections(db):
        ctx = FlowContext.of("i-9", {"actor": "ann"}, connection=wrong)
        with pytest.raises(InvalidArgumentTypeError, match=_NOT_A_CONNECTION) as claimed:
            ex.claim_task("g", ctx)
        with pytest.raises(InvalidArgumentTypeError, match=_NOT_A_CONNECTION) as submitted:
            ex.submit_task_at("g", "a", TaskAction.FORWARD, ctx)
        assert "'i-9'" in str(claimed.value) and "'i-9'" in str(submitted.value)
        if hasattr(wrong, "close"):
            wrong.close()
    assert _rows(db) == []
    with db.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM bpm_flow_task")).scalar() == 0
    # The same operations with None, and with a Connection, still run.
    assert ex.claim_task("g", FlowContext.of("i-9", {"actor": "ann"})) is not None
    with db.begin() as conn:
        ctx = FlowContext.of("i-9", {"actor": "ann"}, connection=conn)
        ex.submit_task_at("g", "a", TaskAction.FORWARD, ctx)
    assert [row[0] for row in _rows(db)] == ["i-9"]


def test_the_index_reads_refuse_a_connection_that_is_not_a_connection(db: sa.Engine) -> None:
    """``inbox`` read around a ``Session`` or an ``Engine`` given as the caller's connection
    — outside the caller's transaction, on a second pooled connection — where ``status``,
    ``open_tasks`` and ``instances`` already refused it."""
    engine = FlowEngine()
    engine.load(Graph.from_text(_GRAPH))
    ex = sql_workflow(db, engine, state_controller=ActorStateController(), index=True)
    ex.claim_task("g", FlowContext.of("i-1", {"actor": "ann"}))
    for wrong in (db, "sqlite://"):
        repository = ex.state_repository
        assert isinstance(repository, SqlStateRepository)
        with pytest.raises(InvalidArgumentError, match="connection"):
            repository.index_inbox(
                ("actor:ann",), graph_id=None, limit=50, after=None, connection=wrong
            )
    with db.connect() as conn:
        ctx = FlowContext.of("me", {"actor": "ann"}, connection=conn)
        assert [task.instance_id for task in ex.inbox(ctx)] == ["i-1"]

