"""``flow history``, ``flow instances`` and ``flow migrate``: look at a flow database."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from flow_cli._errors import one_line
from flow_cli._parser import Parser, db_option, non_blank
from flow_cli._table import escaped, format_table

STATUS_WORDS = {0: "restarted", 1001: "sent back", 1002: "completed", 1003: "terminated"}
STATUS_CHOICES = ("running", "completed", "withdrawn", "terminated")


def add_commands(commands: Any, parents: Sequence[Parser]) -> None:
    common = [*parents, db_option()]
    history = commands.add_parser(
        "history",
        parents=common,
        help="the audit trail of an instance",
        description="Every submitted task of INSTANCE, oldest first: when, which node, what "
        "became of it, who acted, where the flow went and the message.",
    )
    history.add_argument("instance", metavar="INSTANCE", help="instance id")
    history.set_defaults(handler=run_history)

    instances = commands.add_parser(
        "instances",
        parents=common,
        help="list instances and where each stands",
        description="The most recently updated instances with their graph, the tasks each "
        "waits on (or how it ended) and the time of the last update. With --status, "
        "--graph, --creator or --after: the indexed instances (revision flow0004) matching "
        "them, newest first, one page at a time.",
    )
    instances.add_argument(
        "--limit", type=page_size, default=50, metavar="N", help="show at most N (default 50)"
    )
    instances.add_argument(
        "--status",
        choices=STATUS_CHOICES,
        type=str.lower,
        help="only instances with this status",
    )
    instances.add_argument(
        "--graph", metavar="ID", type=non_blank, help="only instances of this graph id"
    )
    instances.add_argument(
        "--creator",
        metavar="A",
        type=non_blank,
        help="only instances whose first write was by A",
    )
    instances.add_argument(
        "--after",
        type=non_negative,
        metavar="CURSOR",
        help="the page after this cursor (printed under a full page)",
    )
    instances.set_defaults(handler=run_instances)

    migrate = commands.add_parser(
        "migrate",
        parents=common,
        help="create or upgrade the flow tables",
        description="Apply flow_sqla's migrations up to head (the same as 'alembic upgrade "
        "head' in the repository), creating bpm_flow_repository and bpm_flow_task.",
    )
    migrate.set_defaults(handler=run_migrate)


def positive(text: str) -> int:
    """An integer of at least 1 (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def page_size(text: str) -> int:
    """A page size, 1 to ``MAX_PAGE_SIZE`` (an argparse type)."""
    from flow.workflow import MAX_PAGE_SIZE

    value = positive(text)
    if value > MAX_PAGE_SIZE:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_PAGE_SIZE}, got {text!r}")
    return value


def batch_size(text: str) -> int:
    """Instances per reindex transaction, 1 to ``flow_sqla.reindex.MAX_BATCH_SIZE``."""
    from flow_sqla.reindex import MAX_BATCH_SIZE

    value = positive(text)
    if value > MAX_BATCH_SIZE:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_BATCH_SIZE}, got {text!r}")
    return value


def non_negative(text: str) -> int:
    """A cursor: an integer from 0 to ``MAX_CURSOR`` (an argparse type)."""
    from flow.workflow import MAX_CURSOR

    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_CURSOR:
        raise argparse.ArgumentTypeError(
            f"expected a cursor (an integer from 0 to {MAX_CURSOR}), got {text!r}"
        )
    return value


def run_history(args: argparse.Namespace) -> int:
    from flow_cli._session import Session

    with Session.open(args.db) as session:
        entries = session.history(args.instance)
    if not entries:
        print(escaped(f"{args.instance}: no task submitted yet"))
        return 0
    print(history_table(entries))
    return 0


def history_table(entries: Sequence[Any]) -> str:
    """History entries (``flow_sqla.HistoryEntry``) as an aligned table, oldest first."""
    rows = [
        (
            i,
            when(e.created_at),
            e.source_node_id,
            STATUS_WORDS.get(int(e.status), str(e.status)) if e.status is not None else None,
            e.assignee or None,
            e.target_node_id,
            e.message,
        )
        for i, e in enumerate(entries, start=1)
    ]
    return format_table(("#", "when (UTC)", "task", "result", "by", "next", "message"), rows)


def run_instances(args: argparse.Namespace) -> int:
    if any(v is not None for v in (args.status, args.graph, args.creator, args.after)):
        return run_indexed_instances(args)
    return run_recent_instances(args)


