"""Repository configuration and error translation on a real database."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from _support import approve, ctx, executor, flow_engine, migrate, raw_row

from flow.workflow import ActorStateController, ConcurrentSubmitError, TaskAction
from flow_sqla import (
    RepositoryError,
    SqlStateRepository,
    TaskHistoryRecorder,
    UnstorableValueError,
    migrations,
    sql_workflow,
)


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def test_database_errors_surface_as_repository_error_with_the_cause(engine: sa.Engine) -> None:
    ex = executor(engine)  # tables were never created
    with pytest.raises(RepositoryError, match="no-table") as caught:
        ex.claim_task("oa", ctx("no-table", "employee"))
    assert isinstance(caught.value.__cause__, sa.exc.DBAPIError)
    assert not isinstance(caught.value, ConcurrentSubmitError)


def test_custom_auditor_fills_creator_and_updater(db: sa.Engine) -> None:
    repo = SqlStateRepository(db, auditor=lambda c: f"user:{c.get('actor')}")
    ex = sql_workflow(db, flow_engine())
    ex.state_repository = repo
    approve(ex, "aud-1", "employee", amount=1)
    snap = repo.load_snapshot("aud-1")
    assert snap is not None and (snap.creator, snap.updater) == ("user:employee",) * 2


def test_process_cache_follows_this_processes_commits(db: sa.Engine) -> None:
    ex = executor(db, cache="process")
    approve(ex, "pc-1", "employee", amount=1)
    assert approve(ex, "pc-1", "manager")
    assert ex.claim_task("oa", ctx("pc-1", "manager")) is None
    assert raw_row(db, "pc-1")["states"]["oa:manager"] == 1002  # type: ignore[index]


def test_unknown_cache_mode_is_rejected(db: sa.Engine) -> None:
    with pytest.raises(ValueError, match="cache"):
        SqlStateRepository(db, cache="everything")  # type: ignore[arg-type]


def test_an_engine_made_from_a_url_leaves_no_stale_transaction_in_its_pool(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engines created from a URL skip the pool's reset-on-return ROLLBACK (one round trip
    per operation): a committed operation issues no rollback at all, and a read through
    ``history()`` or ``states()`` still ends its transaction, so the pooled connection sees
    what another process commits afterwards (no REPEATABLE READ snapshot left open)."""
    url = db.url.render_as_string(hide_password=False)
    ours = executor(url)
    repo, recorder = ours.state_repository, ours.recorder
    assert isinstance(repo, SqlStateRepository) and recorder is not None
    assert ours.claim_task("oa", ctx("url-1", "employee", amount=1))  # connects, initializes
    rollbacks: list[object] = []
    do_rollback = repo.engine.dialect.do_rollback
    monkeypatch.setattr(
        repo.engine.dialect, "do_rollback", lambda c: (rollbacks.append(c), do_rollback(c))
    )
    assert approve(ours, "url-1", "employee", amount=1)
    assert rollbacks == []
    assert recorder.history("url-1")  # type: ignore[attr-defined]
    before = repo.states("url-1")
    other = executor(db)  # another process's engine
    assert approve(other, "url-1", "manager")
    assert repo.states("url-1")["oa:manager"] == 1002 != before.get("oa:manager")
    assert len(recorder.history("url-1")) == 2  # type: ignore[attr-defined]
    repo.engine.dispose()


def test_tables_never_migrated_get_an_error_saying_how_to_create_them(engine: sa.Engine) -> None:
    """The newcomer's first slip: the README's sql_workflow on a database nobody migrated."""
    from flow import FlowContext

    ex = executor(engine, index=True)
    with pytest.raises(RepositoryError, match=r"flow_sqla\.migrations\.upgrade") as raised:
        ex.claim_task("oa", FlowContext.of("m-1", {"actor": "employee", "amount": 1}))
    assert raised.value.instance_id == "m-1"
    with pytest.raises(RepositoryError, match="flow migrate"):
        ex.inbox(FlowContext.of(None, {"actor": "employee"}))


@pytest.mark.parametrize("url", ["nonsense", "nodialect://u:secret@h/db"])
def test_a_url_no_engine_can_be_made_from_is_a_repository_error(url: str) -> None:
    with pytest.raises(RepositoryError, match="Cannot create a database engine") as raised:
        sql_workflow(url, flow_engine())
    assert "secret" not in str(raised.value)


