"""Hostile input to the approval aggregate on SQLite, MariaDB and PostgreSQL: values a column
cannot hold exactly (long candidates, NUL), arguments of the wrong type, and filters that a
collation would widen. Each gets the same typed error — or the same answer — on every dialect,
and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from _support import approve, ctx, every_row, executor, migrate

from flow import FlowContext, FlowEngine, Graph
from flow.errors import SnapshotError
from flow.workflow import (
    MAX_IDENTITIES,
    ActorStateController,
    InvalidArgumentTypeError,
    InvalidInstanceIdError,
    InvalidQueryError,
    TaskAction,
    WorkflowExecutor,
)
from flow_sqla import UnstorableValueError
from flow_sqla.tables import CANDIDATE_LENGTH
from flow_sqla.wiring import sql_workflow


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _role_graph(graph_id: str, role: str) -> Graph:
    return Graph.from_text(
        f"""
        id: {graph_id}
        layout:
          - {{id: start, type: start, link: review}}
          - {{id: review, meta: {{role: "{role}"}}, link: end}}
          - {{id: end, type: end}}
        """
    )


def _role_executor(db: sa.Engine, *graphs: Graph) -> WorkflowExecutor:
    engine = FlowEngine()
    for graph in graphs:
        engine.load(graph)
    return sql_workflow(db, engine, state_controller=ActorStateController("actor", "role"))


def _as_role(instance_id: str | None, role: str) -> FlowContext:
    return FlowContext.of(instance_id, {"role": role})


# -- candidates: refused, never clipped into another identity -------------------------------
def test_a_candidate_longer_than_its_column_is_refused_with_nothing_written(db: sa.Engine) -> None:
    """Clipped to 128 characters, roles sharing that prefix would become one candidate: each
    would see the other's tasks. The graph is refused instead, naming node and graph."""
    role = "r" * CANDIDATE_LENGTH + "-long"  # "role:" + this is well past the column
    ex = _role_executor(db, _role_graph("long", role))
    with pytest.raises(
        UnstorableValueError, match="candidate of node 'review' of graph 'long'"
    ) as e:
        ex.claim_task("long", _as_role("l-1", role))
    assert e.value.instance_id == "l-1"
    assert every_row(db) == []


def test_a_later_task_whose_candidate_does_not_fit_refuses_the_graph_before_it_starts(
    db: sa.Engine,
) -> None:
    """Refused only when that task opened, the first task's submit could never succeed: the
    instance would stay RUNNING at a task nobody can pass. The whole graph is checked at its
    first use instead, before anything is written."""
    role = "r" * CANDIDATE_LENGTH
    graph = Graph.from_text(
        f"""
        id: later
        layout:
          - {{id: start, type: start, link: apply}}
          - {{id: apply, meta: {{role: clerk}}, link: review}}
          - {{id: review, meta: {{role: "{role}"}}, link: end}}
          - {{id: end, type: end}}
        """
    )
    ex = _role_executor(db, graph)
    with pytest.raises(UnstorableValueError, match="candidate of node 'review'"):
        ex.claim_task("later", _as_role("later-1", "clerk"))
    assert every_row(db) == []
    assert ex.status("later-1") is None


def test_identities_sharing_a_prefix_never_see_each_others_tasks(db: sa.Engine) -> None:
    """A role that fills the column exactly is stored whole; a longer identity with the same
    first 128 characters matches nothing in the inbox (it was clipped onto the stored one)."""
    stored = "r" * (CANDIDATE_LENGTH - len("role:"))
    ex = _role_executor(db, _role_graph("fits", stored))
    assert ex.claim_task("fits", _as_role("f-1", stored)) is not None
    assert [t.instance_id for t in ex.inbox(_as_role(None, stored))] == ["f-1"]
    assert ex.inbox(_as_role(None, stored + "x")) == []
    assert ex.claim_task("fits", _as_role("f-1", stored + "x")) is None


# -- the creator filter compares exactly ------------------------------------------------------
def test_the_creator_filter_is_exact_about_case_and_trailing_spaces(db: sa.Engine) -> None:
    """``creator`` keeps the reference table's collation (case-insensitive and space-padded on
    MySQL/MariaDB); "my running requests" must still not list another user's."""
    ex = executor(db, index=True)
    for instance_id, auditor in (("c-1", "ann"), ("c-2", "Ann"), ("c-3", "ann ")):
        c = ctx(instance_id, "employee", amount=1, auditor=auditor)
        assert ex.claim_task("oa", c) is not None
    assert [s.instance_id for s in ex.instances(creator="ann")] == ["c-1"]
    assert [s.instance_id for s in ex.instances(creator="ANN")] == []
    assert [s.instance_id for s in ex.instances(creator="ann ")] == ["c-3"]