def run_indexed_instances(args: argparse.Namespace) -> int:
    """``flow instances --status ...``: one indexed page, newest first."""
    from flow.workflow import InstanceStatus
    from flow_cli._inbox import task_label
    from flow_cli._session import Session

    status = None if args.status is None else InstanceStatus[args.status.upper()]
    with Session.open(args.db) as session:
        executor = session.query_executor("instances --status")
        found = executor.instances(
            status=status,
            graph_id=args.graph,
            creator=args.creator,
            limit=args.limit,
            after=args.after,
        )
        tasks = {
            s.instance_id: ", ".join(
                task_label(t.node_id, t.node_title) for t in executor.open_tasks(s.instance_id)
            )
            for s in found
            if s.status == InstanceStatus.RUNNING
        }
        session.note_unindexed()
    if not found:
        print(f"no {_described(args)}" + (" after this cursor" if args.after is not None else ""))
        return 0
    rows = [
        (
            s.instance_id,
            s.graph_id,
            s.status.name.lower(),
            s.creator or None,
            when(s.created_at),
            when(s.finished_at) if s.finished_at else when(s.updated_at),
            tasks.get(s.instance_id) or None,
        )
        for s in found
    ]
    headers = (
        "instance",
        "graph",
        "status",
        "creator",
        "started (UTC)",
        "last (UTC)",
        "open tasks",
    )
    print(format_table(headers, rows, max_cell=60))
    if len(found) == args.limit:
        print(f"more: add --after {found[-1].cursor}")
    return 0


def run_recent_instances(args: argparse.Namespace) -> int:
    from flow import codec
    from flow.workflow import InstanceStatus
    from flow_cli._session import (
        Session,
        bare_graph_id,
        graph_from_json,
        json_cell,
        standing_of,
    )
    from flow_sqla._rows import parse_states, parse_vars
    from flow_sqla._vars import ALWAYS_EXCLUDED, DEFAULT_IDENTITY_KEYS

    never_read = ALWAYS_EXCLUDED | DEFAULT_IDENTITY_KEYS

    with Session.open(args.db) as session:
        rows = session.rows(args.limit)
    if not rows:
        print("no instances yet (try 'flow demo')")
        return 0
    table = []
    for row in rows:
        instance_id, updated = row["instant_id"], when(row["update_time"])
        try:
            stored_graph = json_cell(row["graph"], graph=True)
        except ValueError as exc:  # one broken row must not hide the others
            table.append((instance_id, "?", f"unreadable: {one_line(exc)}", updated))
            continue
        bare = bare_graph_id(stored_graph)
        if bare is not None:  # the Go plugin may store only the id: no graph to walk
            table.append((instance_id, bare, "(graph not stored)", updated))
            continue
        code = row.get("status")
        if code == InstanceStatus.WITHDRAWN:  # the states alone read "terminated"
            table.append((instance_id, _graph_id(stored_graph), "withdrawn", updated))
            continue
        try:
            graph = graph_from_json(stored_graph, instance_id)
            # Read as the library reads them: a row of the wrong shape says what it holds.
            stored = codec.decode_variables(parse_vars(instance_id, json_cell(row["vars"])))
            data = {k: v for k, v in stored.items() if k not in never_read}
            states = parse_states(instance_id, json_cell(row["states"]))
            where = standing_of(graph, states, data).describe()
            graph_id = graph.id
        except Exception as exc:  # one broken row must not hide the others
            where, graph_id = f"unreadable: {one_line(exc)}", "?"
        table.append((instance_id, graph_id, where, updated))
    print(format_table(("instance", "graph", "current tasks", "updated (UTC)"), table, max_cell=60))
    return 0


def _graph_id(doc: Any) -> str:
    graph_id = doc.get("id") if isinstance(doc, dict) else None
    return graph_id if isinstance(graph_id, str) else "?"


def run_migrate(args: argparse.Namespace) -> int:
    from flow_cli._database import shown
    from flow_cli._session import Session

    with Session.open(args.db, migrate=True) as session:
        print(f"{shown(session.url)}: flow tables at the newest revision")
    return 0


def when(value: object) -> str | None:
    """A stored time as the tables show it; what a hand edit left instead of one (SQLite
    keeps any text or number in the column), marked."""
    if value is None or isinstance(value, datetime):
        return None if value is None else value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, str):  # read as text: ISO when it is a time
        try:
            return datetime.fromisoformat(value.strip()).strftime("%Y-%m-%d %H:%M:%S")
        except ValueError:
            pass
    return f"not a time: {str(value)[:40]!r}"  # a number is never one (as the library says)


def _described(args: argparse.Namespace) -> str:
    """What ``flow instances --status`` looked for, as words: "running instance", "completed
    instance of graph 'oa' by 'alice'", "such instance" when nothing narrowed it."""
    words = [args.status.lower() if args.status else "such", "instance"]
    if args.graph is not None:
        words.append(f"of graph {args.graph!r}")
    if args.creator is not None:
        words.append(f"by {args.creator!r}")
    return " ".join(words)
