"""One command's view of a flow database: instances, their graphs, tasks and history.

Every write goes through ``flow_sqla.sql_workflow`` inside one ``engine.begin()`` transaction
(the connection is put in the context), so a failed command leaves no trace. Reads that only
*look* at an instance (its current tasks, its picture) walk the graph over an in-memory copy
of the stored states and never write.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flow._graph_memo import GraphMemo
from flow.codec import DEFAULT_LIMITS
from flow.context import FlowContext
from flow.graph import Graph, Node
from flow.workflow.controllers import (
    ANYONE,
    ActorStateController,
    BlockStateController,
    StateController,
    candidates_of,
)
from flow.workflow.repository import state_key
from flow.workflow.states import TaskAction, TaskState
from flow_cli._database import (
    DEMO_DB,
    DEMO_DIR,
    ENV_VAR,
    database_url,
    driver_message,
    is_default,
    open_engine,
    shown,
)
from flow_cli._errors import CliError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from flow.workflow import TaskRecord, TaskRecorder, WorkflowExecutor
    from flow_sqla import HistoryEntry, Snapshot, SqlStateRepository
    from flow_sqla.tables import TableNames

ACTOR_KEY = "actor"
ROLE_KEY = "role"


@dataclass(frozen=True, kw_only=True)
class Pending:
    """A task an instance waits on: its node and the actor it waits for (if the graph says)."""

    node: Node
    state: TaskState

    @property
    def actor(self) -> str | None:
        return self.node.meta_as_str(ACTOR_KEY)

    def describe(self) -> str:
        """``manager (Manager approval, for manager)``: node id, title, and who may act."""
        details = [self.node.title] if self.node.title and self.node.title != self.node.id else []
        if self.actor:
            details.append(f"for {self.actor}")
        return f"{self.node.id} ({', '.join(details)})" if details else self.node.id


@dataclass(frozen=True, kw_only=True)
class Standing:
    """Where an instance stands: its pending tasks, or how it ended."""

    pending: tuple[Pending, ...]
    terminated: tuple[Node, ...]
    finished: bool

    def describe(self) -> str:
        if self.terminated:
            return "terminated at " + ", ".join(n.id for n in self.terminated)
        if self.pending:
            return ", ".join(p.describe() for p in self.pending)
        return "finished" if self.finished else "no open task"


def controller_for(graph: Graph) -> StateController:
    """Actor-based when any node names an ``actor`` in its meta, else every activity blocks."""
    if any(ACTOR_KEY in node.meta for node in graph.nodes.values()):
        return ActorStateController(ACTOR_KEY)
    return BlockStateController()


class Identities(BlockStateController):
    """The controller of the index queries: who the context is, as the index stores
    candidates — ``actor:<actor>`` and ``role:<role>`` from the context, and ``*`` (a task
    of a graph without actors, which anyone may do). It never walks a graph."""

    def identities(self, ctx: FlowContext) -> tuple[str, ...]:
        found = [f"{key}:{ctx.get(key)}" for key in (ACTOR_KEY, ROLE_KEY) if ctx.get(key)]
        return (*found, ANYONE)


class GraphRule:
    """The CLI's controller choice (:func:`controller_for`) made per graph, for
    ``flow reindex``: one pass over instances of many graphs indexes each as the other
    commands would write it."""

    def __init__(self) -> None:
        # By graph object: a reindex parses a graph per row that stores its own.
        self._chosen: GraphMemo[StateController] = GraphMemo()

    def _for(self, node: Node) -> StateController:
        graph = node.graph
        chosen = self._chosen.get(graph)
        return chosen if chosen is not None else self._chosen.put(graph, controller_for(graph))

    def is_operatable(self, ctx: FlowContext, node: Node) -> bool:
        return self._for(node).is_operatable(ctx, node)

    def is_auto_forward(self, ctx: FlowContext, node: Node) -> bool:
        return self._for(node).is_auto_forward(ctx, node)

    def candidates(self, node: Node) -> tuple[str, ...]:
        return candidates_of(self._for(node), node)

    def identities(self, ctx: FlowContext) -> tuple[str, ...]:
        return (ANYONE,)


class Session:
    """An open database plus the flow_sqla objects a command needs."""

    def __init__(self, engine: Engine, url: str, names: TableNames) -> None:
        from flow_sqla import FlowTables, SqlStateRepository, TaskHistoryRecorder

        self.engine = engine
        self.url = url
        self.tables = FlowTables(
            repo_table=names.repo_table,
            task_table=names.task_table,
            schema=names.schema,
            todo_table=names.todo_table,
        )
        self._indexed: bool | None = None
        self.repository: SqlStateRepository = SqlStateRepository(
            engine, self.tables, index=self.indexed
        )
        self.recorder = TaskHistoryRecorder(engine, self.tables, index=self.indexed)

    @classmethod
    @contextmanager
    def open(cls, db_option: str | None, *, migrate: bool = False) -> Iterator[Session]:
        """Connect to the command's database (see ``--db``); ``migrate`` upgrades it to head,
        otherwise a database without the flow tables is a clear error."""
        url = database_url(db_option)
        if is_default(url) and not DEMO_DB.exists():
            if not migrate:
                raise CliError(
                    f"no database yet: {DEMO_DB} does not exist; run 'flow demo' first, "
                    f"or give --db URL (or set {ENV_VAR})"
                )
            DEMO_DIR.mkdir(parents=True, exist_ok=True)
        missing = _missing_sqlite_file(url)
        if missing is not None and not migrate:
            # Connecting would create an empty file, and the command would then only say
            # that it has no tables.
            raise CliError(
                f"no database at {missing}: the file does not exist; create it with "
                f"'flow migrate --db {shown(url)}'"
            )
        if missing is not None:  # migrate and demo create the file, and its directory
            _create_directory(missing.parent)
        names = table_names()
        engine = open_engine(url)
        try:
            require_schema(engine, url, names.schema)
            if migrate:
                upgrade(engine, url, names)
            else:
                require_tables(engine, url, names)
            # After an upgrade too: a table dropped by hand stays dropped, and the database
            # is already at the newest revision.
            require_table_set(engine, url, names)
            yield cls(engine, url, names)
        finally:
            engine.dispose()

    # -- instances ----------------------------------------------------------------------
    def snapshot(self, instance_id: str) -> Snapshot:
        """The stored row of ``instance_id``; an unknown id is a :class:`CliError`."""
        found = self.repository.load_snapshot(instance_id)
        if found is None:
            raise CliError(f"no instance {instance_id!r} in {shown(self.url)}")
        return found

    def exists(self, instance_id: str) -> bool:
        return self.repository.load_snapshot(instance_id) is not None

    def graph_of(self, snapshot: Snapshot, override: Graph | None = None) -> Graph:
        """The graph stored with the instance (or ``override``, which must have the same id)."""
        if override is not None:
            stored_id = snapshot.graph_id
            if stored_id is not None and stored_id != override.id:
                raise CliError(
                    f"instance {snapshot.instance_id!r} runs graph {stored_id!r}, "
                    f"not {override.id!r}"
                )
            return override
        if snapshot.graph_json is None and snapshot.graph_id is not None:
            raise CliError(only_the_id(snapshot.instance_id, snapshot.graph_id))
        return graph_from_json(snapshot.graph_json, snapshot.instance_id)

    @property
    def indexed(self) -> bool:
        """Whether the database keeps the task index (revision ``flow0004``: the open-task
        table exists). Without it, writes keep the reference tables only (``index=False``)."""
        if self._indexed is None:
            import sqlalchemy as sa

            todo, repo = self.tables.todo, self.tables.repository
            inspector = sa.inspect(self.engine)
            self._indexed = inspector.has_table(todo.name, schema=todo.schema)
            if not self._indexed and "status" in {
                column["name"] for column in inspector.get_columns(repo.name, schema=repo.schema)
            }:
                # Migrated to flow0004, yet the open-task table is not there: a mistyped
                # FLOW_TODO_TABLE. Writing without the index would leave it stale.
                raise CliError(
                    f"{shown(self.url)}: table {repo.name!r} keeps the task index (revision "
                    f"flow0004), but its open-task table {todo.name!r} does not exist; check "
                    "FLOW_TODO_TABLE"
                )
        return self._indexed

    def require_index(self, command: str) -> None:
        """A clear error when ``command`` needs the task index and the database has none."""
        if not self.indexed:
            raise CliError(
                f"{shown(self.url)} keeps no task index yet, which 'flow {command}' needs; "
                "run 'flow migrate' (revision flow0004), then 'flow reindex'"
            )

    def executor(self, graph: Graph) -> WorkflowExecutor:
        from flow.engine import FlowEngine
        from flow_sqla import sql_workflow

        return sql_workflow(
            self.engine,
            FlowEngine(),
            state_controller=controller_for(graph),
            tables=self.tables,
            index=self.indexed,
        )

    def query_executor(self, command: str) -> WorkflowExecutor:
        """An executor for the index queries (inbox, instances, open tasks), whose controller
        only says who a context is. Raises :class:`CliError` without the index."""
        from flow.engine import FlowEngine
        from flow_sqla import sql_workflow

        self.require_index(command)
        return sql_workflow(
            self.engine, FlowEngine(), state_controller=Identities(), tables=self.tables
        )

    def standing(self, instance_id: str, graph: Graph | None = None) -> Standing:
        snap = self.snapshot(instance_id)
        return standing_of(self.graph_of(snap, graph), snap.states, snap.vars)

    def picture_states(self, instance_id: str, graph: Graph | None) -> tuple[Graph, dict[str, int]]:
        """The graph of ``instance_id`` and node id -> state code for drawing it.

        Pending tasks not yet claimed are drawn as waiting: that is where the instance stands.
        """
        snap = self.snapshot(instance_id)
        graph = self.graph_of(snap, graph)
        states = node_states(graph, snap.states)
        for pending in standing_of(graph, snap.states, snap.vars).pending:
            states.setdefault(pending.node.id, int(TaskState.WAITING))
        return graph, states

    def history(self, instance_id: str) -> list[HistoryEntry]:
        self.snapshot(instance_id)
        return self.recorder.history(instance_id)

    def unindexed(self, everything: bool, after: int = 0) -> int:
        """How many instance rows ``flow reindex`` will look at (those without status, or
        all with ``everything``), of those after row id ``after`` (a resumed pass)."""
        import sqlalchemy as sa

        t = self.tables.repository
        query = sa.select(sa.func.count()).select_from(t)
        if not everything:
            query = query.where(t.c.status.is_(None))
        if after:
            query = query.where(t.c.id > after)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def note_unindexed(self) -> None:
        """Say on stderr when some instance rows have no index yet: the index queries do not
        see them (one statement, stopping at the first such row)."""
        import sys

        import sqlalchemy as sa

        t = self.tables.repository
        query = sa.select(t.c.id).where(t.c.status.is_(None)).limit(1)
        with self.engine.connect() as conn:
            if conn.execute(query).first() is None:
                return
        print(
            "note: some instances have no index yet (written by the Go plugin, with "
            "index=False or before flow0004) and are not listed; 'flow reindex' indexes them",
            file=sys.stderr,
        )

    def rows(self, limit: int) -> list[Mapping[str, Any]]:
        """The newest ``limit`` instance rows (id, graph, states, vars, update_time as text, and the
        status when the database keeps the task index). The JSON columns come as text
        (PostgreSQL's cast to it: psycopg would decode ``jsonb`` itself, and fail
        the fetch on JSON nested deeper than Python decodes) for :func:`json_cell` to decode
        row by row: a row holding text that is not JSON must not fail the whole fetch."""
        import sqlalchemy as sa

        from flow_sqla._dialect import as_text, time_text

        t = self.tables.repository
        dialect = self.engine.dialect.name
        columns: list[Any] = [
            t.c.instant_id,
            *(as_text(dialect, t.c[name]).label(name) for name in JSON_CELLS),
            # as ISO text, read by :func:`when` row by row: a time no driver reads (text on
            # SQLite, PostgreSQL's 'infinity') must not fail the whole fetch either
            time_text(dialect, t.c.update_time).label("update_time"),
        ]
        if self.indexed:
            columns.append(t.c.status)
        query = sa.select(*columns).order_by(t.c.update_time.desc(), t.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    # -- operations ----------------------------------------------------------------------
    @contextmanager
    def context(
        self, instance_id: str, *, data: Mapping[str, Any] | None = None, actor: str | None = None
    ) -> Iterator[FlowContext]:
        """A context for ``instance_id`` inside one transaction (stored vars restored)."""
        with self.engine.begin() as conn:
            if data is None:
                ctx = self.repository.restore_context(instance_id, connection=conn)
            else:
                ctx = FlowContext.of(instance_id, data, connection=conn)
            ctx.put(ACTOR_KEY, actor)
            yield ctx

    def start(
        self, graph: Graph, instance_id: str, data: Mapping[str, Any], actor: str | None
    ) -> None:
        """Store a new instance of ``graph`` with ``data`` and claim its first task — as
        ``actor``, by default the actor its node names (as ``submit`` does). When the task
        cannot be claimed, nothing is stored: an instance whose first task nobody claimed
        would be in no inbox and no list of running instances."""
        if self.exists(instance_id):
            raise CliError(f"instance {instance_id!r} already exists in {shown(self.url)}")
        executor = self.executor(graph)
        with self.context(instance_id, data=data, actor=actor) as ctx:
            self.repository.save_snapshot(ctx, graph)
            found = executor.find_task(graph, ctx)
            first = None if found is None else Pending(node=found.node, state=found.state)
            if first is not None and actor is None and first.actor is not None:
                ctx.put(ACTOR_KEY, first.actor)
            task = executor.claim_task(graph, ctx)
            if task is None or task.state != TaskState.WAITING:
                where = "no task" if first is None else f"its first task {first.describe()}"
                who = f"actor {actor!r}" if actor else "no actor (give --actor)"
                raise CliError(
                    f"{instance_id!r} not started: {where} cannot be claimed by {who}; "
                    "nothing was stored"
                )

    def claim(self, instance_id: str, graph: Graph, actor: str | None) -> Node | None:
        """Claim the task ``actor`` may work on; its node, or ``None`` when there is none."""
        executor = self.executor(graph)
        with self.context(instance_id, actor=actor) as ctx:
            task = executor.claim_task(graph, ctx)
            if task is None or task.state != TaskState.WAITING:
                return None
            return task.node

    def submit(
        self,
        instance_id: str,
        graph: Graph,
        node: Node,
        action: TaskAction,
        *,
        actor: str | None,
        message: str | None,
    ) -> None:
        """Submit ``action`` on ``node`` as ``actor`` in one transaction.

        FORWARD, BACK and TERMINATE act on the task ``actor`` can claim, and only while it
        waits; the jumps and RESTART take ``node`` as their target.
        """
        executor = self.executor(graph)
        with self.context(instance_id, actor=actor) as ctx:
            if action in (TaskAction.FORWARD_JUMP, TaskAction.BACK_JUMP, TaskAction.RESTART):
                executor.submit_task_at(graph, node, action, ctx, message=message)
                return
            task = executor.claim_task(graph, ctx)
            if task is None or task.node_id != node.id or task.state != TaskState.WAITING:
                raise CliError(self.not_claimable(instance_id, graph, node, actor))
            if not executor.submit_task_if_waiting(task, action, ctx, message=message):
                raise CliError(f"task {node.id!r} of instance {instance_id!r} is no longer waiting")

    def withdraw(
        self, instance_id: str, graph: Graph, *, actor: str | None, message: str | None
    ) -> list[str]:
        """Withdraw a running instance in one transaction; the node ids of the tasks it
        closed. A closed instance is a :class:`CliError` naming its status."""
        self.require_index("withdraw")
        executor = self.executor(graph)
        # What the withdraw closed, as its own history rows say (one per task, written in its
        # transaction) — not the index read beforehand, which an instance not yet reindexed
        # lacks and another writer may change meanwhile.
        closed = _NodesRecorded(executor.recorder)
        executor.recorder = closed
        with self.context(instance_id, actor=actor) as ctx:
            done = executor.withdraw(graph, ctx, message=message)
        if not done:
            status = executor.status(instance_id)
            named = (
                status.name if status is not None else self.standing(instance_id, graph).describe()
            )
            raise CliError(
                f"instance {instance_id!r} is not running ({named}); "
                "only a running instance can be withdrawn"
            )
        return closed.node_ids

    def send_back(
        self, instance_id: str, graph: Graph, node: Node, *, actor: str | None, message: str | None
    ) -> list[tuple[str, str]]:
        """Send ``actor``'s waiting task ``node`` back along its lineage in one transaction;
        the tasks (node id, title) the instance waits on afterwards — a sub-graph's among
        them, whose node is not in ``graph``."""
        self.require_index("send-back")
        executor = self.executor(graph)
        with self.context(instance_id, actor=actor) as ctx:
            task = executor.claim_task(graph, ctx)
            if task is None or task.node_id != node.id or task.state != TaskState.WAITING:
                raise CliError(self.not_claimable(instance_id, graph, node, actor))
            if not executor.send_back(task, ctx, message=message):
                raise CliError(f"task {node.id!r} of instance {instance_id!r} is not open")
        return [(t.node_id, t.node_title) for t in executor.open_tasks(instance_id)]

    def not_claimable(self, instance_id: str, graph: Graph, node: Node, actor: str | None) -> str:
        who = f"actor {actor!r}" if actor else "no actor (give --actor)"
        return (
            f"node {node.id!r} of instance {instance_id!r} is not a waiting task for {who}; "
            f"the instance stands at: {self.where(instance_id, graph)}"
        )

    def where(self, instance_id: str, graph: Graph) -> str:
        """Where the instance stands, for an error line: its current tasks, or that it was
        withdrawn (its states alone read "terminated")."""
        from flow.workflow import InstanceStatus

        if self.indexed and self.executor(graph).status(instance_id) == InstanceStatus.WITHDRAWN:
            return "withdrawn (only a restart changes it)"
        snap = self.snapshot(instance_id)
        return standing_of(graph, snap.states, snap.vars).describe()


class _NodesRecorded:
    """A history recorder that also notes the node of every record it passes on."""

    def __init__(self, inner: TaskRecorder | None) -> None:
        self.inner = inner
        self.node_ids: list[str] = []

    def record(self, ctx: FlowContext, record: TaskRecord) -> None:
        if self.inner is not None:
            self.inner.record(ctx, record)
        self.node_ids.append(record.task_id)


# -- helpers without a database ---------------------------------------------------------------


def graph_from_json(data: Any, instance_id: str) -> Graph:
    """The graph stored in an instance row (a dict, or JSON text from older writers)."""
    from flow.errors import GraphDefinitionError

    bare = bare_graph_id(data)
    if bare is not None:
        raise CliError(only_the_id(instance_id, bare))
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise CliError(f"instance {instance_id!r}: its stored graph is not JSON") from exc
    if not isinstance(data, Mapping):
        raise CliError(
            f"instance {instance_id!r} has no stored graph; give the graph file with --graph"
        )
    try:
        return Graph.from_dict(data)
    except GraphDefinitionError as exc:
        raise CliError(f"instance {instance_id!r}: its stored graph is broken: {exc}") from exc


#: The JSON columns :meth:`Session.rows` leaves undecoded.
JSON_CELLS = ("graph", "states", "vars")


def json_cell(raw: Any, *, graph: bool = False) -> Any:
    """A JSON column's value from :meth:`Session.rows`: decoded from text (``ValueError``
    when it is not JSON, or JSON nested deeper than the decoder's recursion limit — a value
    only another program writes), as is when the driver decoded it. ``graph``: a text that is
    not JSON at all is the graph's bare id, as the Go plugin may store it."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if graph and isinstance(raw, int | float) and not isinstance(raw, bool):
        # SQLite keeps a bare numeric id (``1001``) as a number: the id is its text.
        return json.dumps(raw)
    if not isinstance(raw, str):
        return raw
    if graph and not raw.lstrip().startswith(("{", '"', "[")):
        return raw
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("its JSON is nested too deeply to decode") from None