def _a_url_whose_driver_is_not_installed() -> str:
    for url, module in [
        ("postgresql+pg8000://u:secret@h/db", "pg8000"),
        ("mysql+asyncmy://u:secret@h/db", "asyncmy"),
        ("oracle+oracledb://u:secret@h/db", "oracledb"),
    ]:
        if importlib.util.find_spec(module) is None:
            return url
    pytest.skip("pg8000, asyncmy and oracledb are all installed here")


@pytest.mark.parametrize(
    "entry_point",
    [
        lambda url: sql_workflow(url, flow_engine()),
        lambda url: SqlStateRepository(url),
        migrations.upgrade,
        migrations.current,
    ],
    ids=["sql_workflow", "SqlStateRepository", "upgrade", "current"],
)
def test_a_url_whose_driver_is_not_installed_is_a_repository_error(
    entry_point: Callable[[str], object],
) -> None:
    """It was a bare ``ModuleNotFoundError``: SQLAlchemy knows the dialect and imports its
    driver when the engine is made."""
    with pytest.raises(RepositoryError, match="driver is not installed") as raised:
        entry_point(_a_url_whose_driver_is_not_installed())
    assert "secret" not in str(raised.value)


@pytest.mark.parametrize(
    "url", ["mysql+pymysql://u:s3cretpw@h:port/db", "mysql+pymysql://u:s3c@ret@[::1/db"]
)
@pytest.mark.parametrize(
    "entry_point",
    [lambda url: SqlStateRepository(url), migrations.upgrade, migrations.current],
    ids=["SqlStateRepository", "upgrade", "current"],
)
def test_a_url_sqlalchemy_cannot_parse_is_named_with_its_password_hidden(
    entry_point: Callable[[str], object], url: str
) -> None:
    """A bad port or a broken IPv6 address: the URL was shown as given, password included."""
    with pytest.raises(RepositoryError, match="Cannot create a database engine") as raised:
        entry_point(url)
    assert "s3c" not in str(raised.value) and "u:***@" in str(raised.value)


@pytest.mark.parametrize("query", ["bad=1", "charset=nosuch"])
@pytest.mark.parametrize(
    "entry_point",
    [
        lambda url: sql_workflow(url, flow_engine()).find_task("oa", ctx("q-1", "employee")),
        migrations.upgrade,
        migrations.current,
    ],
    ids=["operation", "upgrade", "current"],
)
def test_query_arguments_the_driver_refuses_are_a_repository_error(
    entry_point: Callable[[str], object], query: str
) -> None:
    """PyMySQL refuses an unknown argument with TypeError and an unknown charset with
    AttributeError when it connects — before any network: SQLAlchemy wraps neither, so every
    operation and migration on such a URL ended with a bare exception."""
    pytest.importorskip("pymysql")
    url = f"mysql+pymysql://u:s3cret@127.0.0.1:1/x?{query}"
    with pytest.raises(RepositoryError, match="the driver refused the URL's arguments") as raised:
        entry_point(url)
    assert "s3cret" not in str(raised.value)


def test_reading_the_revision_of_a_database_that_cannot_be_opened_is_a_repository_error(
    tmp_path: Path,
) -> None:
    """``migrations.current`` let SQLAlchemy's ``OperationalError`` through, where upgrade and
    downgrade raise RepositoryError."""
    url = f"sqlite:///{tmp_path / 'no such directory' / 'flow.sqlite'}"
    with pytest.raises(RepositoryError, match=r"Reading the revision of .* failed") as raised:
        migrations.current(url)
    assert isinstance(raised.value.__cause__, sa.exc.OperationalError)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("vars_filter", "actor"),  # split into letters, it left ``actor`` stored
        ("vars_filter", [1, None]),
        ("vars_filter", 5),
        ("index", "no"),  # taken for true
        ("plain_json", "false"),
        ("limits", "x"),
        ("tables", "x"),
    ],
)
def test_a_wrongly_typed_option_is_refused_when_the_executor_is_built(
    db: sa.Engine, option: str, value: object
) -> None:
    with pytest.raises(TypeError, match=option):
        sql_workflow(db, flow_engine(), **{option: value})  # type: ignore[arg-type]


def test_an_auditor_that_is_not_callable_is_refused_when_the_repository_is_built(
    db: sa.Engine,
) -> None:
    with pytest.raises(TypeError, match="auditor"):
        SqlStateRepository(db, auditor="alice")  # type: ignore[arg-type]


