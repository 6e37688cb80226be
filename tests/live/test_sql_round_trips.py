"""Round trips of an approval on MySQL/MariaDB, where a connection may send several statements
in one query (mysqlclient, by default).

The history row's INSERT waits for the unit of work's write and goes out with the row's UPDATE
and the task index's rows: an approval is its locking read, one round trip of writes and the
``COMMIT`` — index on or off, in its own unit or in the caller's transaction. A connection
without multi-statements sends each statement alone, with the same result. Round trips are
counted where the driver sends a query (``Connection.query``; ``COMMIT`` is not one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from _support import count_rows, ctx, executor, flow_engine, migrate, raw_row

from flow.codec import CodecLimits
from flow.graph import Node
from flow.workflow import ActorStateController, TaskAction, TaskState
from flow_sqla import RepositoryError
from flow_sqla.wiring import sql_workflow

_MULTI_STATEMENTS = 1 << 16  # CLIENT_MULTI_STATEMENTS

#: (driver, whether its connections send statements together, what the test connects with).
_SETUPS = {
    "mysqldb": ("mysqldb", True, {}),
    "mysqldb-single": ("mysqldb", False, {"multi_statements": False}),
    "pymysql": ("pymysql", False, {}),
    # Allowed by the flag, but SQLAlchemy binds PyMySQL's parameters by name: sent alone.
    "pymysql-multi": ("pymysql", False, {"client_flag": _MULTI_STATEMENTS}),
}
_APPLIED = {"oa:apply": int(TaskState.COMPLETED), "oa:amount": int(TaskState.COMPLETED)}


class Queries:
    """The queries the driver connections of one engine sent, in order."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def during(self, fn: Callable[[], Any]) -> int:
        """How many queries ``fn`` sent."""
        start = len(self.sent)
        fn()
        return len(self.sent) - start


def _counting_class(driver: str, queries: Queries) -> type:
    if driver == "mysqldb":
        from MySQLdb.connections import Connection
    else:
        from pymysql.connections import Connection

    class Counting(Connection):  # type: ignore[misc, valid-type]
        def query(self, sql: Any, *args: Any, **kw: Any) -> Any:
            text = sql.decode(errors="replace") if isinstance(sql, bytes) else str(sql)
            queries.sent.append(text)
            return super().query(sql, *args, **kw)

    return Counting


@pytest.fixture(params=list(_SETUPS))
def counted(
    request: pytest.FixtureRequest, make_database_url: Callable[[str], str]
) -> Iterator[tuple[sa.Engine, Queries, bool]]:
    """A migrated throwaway database, an engine whose queries are counted, and whether its
    connections send statements together."""
    driver, together, extra = _SETUPS[request.param]
    pytest.importorskip("MySQLdb" if driver == "mysqldb" else "pymysql")
    url = sa.make_url(make_database_url("mysql")).set(drivername=f"mysql+{driver}")
    plain = sa.create_engine(url)
    args, params = plain.dialect.create_connect_args(url)
    plain.dispose()
    flags = params.get("client_flag", 0)
    params = {**params, **extra}
    if "client_flag" in extra:  # SQLAlchemy's own flags kept, as with connect_args
        params["client_flag"] = extra["client_flag"] | flags
    queries = Queries()
    connection_class = _counting_class(driver, queries)
    engine = sa.create_engine(url, creator=lambda: connection_class(*args, **params))
    migrate(engine)
    yield engine, queries, together
    engine.dispose()


