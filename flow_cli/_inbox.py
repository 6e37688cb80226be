"""``flow inbox``, ``flow withdraw``, ``flow send-back`` and ``flow reindex``: the task index.

These commands need the task index of revision ``flow0004`` (``flow migrate``); a database
written by the Go plugin or before the revision is indexed once with ``flow reindex``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from flow.context import FlowContext
from flow_cli._errors import CliError, one_line
from flow_cli._parser import (
    Parser,
    actor_option,
    db_option,
    graph_file_option,
    non_blank,
)
from flow_cli._table import escaped, format_table

if TYPE_CHECKING:
    from flow.workflow import OpenTask

STATE_WORDS = {0: "ready", 1001: "waiting"}


def add_commands(commands: Any, parents: Sequence[Parser]) -> None:
    from flow_cli._instances import batch_size, non_negative, page_size

    common = [*parents, db_option()]
    inbox = commands.add_parser(
        "inbox",
        parents=common,
        help="the open tasks an actor (or role) may work on",
        description="Open tasks of running instances that ACTOR (or ROLE) may operate, oldest "
        "first, one page at a time. A task of a graph without actors is in every inbox.",
    )
    actor_option(inbox, "who asks (a node's meta 'actor')")
    inbox.add_argument(
        "--role", metavar="R", type=non_blank, help="a role they hold (a node's meta 'role')"
    )
    inbox.add_argument(
        "--graph", metavar="ID", type=non_blank, help="only tasks of the graph with this id"
    )
    inbox.add_argument(
        "--limit", type=page_size, default=50, metavar="N", help="show at most N (default 50)"
    )
    inbox.add_argument(
        "--after",
        type=non_negative,
        metavar="CURSOR",
        help="the page after this cursor (printed under a full page)",
    )
    inbox.set_defaults(handler=run_inbox)

    withdraw = commands.add_parser(
        "withdraw",
        parents=common,
        help="withdraw a running instance",
        description="In one transaction: every open task of INSTANCE is terminated (one "
        "history row each), and the instance is WITHDRAWN: no claim or submit other than "
        "restart changes it any more. Fails when INSTANCE is not running.",
    )
    withdraw.add_argument("instance", metavar="INSTANCE", help="instance id")
    actor_option(withdraw, "who withdraws (kept in the history)")
    withdraw.add_argument("-m", "--message", metavar="M", help="the comment kept in the history")
    graph_file_option(withdraw)
    withdraw.set_defaults(handler=run_withdraw)

    send_back = commands.add_parser(
        "send-back",
        parents=common,
        help="send a task back to the task that led to it",
        description="Send task NODE of INSTANCE back to the human task whose submit actually "
        "opened it (its lineage, not the graph's topology), which waits again. The task must "
        "be one ACTOR may claim. Refused, writing nothing, for a first task or after a split.",
    )
    send_back.add_argument("instance", metavar="INSTANCE", help="instance id")
    send_back.add_argument("node", metavar="NODE", help="node id of the task to send back")
    actor_option(send_back, "who sends it back (default: the node's meta 'actor')")
    send_back.add_argument("-m", "--message", metavar="M", help="the comment kept in the history")
    graph_file_option(send_back)
    send_back.set_defaults(handler=run_send_back)

    reindex = commands.add_parser(
        "reindex",
        parents=common,
        help="index instances written without the task index (Go plugin, older revisions)",
        description="Compute status and open tasks of every instance that has none (rows "
        "written by the Go plugin, with index=False, or before revision flow0004), N "
        "instances per transaction, in id order. Interrupted, it continues where it stopped "
        "when run again. Shows progress on a terminal.",
    )
    reindex.add_argument(
        "--batch",
        type=batch_size,
        default=500,
        metavar="N",
        help="instances per transaction (default 500)",
    )
    reindex.add_argument(
        "--after",
        type=non_negative,
        default=0,
        metavar="ID",
        help="start after this row id (to continue an interrupted --all pass)",
    )
    reindex.add_argument(
        "--skip-bad",
        action="store_true",
        help="report a row that cannot be indexed (malformed, graph missing) and go on; "
        "exit status 1 at the end if any was skipped",
    )
    reindex.add_argument(
        "--graph",
        action="append",
        default=[],
        metavar="GRAPH",
        type=non_blank,
        help="graph file for rows that store only their graph's id (repeatable)",
    )
    reindex.add_argument(
        "--all",
        action="store_true",
        help="recompute every instance, not only those without status (after the Go "
        "plugin or an index=False service wrote to indexed tables), and rewrite todo rows "
        "that differ from their instance's index",
    )
    reindex.set_defaults(handler=run_reindex)


# -- inbox ----------------------------------------------------------------------------------


def run_inbox(args: argparse.Namespace) -> int:
    from flow_cli._session import ACTOR_KEY, ROLE_KEY, Session

    if not args.actor and not args.role:
        raise CliError("say whose inbox: give --actor A and/or --role R", exit_code=2)
    who = FlowContext.of(None, {ACTOR_KEY: args.actor, ROLE_KEY: args.role})
    with Session.open(args.db) as session:
        executor = session.query_executor("inbox")
        tasks = executor.inbox(who, graph_id=args.graph, limit=args.limit, after=args.after)
        session.note_unindexed()
    named = " and ".join(f"{k} {v!r}" for k, v in (("actor", args.actor), ("role", args.role)) if v)
    if not tasks:
        more = " after this cursor" if args.after is not None else ""
        print(f"no open task for {named}{more}")
        return 0
    print(inbox_table(tasks))
    if len(tasks) == args.limit:
        print(f"more: add --after {tasks[-1].cursor}")
    return 0


def inbox_table(tasks: Sequence[OpenTask]) -> str:
    """Open tasks as a table: instance, graph, task, state, for whom, from where, since when."""
    from flow_cli._instances import when

    rows = [
        (
            t.instance_id,
            t.graph_id,
            task_label(t.node_id, t.node_title),
            STATE_WORDS.get(int(t.state), t.state.name.lower()),
            ", ".join(t.candidates),
            t.lineage[-1] if t.lineage else None,
            when(t.opened_at),
        )
        for t in tasks
    ]
    return format_table(
        ("instance", "graph", "task", "state", "for", "sent by", "open since (UTC)"), rows
    )


def task_label(node_id: str, title: str | None) -> str:
    return f"{node_id} ({title})" if title and title != node_id else node_id


# -- withdraw and send back -----------------------------------------------------------------


def run_withdraw(args: argparse.Namespace) -> int:
    from flow_cli._graphs import graph_override
    from flow_cli._session import Session

    override = graph_override(args.graph)
    with Session.open(args.db) as session:
        session.require_index("withdraw")
        graph = session.graph_of(session.snapshot(args.instance), override)
        closed = session.withdraw(args.instance, graph, actor=args.actor, message=args.message)
    by = f" by {args.actor}" if args.actor else ""
    print(
        escaped(f"withdrew {args.instance}{by}; terminated: {', '.join(closed) or 'no open task'}")
    )
    return 0


def run_send_back(args: argparse.Namespace) -> int:
    from flow_cli._graphs import graph_override
    from flow_cli._session import Session

    override = graph_override(args.graph)
    with Session.open(args.db) as session:
        session.require_index("send-back")
        graph = session.graph_of(session.snapshot(args.instance), override)
        node = graph.get_node_or_throw(args.node)
        actor = args.actor or node.meta_as_str("actor")
        waiting = session.send_back(args.instance, graph, node, actor=actor, message=args.message)
    by = f" as {actor}" if actor else ""
    back_to = ", ".join(task_label(node_id, title) for node_id, title in waiting) or "-"
    print(escaped(f"sent {task_label(node.id, node.title)} of {args.instance} back{by}"))
    print(escaped(f"{args.instance} now waits on: {back_to}"))
    return 0


# -- reindex --------------------------------------------------------------------------------


class Progress:
    """``rows seen / total (percent), indexed, rows/s`` rewritten in place on a terminal."""

    def __init__(self, out: TextIO, total: int | None) -> None:
        self.out = out
        self.total = total
        self.started = time.monotonic()
        self.shown = False

    def __call__(self, seen: int, indexed: int) -> None:
        rate = seen / max(time.monotonic() - self.started, 1e-9)
        of = ""
        if self.total:
            of = f" / {self.total:,} ({min(100.0, 100 * seen / self.total):.1f}%)"
        self.out.write(f"\r{seen:,}{of} rows, {indexed:,} indexed, {rate:,.0f} rows/s ")
        self.out.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.out.write("\n")
            self.out.flush()


def run_reindex(args: argparse.Namespace) -> int:
    from flow.engine import FlowEngine
    from flow.errors import FlowError, GraphNotFoundError
    from flow.workflow import ConcurrentSubmitError
    from flow_cli._graphs import load_graph
    from flow_cli._session import GraphRule, Session
    from flow_sqla import RepositoryError, reindex

    engine = FlowEngine()
    for path in args.graph:
        engine.load(load_graph(path, strict=True))
    with Session.open(args.db) as session:
        session.require_index("reindex")
        tty = sys.stdout.isatty()
        progress = Progress(sys.stdout, session.unindexed(args.all, args.after) if tty else None)
        counted = {"seen": 0, "indexed": 0, "last": args.after}
        skipped: list[str] = []

        def note(seen: int, indexed: int) -> None:
            counted.update(seen=seen, indexed=indexed)
            if tty:
                progress(seen, indexed)

        def passed(last: int) -> None:
            counted["last"] = last

        def skip(instance_id: str, error: FlowError) -> None:
            progress.done()
            # The id whole (a folded one could name another row); the error on one line, with
            # its notes (a full pass says there when it cleared the row's index).
            said = "; ".join([one_line(error), *getattr(error, "__notes__", ())])
            print(f"flow: skipped {escaped(instance_id)}: {escaped(said)}", file=sys.stderr)
            skipped.append(instance_id)

        try:
            indexed = reindex(
                session.engine,
                engine,
                state_controller=GraphRule(),
                tables=session.tables,
                batch_size=args.batch,
                everything=args.all,
                progress=note,
                after=args.after,
                checkpoint=passed,
                on_bad_row=skip if args.skip_bad else None,
            )
        except (FlowError, KeyboardInterrupt) as exc:
            progress.done()
            kept = f"{counted['indexed']:,} instances indexed before it are kept"
            again = _resume_hint(args, counted["last"])
            if isinstance(exc, KeyboardInterrupt):
                print(f"stopped: {counted['indexed']:,} instances indexed; {again}")
                raise
            if isinstance(exc, ConcurrentSubmitError | RepositoryError):  # not the row's fault
                raise CliError(f"{exc} ({kept}; {again})") from exc
            remedy = (
                "give its graph file with --graph, or --skip-bad to go on without it"
                if isinstance(exc, GraphNotFoundError)
                else "give --skip-bad to go on without it"
            )
            raise CliError(f"{exc}; {remedy} ({kept}; {again})") from exc
        progress.done()
    print(f"indexed {indexed:,} instance(s) of {counted['seen']:,} row(s) in {shown_url(session)}")
    if skipped:
        print(
            f"flow: {len(skipped):,} instance(s) could not be indexed (listed above)",
            file=sys.stderr,
        )
        return 1
    return 0


def _resume_hint(args: argparse.Namespace, last: int) -> str:
    """How to continue: a plain pass resumes by itself; an --all pass from the last row id
    of its last committed batch."""
    if args.all and last:
        return f"continue with the same command and '--after {last}'"
    return "run again to continue"


def shown_url(session: Any) -> str:
    from flow_cli._database import shown

    return shown(session.url)