def _create_directory(path: Path) -> None:
    """Create ``path`` (a new SQLite file's directory), as ``alembic upgrade`` does."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create the directory {path}: {exc.strerror or exc}") from exc


def _missing_sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL when it does not exist (``None`` for other URLs, in-memory
    databases and files that exist)."""
    path = sqlite_file(url)
    return None if path is None or path.exists() else path


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (``None`` for other URLs and in-memory databases)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # open_engine reports an unparseable URL
        return None
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or not database or database == ":memory:":
        return None
    if database.startswith("file:") or parsed.query.get("mode") == "memory":
        return None
    return Path(database)


def bare_graph_id(data: Any) -> str | None:
    """The graph id when a row's ``graph`` holds only that id (as the Go plugin may store
    it), else ``None`` (a document, JSON text of one, or nothing)."""
    if not isinstance(data, str) or not data.strip() or data.lstrip().startswith("{"):
        return None
    return data.strip()


def only_the_id(instance_id: str, graph_id: str) -> str:
    return (
        f"instance {instance_id!r} stores only the id of its graph ({graph_id!r}); "
        "give the graph file with --graph"
    )


def node_states(graph: Graph, states: Mapping[str, Any]) -> dict[str, int]:
    """Row states (``"graphId:nodeId" -> code``) as node id -> code for ``graph``'s nodes."""
    prefix = f"{graph.id}:"
    result: dict[str, int] = {}
    for key, code in states.items():
        if key.startswith(prefix) and key[len(prefix) :] in graph.nodes:
            result[key[len(prefix) :]] = int(code)
    return result