# -- NUL: PostgreSQL's text cannot hold it, so no dialect takes it ---------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda ex: ex.claim_task("oa", ctx("a\x00b", "employee", amount=1)),
        lambda ex: ex.claim_task("oa", ctx("n-1", "emp\x00loyee", amount=1)),
        lambda ex: ex.status("a\x00b"),
        lambda ex: ex.open_tasks("a\x00b"),
        lambda ex: ex.instances(creator="a\x00b"),
        lambda ex: ex.instances(graph_id="o\x00a"),
        lambda ex: ex.inbox(FlowContext.of(None, {"actor": "man\x00ager"})),
        lambda ex: ex.inbox(FlowContext.of(None, {"actor": "manager"}), graph_id="o\x00a"),
    ],
    ids=[
        "claim id",
        "claim actor",
        "status",
        "open_tasks",
        "creator",
        "graph_id",
        "identity",
        "inbox graph_id",
    ],
)
def test_a_nul_character_gets_the_same_typed_error_on_every_dialect(
    db: sa.Engine, call: Any
) -> None:
    ex = executor(db, index=True)
    approve(ex, "n-0", "employee", amount=1)
    before = every_row(db)
    with pytest.raises(UnstorableValueError, match="NUL character"):
        call(ex)
    assert every_row(db) == before


def test_a_message_with_nul_is_refused_before_anything_is_written(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    approve(ex, "n-2", "employee", amount=1)
    c = ctx("n-2", "manager")
    task = ex.claim_task("oa", c)
    before = every_row(db)
    with pytest.raises(UnstorableValueError, match="NUL character"):
        ex.submit_task_if_waiting(task, TaskAction.FORWARD, c, message="ok\x00")
    with pytest.raises(UnstorableValueError, match="NUL character"):
        ex.withdraw("oa", ctx("n-2", "employee"), message="\x00")
    assert every_row(db) == before


# -- arguments of the wrong type ---------------------------------------------------------------
@pytest.mark.parametrize("message", [5, b"bytes", ["a"], {"text": "x"}])
def test_a_message_that_is_not_text_is_refused_before_anything_is_written(
    db: sa.Engine, message: Any
) -> None:
    """Bytes would be stored as a blob on SQLite, as text on MariaDB and as hex on PostgreSQL."""
    ex = executor(db, index=True)
    approve(ex, "m-1", "employee", amount=1)
    c = ctx("m-1", "manager")
    task = ex.claim_task("oa", c)
    before = every_row(db)
    calls = [
        lambda: ex.submit_task_if_waiting(task, TaskAction.FORWARD, c, message=message),
        lambda: ex.submit_task_at("oa", "manager", TaskAction.FORWARD, c, message=message),
        lambda: ex.withdraw("oa", ctx("m-1", "employee"), message=message),
        lambda: ex.send_back(task, c, message=message),
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentTypeError, match="message must be a string") as caught:
            call()
        assert caught.value.instance_id == "m-1"
    assert every_row(db) == before


def test_ids_and_filters_of_the_wrong_type_get_typed_errors(db: sa.Engine) -> None:
    """MariaDB would compare ``['x']`` as the text ``'x'`` and report that instance's status;
    PostgreSQL would raise a driver error; SQLite would match nothing."""
    ex = executor(db, index=True)
    approve(ex, "x", "employee", amount=1)
    for bad in (5, ["x"], None, ""):
        with pytest.raises(InvalidInstanceIdError):
            ex.status(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInstanceIdError):
            ex.open_tasks(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="creator"):
        ex.instances(creator=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="graph_id"):
        ex.instances(graph_id=["oa"])  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="graph_id"):
        ex.inbox(ctx("x", "manager"), graph_id=5)  # type: ignore[arg-type]


# -- the caller's identities: many, or not strings ----------------------------------------
class _ManyRoles(ActorStateController):
    """An actor in ``count`` roles (``role:r0`` ...), e.g. a directory's groups."""

    def __init__(self, count: int, extra: tuple[Any, ...] = ()) -> None:
        super().__init__("actor", "role")
        self.count = count
        self.extra = extra

    def identities(self, ctx: FlowContext) -> tuple[str, ...]:
        roles = tuple(f"role:r{n}" for n in range(self.count))
        return (*super().identities(ctx), *roles, *self.extra)