def test_an_auditor_returning_bytes_is_refused_and_nothing_is_written(db: sa.Engine) -> None:
    """``str(b"bob")`` stored the text ``b'bob'`` as the row's creator."""
    ex = sql_workflow(db, flow_engine())
    ex.state_repository = SqlStateRepository(db, auditor=lambda c: b"bob")
    with pytest.raises(UnstorableValueError, match=r"auditor.*'aud-2'"):
        approve(ex, "aud-2", "employee", amount=1)
    assert raw_row(db, "aud-2") is None


def test_history_rows_leave_out_the_same_keys_as_the_instance_row(db: sa.Engine) -> None:
    """The recorder filtered only its defaults: a controller's ``role`` and the keys given in
    ``vars_filter`` were kept out of ``vars`` but written into every history row."""
    for instance_id, options in (
        ("hf-1", {"state_controller": ActorStateController("actor", "role")}),
        ("hf-2", {"vars_filter": {"actor", "ssn"}}),
    ):
        ex = sql_workflow(db, flow_engine(), **options)  # type: ignore[arg-type]
        c = ctx(instance_id, "employee", amount=1, role="clerk", ssn="123-45-6789")
        assert ex.submit_task_if_waiting(ex.claim_task("oa", c), TaskAction.FORWARD, c)
        stored = raw_row(db, instance_id)
        assert stored is not None
        (entry,) = TaskHistoryRecorder(db).history(instance_id)
        kept = set(stored["vars"])
        assert set(entry.variables) == kept
        assert ("role" if instance_id == "hf-1" else "ssn") not in kept


def test_a_connection_to_another_kind_of_database_is_refused_before_any_sql(
    db: sa.Engine, tmp_path: Path
) -> None:
    """The repository's statements are built for its engine's dialect: a caller's connection
    to another kind of database (a second engine of the application's) gets a
    RepositoryError naming both, for operations and for the reads that take a connection —
    not an error from inside SQLAlchemy's compiler. Nothing is written on either side."""
    if db.dialect.name == "sqlite":
        pytest.skip("the other database here is SQLite")
    ex = sql_workflow(db, flow_engine(), state_controller=ActorStateController(), index=True)
    other = sa.create_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    migrations.upgrade(other)
    with other.begin() as conn:
        c = ctx("mixed-1", "employee", amount=1)
        c.connection = conn
        with pytest.raises(RepositoryError, match="connection is to a sqlite database"):
            ex.claim_task("oa", c)
        with pytest.raises(RepositoryError, match="sqlite"):
            ex.status("mixed-1", connection=conn)
        with pytest.raises(RepositoryError, match="sqlite"):
            ex.state_repository.restore_context("mixed-1", connection=conn)  # type: ignore[attr-defined]
        with pytest.raises(RepositoryError, match="sqlite"):
            ex.inbox(c)  # c carries the connection
        with pytest.raises(RepositoryError, match="sqlite"):
            ex.state_repository.evict("mixed-1", connection=conn)  # type: ignore[attr-defined]
    assert raw_row(db, "mixed-1") is None and raw_row(other, "mixed-1") is None


def test_mysql_and_mariadb_urls_are_one_kind_of_database(db: sa.Engine) -> None:
    """``mysql://`` and ``mariadb://`` reach the same server with two dialect names: a
    repository on one takes a caller's connection made with the other."""
    if db.dialect.name != "mysql":
        pytest.skip("a MySQL/MariaDB URL")
    driver = db.url.drivername.partition("+")[2]
    other = sa.create_engine(db.url.set(drivername=f"mariadb+{driver}" if driver else "mariadb"))
    ex = executor(db)
    try:
        with other.begin() as conn:
            c = ctx("kind-1", "employee", amount=1)
            c.connection = conn
            task = ex.claim_task("oa", c)
            assert task is not None and ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    finally:
        other.dispose()
    assert raw_row(db, "kind-1") is not None


def test_history_reads_and_writes_refuse_a_connection_to_another_kind_of_database(
    db: sa.Engine, tmp_path: Path
) -> None:
    """The recorder's statements are built for its engine too: a read or a record on a
    connection to another kind of database is refused before any SQL — on PostgreSQL the
    failing statement would abort the caller's transaction."""
    if db.dialect.name == "sqlite":
        pytest.skip("the other database here is SQLite")
    other = sa.create_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    recorder = TaskHistoryRecorder(db)
    with other.connect() as conn:
        with pytest.raises(RepositoryError, match="connection is to a sqlite database"):
            recorder.history("h-1", connection=conn)
        with pytest.raises(RepositoryError, match="sqlite"):
            recorder.by_assignee("employee", connection=conn)