class _CopyRepository:
    """A throwaway in-memory copy of one instance's states: walks over it write nothing."""

    def __init__(self, states: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self._states = {key: TaskState.of(int(code)) for key, code in states.items()}
        self._vars = dict(data)

    def vars_get(self, ctx: FlowContext, node: Node) -> Mapping[str, Any] | None:
        return self._vars

    def state_get(self, ctx: FlowContext, node: Node) -> TaskState:
        return self._states.get(state_key(node), TaskState.UNKNOWN)

    def state_put(self, ctx: FlowContext, node: Node, state: TaskState) -> None:
        self._states[state_key(node)] = state

    def state_remove(self, ctx: FlowContext, node: Node) -> None:
        self._states.pop(state_key(node), None)

    def state_clear(self, ctx: FlowContext) -> None:
        self._states.clear()


def standing_of(graph: Graph, states: Mapping[str, Any], data: Mapping[str, Any]) -> Standing:
    """Where an instance with these stored ``states`` and vars stands, computed in memory."""
    from flow.engine import FlowEngine
    from flow.workflow import WorkflowExecutor

    by_node = node_states(graph, states)
    terminated = tuple(
        graph.nodes[n] for n, code in by_node.items() if code == TaskState.TERMINATED
    )
    repo = _CopyRepository(states, data)
    executor = WorkflowExecutor(FlowEngine(), controller_for(graph), repo)
    ctx = FlowContext.of("(view)", data)
    tasks = executor.find_next_tasks(graph, ctx)
    pending = tuple(
        Pending(node=t.node, state=t.state)
        for t in tasks
        if t.state in (TaskState.WAITING, TaskState.UNKNOWN) and t.node.graph.id == graph.id
    )
    record = ctx.last_record
    return Standing(
        pending=pending,
        terminated=terminated,
        finished=record is not None and record.is_end,
    )


def table_names() -> TableNames:
    """The table set the commands use: ``FLOW_REPO_TABLE``, ``FLOW_TASK_TABLE``,
    ``FLOW_TODO_TABLE``, ``FLOW_SCHEMA`` and ``FLOW_VERSION_TABLE`` as for ``alembic upgrade
    head``, else defaults."""
    from flow_sqla.errors import InvalidIdentifierError
    from flow_sqla.migrations import resolve_names

    try:
        return resolve_names({}, os.environ)
    except InvalidIdentifierError as exc:
        raise CliError(f"bad table names in the environment: {exc}", exit_code=2) from exc


def require_schema(engine: Engine, url: str, schema: str | None) -> None:
    """A clear error when ``FLOW_SCHEMA`` names a schema the database does not have: flow
    creates tables, never schemas (their owner and grants are the DBA's decision)."""
    import sqlalchemy as sa

    if schema is None or schema in sa.inspect(engine).get_schema_names():
        return
    raise CliError(
        f"schema {schema!r} (FLOW_SCHEMA) does not exist in {shown(url)}; create it first "
        f"(CREATE SCHEMA {schema}) or unset FLOW_SCHEMA"
    )


def upgrade(engine: Engine, url: str, names: TableNames) -> None:
    from sqlalchemy.exc import SQLAlchemyError

    from flow_sqla import RepositoryError, migrations

    try:
        migrations.upgrade(engine, **_names_kwargs(names))
    except (SQLAlchemyError, RepositoryError) as exc:
        driver_error = _driver_error(exc)
        if driver_error is None:  # the library's own refusal (e.g. tables it cannot adopt)
            raise
        message = driver_message(driver_error)
        if getattr(getattr(driver_error, "orig", None), "sqlstate", None) == "3F000":
            raise CliError(
                f"cannot migrate {shown(url)}: {message} — the schema to create "
                "the tables in does not exist (check search_path in the URL, or create it)"
            ) from exc
        raise CliError(f"cannot migrate {shown(url)}: {message}") from exc


def _driver_error(exc: BaseException) -> Any:
    """The SQLAlchemy error behind ``exc`` (the library wraps migration failures)."""
    from sqlalchemy.exc import SQLAlchemyError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, SQLAlchemyError):
            return seen
        seen = seen.__cause__
    return None