def test_an_inbox_matches_up_to_max_identities_and_refuses_more(db: sa.Engine) -> None:
    """Each identity is one index range of the inbox's one statement, and each range skips
    tasks the others list: the statement grows with the square of their number (thousands
    took the server's memory). Up to ``MAX_IDENTITIES`` distinct ones work — repeats count
    once — and one more is an ``InvalidQueryError`` before any statement, on every dialect."""
    engine = FlowEngine()
    last = f"r{MAX_IDENTITIES - 2}"  # the actor's own identity + the roles make the maximum
    engine.load(_role_graph("many", last))
    controller = _ManyRoles(MAX_IDENTITIES - 1, extra=("role:r0",) * 500)
    ex = sql_workflow(db, engine, state_controller=controller, index=True)
    c = _as_role("m-1", last)
    assert ex.claim_task("many", c) is not None  # the review is open, for role:<last>
    page = ex.inbox(FlowContext.of(None, {"actor": "ann"}))
    assert [(t.instance_id, t.node_id) for t in page] == [("m-1", "review")]
    controller.count = MAX_IDENTITIES  # one more distinct identity
    with pytest.raises(InvalidQueryError, match=f"at most {MAX_IDENTITIES}"):
        ex.inbox(FlowContext.of(None, {"actor": "ann"}))


@pytest.mark.parametrize("identity", [5, None, ["role:boss"], b"role:boss"])
def test_an_identity_that_is_not_a_string_is_the_same_typed_error_on_every_dialect(
    db: sa.Engine, identity: Any
) -> None:
    ex = sql_workflow(
        db, FlowEngine(), state_controller=_ManyRoles(1, extra=(identity,)), index=True
    )
    with pytest.raises(InvalidQueryError, match="identity must be a string"):
        ex.inbox(FlowContext.of(None, {"actor": "ann"}))


class _EmptyCandidate(ActorStateController):
    def candidates(self, node: Any) -> tuple[str, ...]:
        return ("",)


def test_an_empty_candidate_is_refused_before_the_instance_starts(db: sa.Engine) -> None:
    """No identity matches ``""`` (an empty identity names nobody; on MySQL/MariaDB it marks
    an instance's sentinel row): a task with that candidate would be in no inbox."""
    engine = FlowEngine()
    engine.load(_role_graph("empty", "x"))
    ex = sql_workflow(db, engine, state_controller=_EmptyCandidate("actor", "role"), index=True)
    with pytest.raises(UnstorableValueError, match="empty"):
        ex.claim_task("empty", _as_role("e-1", "x"))
    assert every_row(db) == []


def test_a_connection_in_utf8mb3_starts_instances_and_lists_only_their_tasks(
    db: sa.Engine,
) -> None:
    """MySQL/MariaDB's sentinel row travels over an older ``charset=utf8`` connection too."""
    if db.dialect.name not in ("mysql", "mariadb"):
        pytest.skip("a MySQL/MariaDB connection character set")
    old = sa.create_engine(db.url.update_query_dict({"charset": "utf8"}))
    try:
        ex = executor(old, index=True)
        assert approve(ex, "u-1", "employee", amount=1)
        assert [t.node_id for t in ex.open_tasks("u-1")] == ["manager"]
        assert [t.instance_id for t in ex.inbox(ctx("u-1", "manager"))] == ["u-1"]
    finally:
        old.dispose()


def test_a_stored_lineage_that_is_not_node_ids_is_a_snapshot_error(db: sa.Engine) -> None:
    """Only a hand edit or another program writes one: reported with its instance and the
    remedy, not handed out as a lineage of numbers (a send-back would look them up)."""
    ex = executor(db, index=True)
    approve(ex, "lin-1", "employee", amount=1)
    todo = sa.table("bpm_flow_todo", sa.column("lineage"), sa.column("instant_id"))
    for stored in ("[1, 2]", "[null]", '{"a": 1}', '"apply"'):
        with db.begin() as conn:
            conn.execute(todo.update().where(todo.c.instant_id == "lin-1").values(lineage=stored))
        with pytest.raises(SnapshotError, match="reindex") as caught:
            ex.open_tasks("lin-1")
        assert caught.value.instance_id == "lin-1"
        with pytest.raises(SnapshotError, match="lineage"):
            ex.inbox(ctx("lin-1", "manager"))


def test_a_task_of_the_wrong_type_is_refused(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    approve(ex, "t-1", "employee", amount=1)
    c = ctx("t-1", "manager")
    (open_task,) = ex.open_tasks("t-1")
    before = every_row(db)
    with pytest.raises(InvalidArgumentTypeError, match="task must be a Task, an OpenTask"):
        ex.send_back("manager", c)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match="task must be a Task from claim_task"):
        ex.submit_task_if_waiting(open_task, TaskAction.FORWARD, c)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match="task must be a Task from claim_task"):
        ex.submit_task("manager", TaskAction.FORWARD, c)  # type: ignore[arg-type]
    assert every_row(db) == before