def _todo_nodes(engine: sa.Engine, instance_id: str) -> list[str]:
    """The open tasks' node ids of the instance's todo rows (its sentinel row left out)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT node_id FROM bpm_flow_todo WHERE instant_id = :i AND candidate <> ''"),
            {"i": instance_id},
        )
        return [row[0] for row in rows]


@pytest.mark.parametrize("index", [False, True], ids=["index-off", "index-on"])
def test_submit_task_at_sends_its_writes_in_one_round_trip(
    counted: tuple[sa.Engine, Queries, bool], index: bool
) -> None:
    engine, queries, together = counted
    ex = executor(engine, index=index)
    steps = (("apply", "employee"), ("manager", "manager"))
    sent = [
        queries.during(
            lambda node=node, who=who: ex.submit_task_at(
                "oa", node, TaskAction.FORWARD, ctx("rt-1", who, amount=1)
            )
        )
        for node, who in steps
    ]
    # The locking read (the first approval's insert-if-absent), then the writes: the history
    # row, the row's UPDATE and — index on — the task rows.
    alone = 4 if index else 3
    assert sent == ([2, 2] if together else [alone, alone])
    row = raw_row(engine, "rt-1")
    assert row is not None
    assert row["states"]["oa:manager"] == int(TaskState.COMPLETED)  # type: ignore[index]
    assert count_rows(engine, "bpm_flow_task", "rt-1") == 2
    if index:
        assert ex.status("rt-1").name == "COMPLETED"  # type: ignore[union-attr]
        assert _todo_nodes(engine, "rt-1") == []


@pytest.mark.parametrize("index", [False, True], ids=["index-off", "index-on"])
def test_the_readme_pattern_sends_its_writes_in_one_round_trip(
    counted: tuple[sa.Engine, Queries, bool], index: bool
) -> None:
    engine, queries, together = counted
    ex = executor(engine, index=index)

    def approve(who: str) -> None:
        with engine.begin() as conn:
            c = ctx("rt-2", who, conn, amount=1)
            task = ex.claim_task("oa", c)
            assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)

    first = queries.during(lambda: approve("employee"))
    assert _todo_nodes(engine, "rt-2") == (["manager"] if index else [])
    second = queries.during(lambda: approve("manager"))
    alone = 4 if index else 3
    assert [first, second] == ([2, 2] if together else [alone, alone])
    assert count_rows(engine, "bpm_flow_task", "rt-2") == 2
    assert _todo_nodes(engine, "rt-2") == []


def _refuse(engine: sa.Engine, name: str, when: str, table: str) -> None:
    """A trigger that fails every ``when`` (``BEFORE INSERT``...) on ``table``."""
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TRIGGER {name} {when} ON {table} FOR EACH ROW "
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'"
        )


def test_a_history_row_the_server_refuses_keeps_nothing_of_the_approval(
    counted: tuple[sa.Engine, Queries, bool],
) -> None:
    engine, _, _ = counted
    ex = executor(engine, index=True)
    ex.submit_task_at("oa", "apply", TaskAction.FORWARD, ctx("rt-3", "employee", amount=1))
    _refuse(engine, "rt_no_history", "BEFORE INSERT", "bpm_flow_task")
    with pytest.raises(RepositoryError, match="refused by the test") as raised:
        ex.submit_task_at("oa", "manager", TaskAction.FORWARD, ctx("rt-3", "manager", amount=1))
    assert raised.value.instance_id == "rt-3"
    row = raw_row(engine, "rt-3")
    assert row is not None and row["states"] == _APPLIED
    assert count_rows(engine, "bpm_flow_task", "rt-3") == 1
    assert _todo_nodes(engine, "rt-3") == ["manager"]


def test_a_task_row_the_server_refuses_after_the_write_leaves_the_claim_sent_once(
    counted: tuple[sa.Engine, Queries, bool],
) -> None:
    """In the caller's transaction the claim's write rides in the submit's UPDATE. When a
    statement after that UPDATE fails, the claim counts as sent: a caller who commits anyway
    keeps the submit's states, not the claim's written again over them at the COMMIT."""
    engine, _, _ = counted
    ex = executor(engine, index=True)
    ex.submit_task_at("oa", "apply", TaskAction.FORWARD, ctx("rt-4", "employee", amount=1))
    _refuse(engine, "rt_no_todo_delete", "BEFORE DELETE", "bpm_flow_todo")
    with engine.begin() as conn:
        c = ctx("rt-4", "manager", conn, amount=1)
        task = ex.claim_task("oa", c)
        with pytest.raises(RepositoryError, match="refused by the test"):
            ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    row = raw_row(engine, "rt-4")
    assert row is not None
    assert row["states"]["oa:manager"] == int(TaskState.COMPLETED)  # type: ignore[index]


class _ManyCandidates(ActorStateController):
    """The manager's task goes to the manager and 39 deputies: more todo rows than one
    statement sent together carries (``flow_sqla._todo.MERGE_ROWS``)."""

    def candidates(self, node: Node) -> tuple[str, ...]:
        found = super().candidates(node)
        if node.id != "manager":
            return found
        return (*found, *(f"actor:deputy{n}" for n in range(39)))


def test_a_task_of_many_candidates_sends_its_rows_after_the_writes_sent_together(
    counted: tuple[sa.Engine, Queries, bool],
) -> None:
    engine, queries, together = counted
    ex = sql_workflow(engine, flow_engine(), state_controller=_ManyCandidates("actor"), index=True)
    c = ctx("rt-5", "employee", amount=1)
    sent = queries.during(lambda: ex.submit_task_at("oa", "apply", TaskAction.FORWARD, c))
    assert sent == (3 if together else 4)  # the rows' INSERT is a round trip of its own
    assert len(_todo_nodes(engine, "rt-5")) == 40
    page = ex.inbox(ctx(None, "deputy17"))  # type: ignore[arg-type]
    assert [(t.instance_id, t.node_id) for t in page] == [("rt-5", "manager")]
    ex.submit_task_at("oa", "manager", TaskAction.FORWARD, ctx("rt-5", "manager", amount=1))
    assert _todo_nodes(engine, "rt-5") == []
    assert count_rows(engine, "bpm_flow_task", "rt-5") == 2


def test_statements_too_large_together_for_the_server_go_in_round_trips_of_their_own(
    counted: tuple[sa.Engine, Queries, bool],
) -> None:
    """Each statement fits the server's ``max_allowed_packet``; the history row and the row's
    UPDATE each carrying a variable of 60 % of it do not fit together (the server drops the
    connection on such a query): they go one after the other."""
    engine, _, _ = counted
    with engine.connect() as conn:
        packet = int(conn.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
    if packet > 64 * 1024 * 1024:
        pytest.skip(f"max_allowed_packet is {packet} bytes: too large a variable to send here")
    size = packet * 6 // 10
    ex = sql_workflow(
        engine,
        flow_engine(),
        state_controller=ActorStateController(),
        limits=CodecLimits(max_bytes=size + 1024),
    )
    c = ctx("rt-6", "employee", amount=1, note="x" * size)
    ex.submit_task_at("oa", "apply", TaskAction.FORWARD, c)
    row = raw_row(engine, "rt-6")
    assert row is not None and len(row["vars"]["note"]) == size  # type: ignore[index]
    assert count_rows(engine, "bpm_flow_task", "rt-6") == 1