def require_tables(engine: Engine, url: str, names: TableNames) -> None:
    """A clear error when the database was never migrated (no flow tables yet)."""
    from flow_sqla import migrations

    if migrations.current(engine, **_names_kwargs(names)) is None:
        raise CliError(
            f"{shown(url)} has no flow tables yet; create them with "
            f"'flow migrate --db URL' (or 'alembic upgrade head')"
        )


def require_table_set(engine: Engine, url: str, names: TableNames) -> None:
    """A clear error when a migrated database lacks its instance or history table: a table
    dropped by hand, which ``flow migrate`` does not recreate (the database is stamped at the
    newest revision already), or a table name mistyped where the version table is named
    on its own (``FLOW_VERSION_TABLE``, or a custom instance table)."""
    import sqlalchemy as sa

    inspector = sa.inspect(engine)
    for table, role, variable in (
        (names.repo_table, "instance", "FLOW_REPO_TABLE"),
        (names.task_table, "history", "FLOW_TASK_TABLE"),
    ):
        if not inspector.has_table(table, schema=names.schema):
            raise CliError(
                f"{shown(url)} is migrated, but its {role} table {table!r} does not exist; "
                f"check {variable}, or restore the table ('flow migrate' does not recreate "
                "a table dropped by hand)"
            )