def test_a_long_candidate_in_a_caller_transaction_leaves_nothing(db: sa.Engine) -> None:
    """The graph's candidates are checked before the operation writes anything: an app that
    catches the error and commits keeps nothing — no row, no state, no history."""
    role = "r" * CANDIDATE_LENGTH
    graph = Graph.from_text(
        f"""
        id: lg
        layout:
          - {{id: start, type: start, link: apply}}
          - {{id: apply, meta: {{actor: ann}}, link: review}}
          - {{id: review, meta: {{role: "{role}"}}, link: end}}
          - {{id: end, type: end}}
        """
    )
    ex = _role_executor(db, graph)
    with db.begin() as conn:
        c = FlowContext.of("lg-1", {"actor": "ann"}, connection=conn)
        with pytest.raises(UnstorableValueError, match="candidate of node 'review'"):
            ex.claim_task("lg", c)
        with pytest.raises(UnstorableValueError, match="candidate of node 'review'"):
            ex.submit_task_at("lg", "apply", TaskAction.FORWARD, c)
    assert every_row(db) == []


def test_a_node_title_with_nul_is_stored_without_it_on_every_dialect(db: sa.Engine) -> None:
    """Titles are display text (cut to 64): a NUL in one must not fail every submit of the
    node on PostgreSQL alone."""
    graph = Graph.from_text(
        """
        id: nt
        layout:
          - {id: start, type: start, link: apply}
          - {id: apply, title: "Ap\\0ply", meta: {actor: ann}, link: end}
          - {id: end, type: end}
        """
    )
    ex = _role_executor(db, graph)
    c = FlowContext.of("nt-1", {"actor": "ann"})
    assert [t.node_title for t in ex.inbox(c)] == []
    assert ex.submit_task_if_waiting(ex.claim_task("nt", c), TaskAction.FORWARD, c)
    with db.connect() as conn:
        titles = conn.execute(sa.text("SELECT source_node_name FROM bpm_flow_task")).scalars()
        assert list(titles) == ["Apply"]


def test_vars_filter_lets_a_gateway_route_on_a_controller_key(db: sa.Engine) -> None:
    """By default the controller's keys are not stored (who acts is the request's, and a
    stored ``dept`` would let anyone claim a ``dept`` task). An app whose gateway routes on
    one passes the keys it wants left out; later claims then route as the submit did."""
    graph = Graph.from_text(
        """
        id: dept
        layout:
          - {id: start, type: start, link: apply}
          - {id: apply, meta: {actor: ann}, link: route}
          - id: route
            type: exclusive
            link: [{nextId: sales, when: 'dept == "sales"'}, other]
          - {id: sales, meta: {actor: sam}, link: end}
          - {id: other, meta: {actor: olga}, link: end}
          - {id: end, type: end}
        """
    )
    engine = FlowEngine()
    engine.load(graph)
    controller = ActorStateController("actor", "dept")
    ex = sql_workflow(
        db, engine, state_controller=controller, vars_filter=("actor", "auditor", "creator")
    )
    ann = FlowContext.of("d-1", {"actor": "ann", "dept": "sales"})
    assert ex.submit_task_if_waiting(ex.claim_task("dept", ann), TaskAction.FORWARD, ann)
    assert [t.node_id for t in ex.open_tasks("d-1")] == ["sales"]
    claimed = ex.claim_task("dept", FlowContext.of("d-1", {"actor": "sam"}))
    assert claimed is not None and claimed.node_id == "sales"


def test_a_task_claimed_for_one_instance_does_not_act_on_another(db: sa.Engine) -> None:
    """A ``Task`` claimed for one instance, submitted or sent back with a context naming
    another (a task kept in a web session, an id from the URL): False, nothing written — it
    completed the other instance's task."""
    ex = executor(db, index=True)
    for instance_id in ("x-1", "x-2"):
        assert approve(ex, instance_id, "employee", amount=1)
    task = ex.claim_task("oa", ctx("x-1", "manager"))
    assert task is not None and task.node.id == "manager"
    assert ex.claim_task("oa", ctx("x-2", "manager")) is not None
    before = every_row(db)
    other = ctx("x-2", "manager")
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, other) is False
    assert ex.send_back(task, other) is False
    assert every_row(db) == before
    assert ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx("x-1", "manager"))
