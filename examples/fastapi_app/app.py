"""An expense-approval service: FastAPI + flow + flow_sqla, one transaction per request.

How to run and try it: ``examples/fastapi_app/README.md``. Besides filing, reading and
deciding an expense it serves ``GET /inbox`` (what waits for the caller, paged),
``POST /expenses/{id}/withdraw`` (the employee who filed it takes it back) and
``POST /expenses/{id}/send-back`` (back to whoever sent it, by lineage). Typed flow errors map
to HTTP statuses: 404 unknown expense, 409 closed or decided meanwhile, 422 a send-back the
guard refuses, 403 a caller who is not a candidate.

Each request that changes something is one unit of work run by
``flow_sqla.run_in_transaction``: a connection from ``engine.begin()`` goes into
``FlowContext.of(id, connection=conn)``, so the flow's state change, its history row and this
app's own ``expense`` row commit together, or roll back together when the request fails. A
deadlock, lock timeout, serialization failure (PostgreSQL SERIALIZABLE) or Galera certification
failure — at any statement or at COMMIT — re-runs the whole unit; the response is built after
the commit, so a client never sees success for a write that did not commit. A decision is
re-run even when the connection was lost during its COMMIT (``idempotent=True``:
``submit_task_if_waiting`` re-checks under the row lock, so a decision that did commit is never
applied twice); filing an expense is not (a re-run would file a second one): the client gets
503 and looks before it files again. Read-only requests use the ``transaction`` dependency.

Who is calling comes from the ``X-Actor`` header — a stand-in for real authentication.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, Field

from flow import FlowContext, FlowEngine, Graph, Node, NodeType
from flow.workflow import (
    MAX_CURSOR,
    ActorStateController,
    ConcurrentSubmitError,
    InstanceClosedError,
    InstanceStatus,
    SendBackError,
    TaskAction,
    TaskState,
    WorkflowExecutor,
)
from flow_sqla import (
    CommitOutcomeUnknownError,
    TaskHistoryRecorder,
    UnstorableValueError,
    migrations,
    run_in_transaction,
    sql_workflow,
)
from flow_sqla.tables import ExactString

GRAPH_FILE = Path(__file__).resolve().parent.parent / "oa.yml"
DEFAULT_URL = "sqlite:///fastapi-demo.sqlite"
DECISIONS: dict[str, TaskAction] = {
    "approve": TaskAction.FORWARD,
    "send_back": TaskAction.BACK,
    "reject": TaskAction.TERMINATE,
}

metadata = sa.MetaData()
expense = sa.Table(  # the app's own business table, written in the same transaction
    "expense",
    metadata,
    # Compared exactly, as flow_sqla's own id columns: MySQL/MariaDB's default collation
    # would match "EXP-1" or "exp-1 " to the row of "exp-1", another flow instance.
    sa.Column("instance_id", ExactString(64), primary_key=True),
    sa.Column("purpose", sa.String(200), nullable=False),
    sa.Column("amount", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("filed_by", sa.String(64)),
)


#: The largest amount the ``expense.amount`` column holds on every database (INTEGER).
MAX_AMOUNT = 2**31 - 1


#: No NUL character: PostgreSQL's text types cannot hold one, so a statement carrying it fails
#: there (a 500) while SQLite and MariaDB store it. Every text the app writes or looks up is
#: checked against it before the request touches the database, alike on every backend.
NO_NUL = r"^[^\x00]*$"


class NewExpense(BaseModel):
    purpose: str = Field(min_length=1, max_length=200, pattern=NO_NUL)
    # strict: ``true`` or ``"5"`` is not an amount
    amount: int = Field(gt=0, le=MAX_AMOUNT, strict=True)


class Decision(BaseModel):
    decision: Literal["approve", "send_back", "reject"]
    message: str | None = None


class TaskOut(BaseModel):
    node: str
    title: str | None
    actor: str | None


class ExpenseOut(BaseModel):
    id: str
    purpose: str
    amount: int
    status: str
    tasks: list[TaskOut]


class Comment(BaseModel):
    message: str | None = None


class InboxTask(BaseModel):
    expense: str
    node: str
    title: str
    state: Literal["ready", "waiting"]
    sent_by: str | None
    since: datetime


class InboxPage(BaseModel):
    tasks: list[InboxTask]
    next: int | None = Field(description="pass as ?after= for the next page; null at the end")


class HistoryOut(BaseModel):
    task: str
    result: str
    by: str
    next: str
    message: str | None


def transaction(request: Request) -> Iterator[sa.Connection]:
    """One transaction per request: commits when the endpoint returns, rolls back on error."""
    engine: sa.Engine = request.app.state.engine
    with engine.begin() as conn:
        yield conn


Conn = Annotated[sa.Connection, Depends(transaction, scope="function")]
#: Who calls (your authentication would say); as long as the flow tables' actor columns, and
#: no NUL: it is written to ``expense.filed_by`` before the flow sees it, so only this check
#: keeps PostgreSQL from failing the insert (a 500 where the other backends gave a 422).
Actor = Annotated[
    str,
    BeforeValidator(lambda value: _header_text(value)),
    Header(alias="X-Actor", min_length=1, max_length=64, pattern=NO_NUL),
]
#: An expense id from a URL: no NUL (PostgreSQL's text cannot hold one; the query would fail).
ExpenseId = Annotated[str, PathParam(pattern=NO_NUL)]


def _header_text(value: object) -> object:
    """A header as the client wrote it: HTTP hands its bytes over as Latin-1 text, so
    ``X-Actor: José`` sent as UTF-8 arrived as ``JosÃ©`` — compared and stored so, and 64
    characters counted as bytes. Bytes that are not UTF-8 are a 422."""
    if not isinstance(value, str) or value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise ValueError("must be UTF-8 text") from None


def _safe(part: object) -> object:
    """A location or message part as JSON can carry it (a key may be a lone surrogate)."""
    if isinstance(part, int):
        return part
    return str(part).encode("utf-8", "backslashreplace").decode("utf-8")


def create_app(database_url: str | None = None) -> FastAPI:
    """The service on ``database_url`` (default ``$FLOW_DATABASE_URL``, else a SQLite file).

    Creates the flow tables (flow_sqla's migrations) and the ``expense`` table at startup;
    a real deployment runs ``alembic upgrade head`` in its release step instead.
    """
    engine = sa.create_engine(database_url or os.environ.get("FLOW_DATABASE_URL", DEFAULT_URL))
    migrations.upgrade(engine)
    metadata.create_all(engine)
    graph = Graph.from_file(GRAPH_FILE, strict=True)
    workflow = sql_workflow(engine, FlowEngine(), state_controller=ActorStateController())
    history = TaskHistoryRecorder(engine, index=True)

    app = FastAPI(title="Expense approvals")
    app.state.engine = engine

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's own 422, without the rejected input: a value JSON cannot carry back (a
        lone surrogate, NaN) would turn the refusal into a 500."""
        errors = [
            {
                "loc": [_safe(part) for part in error.get("loc", ())],
                "msg": _safe(error.get("msg", "")),
                "type": error.get("type"),
            }
            for error in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(SendBackError)
    def not_sendable(request: Request, exc: SendBackError) -> JSONResponse:
        """The task has no single earlier task to go back to (first task, after a split)."""
        return JSONResponse({"detail": exc.reason}, status_code=422)

    @app.exception_handler(UnstorableValueError)
    def unstorable(request: Request, exc: UnstorableValueError) -> JSONResponse:
        """A value the tables cannot hold (an actor over 64 characters, a NUL in a message):
        the request is refused and nothing was written."""
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(InstanceClosedError)
    def closed(request: Request, exc: InstanceClosedError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(ConcurrentSubmitError)
    def busy(request: Request, exc: ConcurrentSubmitError) -> JSONResponse:
        """Every attempt lost to concurrent requests on the same expense: try again later."""
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(CommitOutcomeUnknownError)
    def unknown(request: Request, exc: CommitOutcomeUnknownError) -> JSONResponse:
        """The database connection dropped during COMMIT: look before repeating the request."""
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.post("/expenses", status_code=201)
    def submit_expense(body: NewExpense, actor: Actor) -> ExpenseOut:
        """The employee files an expense: the flow starts and their own task is submitted."""
        instance_id = f"exp-{uuid.uuid4().hex[:12]}"

        def file(conn: sa.Connection) -> ExpenseOut:
            conn.execute(
                expense.insert().values(
                    instance_id=instance_id,
                    purpose=body.purpose,
                    amount=body.amount,
                    status="pending",
                    filed_by=actor,
                )
            )
            ctx = FlowContext.of(instance_id, {"amount": body.amount}, connection=conn)
            ctx.put("actor", actor)
            task = workflow.claim_task(graph, ctx)
            if task is None:
                raise HTTPException(403, f"{actor!r} cannot file an expense")
            workflow.submit_task(task, TaskAction.FORWARD, ctx, message=body.purpose)
            return _expense_out(conn, workflow, graph, instance_id)

        return run_in_transaction(engine, file)  # a blind submit: never re-run after COMMIT

    @app.get("/expenses/{instance_id}")
    def get_expense(instance_id: ExpenseId, conn: Conn) -> ExpenseOut:
        """The expense with the tasks it waits on (empty once approved or rejected)."""
        return _expense_out(conn, workflow, graph, instance_id)

    @app.get("/expenses/{instance_id}/tasks")
    def get_tasks(instance_id: ExpenseId, conn: Conn) -> list[TaskOut]:
        """Who has to act now: the tasks the expense waits on."""
        return _expense_out(conn, workflow, graph, instance_id).tasks

    @app.post("/expenses/{instance_id}/decisions")
    def decide(instance_id: ExpenseId, body: Decision, actor: Actor) -> ExpenseOut:
        """Approve, send back or reject the task ``actor`` is responsible for, with a message."""

        def decide_once(conn: sa.Connection) -> ExpenseOut:
            _expense_row(conn, instance_id)
            ctx = FlowContext.of(instance_id, connection=conn)
            ctx.put("actor", actor)
            task = workflow.claim_task(graph, ctx)
            if task is None or task.state != TaskState.WAITING:
                raise HTTPException(409, f"nothing of {instance_id} waits for {actor!r}")
            action = DECISIONS[body.decision]
            if action == TaskAction.BACK and not _has_earlier_task(task.node):
                # BACK of a first task only clears its own state: it would wait for the same
                # person again, "sent back" as often as they click.
                first = f"{task.node_id!r} is the first task: nothing to send it back to"
                raise HTTPException(422, first)
            if not workflow.submit_task_if_waiting(task, action, ctx, message=body.message):
                raise HTTPException(409, f"task {task.node_id!r} was decided meanwhile")
            status = {"send_back": "sent back", "reject": "rejected"}.get(body.decision)
            if status is None:
                open_tasks = _open_tasks(conn, workflow, graph, instance_id)
                status = "pending" if open_tasks else "approved"
            conn.execute(
                expense.update().where(expense.c.instance_id == instance_id).values(status=status)
            )
            return _expense_out(conn, workflow, graph, instance_id)

        # Safe to re-run even after a lost COMMIT: the re-run finds the task decided (409).
        return run_in_transaction(engine, decide_once, idempotent=True)

    @app.get("/expenses/{instance_id}/history")
    def get_history(instance_id: ExpenseId, conn: Conn) -> list[HistoryOut]:
        """The audit trail, oldest first."""
        _expense_row(conn, instance_id)
        return [
            HistoryOut(
                task=entry.source_node_id,
                result=RESULTS.get(entry.status, entry.status.name.lower()),
                by=entry.assignee,
                next=entry.target_node_id,
                message=entry.message,
            )
            # On the request's connection: a second one from the pool, taken while this one
            # is held, would make concurrent requests wait for each other's (and time out).
            for entry in history.history(instance_id, connection=conn)
        ]

    @app.get("/inbox")
    def inbox(
        actor: Actor,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        after: Annotated[int | None, Query(ge=0, le=MAX_CURSOR)] = None,
    ) -> InboxPage:
        """What waits for the caller, oldest first: one indexed query per page."""
        who = FlowContext.of(None, {"actor": actor})
        tasks = workflow.inbox(who, graph_id=graph.id, limit=limit, after=after)
        return InboxPage(
            tasks=[
                InboxTask(
                    expense=t.instance_id,
                    node=t.node_id,
                    title=t.node_title,
                    state="waiting" if t.state == TaskState.WAITING else "ready",
                    sent_by=t.lineage[-1] if t.lineage else None,
                    since=t.opened_at,
                )
                for t in tasks
            ],
            next=tasks[-1].cursor if len(tasks) == limit else None,
        )

    @app.post("/expenses/{instance_id}/withdraw")
    def withdraw(instance_id: ExpenseId, actor: Actor, body: Comment | None = None) -> ExpenseOut:
        """The employee who filed the expense takes it back while it is still running."""

        def withdraw_once(conn: sa.Connection) -> ExpenseOut:
            row = _expense_row(conn, instance_id)
            if row["filed_by"] != actor:
                raise HTTPException(403, f"only {row['filed_by']!r} may withdraw {instance_id}")
            ctx = FlowContext.of(instance_id, connection=conn)
            ctx.put("actor", actor)
            if not workflow.withdraw(graph, ctx, message=None if body is None else body.message):
                raise _AnsweredAfter()
            conn.execute(
                expense.update()
                .where(expense.c.instance_id == instance_id)
                .values(status="withdrawn")
            )
            return _expense_out(conn, workflow, graph, instance_id)

        # Safe to re-run after a lost COMMIT: the re-run finds the expense withdrawn (409).
        try:
            return run_in_transaction(engine, withdraw_once, idempotent=True)
        except _AnsweredAfter:
            status = workflow.status(instance_id)
            name = status.name.lower() if status is not None else "unknown"
            raise HTTPException(409, f"{instance_id} is {name}, not running") from None

    @app.post("/expenses/{instance_id}/send-back")
    def send_back(instance_id: ExpenseId, actor: Actor, body: Comment | None = None) -> ExpenseOut:
        """Send the caller's task back to whoever actually sent it (the task's lineage, not
        the graph's topology: compare ``send_back`` in decisions, which is TaskAction.BACK)."""

        def send_back_once(conn: sa.Connection) -> ExpenseOut:
            _expense_row(conn, instance_id)
            ctx = FlowContext.of(instance_id, connection=conn)
            ctx.put("actor", actor)
            task = workflow.claim_task(graph, ctx)  # None for a closed instance too
            if task is None or task.state != TaskState.WAITING:
                raise _AnsweredAfter()
            if not workflow.send_back(task, ctx, message=None if body is None else body.message):
                raise HTTPException(409, f"task {task.node_id!r} was decided meanwhile")
            conn.execute(
                expense.update()
                .where(expense.c.instance_id == instance_id)
                .values(status="sent back")
            )
            return _expense_out(conn, workflow, graph, instance_id)

        # Safe to re-run after a lost COMMIT: the re-run finds no waiting task (409).
        try:
            return run_in_transaction(engine, send_back_once, idempotent=True)
        except _AnsweredAfter:
            if workflow.status(instance_id) != InstanceStatus.RUNNING:
                raise HTTPException(409, f"{instance_id} is closed") from None
            decided = (
                entry.assignee == actor and _has_earlier_task(graph.get_node(entry.source_node_id))
                for entry in history.history(instance_id)
            )
            if any(decided):
                # A double click, or a re-run after a lost COMMIT that did commit. (Filing, or
                # resubmitting a sent-back expense, acts on a first task: that is no decision.)
                raise HTTPException(409, f"{actor!r} already decided on {instance_id}") from None
            raise HTTPException(403, f"no task of {instance_id} waits for {actor!r}") from None

    return app


def _has_earlier_task(node: Node | None) -> bool:
    """Whether a task comes before ``node`` (through gateways): what sending back needs.
    ``None`` (a node the graph no longer has) counts as having one."""
    if node is None:
        return True
    seen: set[Node] = set()
    todo = list(node.prev_nodes)
    while todo:
        previous = todo.pop()
        if previous in seen:
            continue
        seen.add(previous)
        if previous.type == NodeType.ACTIVITY:
            return True
        if previous.type.is_gateway:
            todo.extend(previous.prev_nodes)
    return False


#: What a history row's state says a decision did.
RESULTS = {
    TaskState.COMPLETED: "completed",
    TaskState.WAITING: "sent back",
    TaskState.TERMINATED: "terminated",
    TaskState.UNKNOWN: "restarted",
}


class _AnsweredAfter(Exception):
    """Nothing to do for this caller: the unit rolls back, and the answer (closed, or decided
    by the caller already: 409; not the caller's task: 403) is read once its transaction has
    ended. Read inside it, the
    status could come from the transaction's snapshot (REPEATABLE READ, MariaDB/MySQL's
    default), taken before a decision that committed meanwhile — "not yours" where the
    expense is in fact closed — and from a second pooled connection while this one is held."""


def _expense_row(conn: sa.Connection, instance_id: str) -> sa.RowMapping:
    row = (
        conn.execute(sa.select(expense).where(expense.c.instance_id == instance_id))
        .mappings()
        .first()
    )
    if row is None:
        raise HTTPException(404, f"no expense {instance_id!r}")
    return row


def _open_tasks(
    conn: sa.Connection, workflow: WorkflowExecutor, graph: Graph, instance_id: str
) -> list[TaskOut]:
    ctx = FlowContext.of(instance_id, connection=conn)  # no actor: only looks
    return [
        TaskOut(node=t.node_id, title=t.node.title, actor=t.node.meta_as_str("actor"))
        for t in workflow.find_next_tasks(graph, ctx)
        if t.state in (TaskState.WAITING, TaskState.UNKNOWN)
    ]


def _expense_out(
    conn: sa.Connection, workflow: WorkflowExecutor, graph: Graph, instance_id: str
) -> ExpenseOut:
    row: Any = _expense_row(conn, instance_id)
    closed = row.status in ("rejected", "withdrawn")
    tasks = [] if closed else _open_tasks(conn, workflow, graph, instance_id)
    return ExpenseOut(
        id=instance_id, purpose=row.purpose, amount=row.amount, status=row.status, tasks=tasks
    )