def _names_kwargs(names: TableNames) -> dict[str, Any]:
    return {
        "repo_table": names.repo_table,
        "task_table": names.task_table,
        "schema": names.schema,
        "version_table": names.version_table,
        "todo_table": names.todo_table,
    }


def parse_vars(pairs: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs as context data; values are JSON when they parse (``5``, ``true``,
    ``"x"``, ``[1,2]``), else text."""
    data: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--var wants KEY=VALUE, got {pair!r}", exit_code=2)
        data[key.strip()] = _var_value(key.strip(), raw)
    return data


def _var_value(key: str, raw: str) -> Any:
    """``raw`` decoded as JSON, else the text itself. JSON nested deeper than a variable may
    be stored (``CodecLimits.max_depth``) — or than the decoder's recursion limit, which
    depends on the Python version — is neither: it is the user's input that is wrong, so a
    usage error naming the variable, not the generic line of an unexpected failure."""
    try:
        value = json.loads(raw, parse_constant=_not_json, parse_float=_finite_float)
    except _BeyondJson:  # ``1e400`` is JSON syntax, but no number JSON can store
        raise CliError(f"--var {key!r}: {raw} is beyond JSON's numbers", exit_code=2) from None
    except ValueError:
        return raw  # ``NaN`` and ``Infinity`` too: Python's JSON reads them, JSON has none
    except RecursionError as exc:
        raise _too_deep(key) from exc
    if _nesting(value) > DEFAULT_LIMITS.max_depth:
        raise _too_deep(key)
    return value


class _BeyondJson(Exception):
    """A JSON number that reads as an infinite float."""


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _BeyondJson(text)
    return number


def _too_deep(key: str) -> CliError:
    return CliError(
        f"--var {key!r}: the JSON value is nested too deeply (more than "
        f"{DEFAULT_LIMITS.max_depth} levels)",
        exit_code=2,
    )


def _nesting(value: Any) -> int:
    """How many lists and objects ``value`` nests (walked without recursion)."""
    deepest = 0
    pending = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        if isinstance(current, dict):
            current = list(current.values())
        if isinstance(current, list):
            deepest = max(deepest, depth)
            pending.extend((item, depth + 1) for item in current)
    return deepest
