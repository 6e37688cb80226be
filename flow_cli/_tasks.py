"""``flow start``, ``flow claim`` and ``flow submit``: move an instance through its tasks."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Sequence
from typing import Any

from flow.workflow.states import TaskAction
from flow_cli._errors import CliError
from flow_cli._parser import Parser, actor_option, db_option, graph_file_option, non_blank
from flow_cli._table import escaped

ACTIONS = tuple(a.name.lower() for a in TaskAction if a is not TaskAction.UNKNOWN)


def parse_action(text: str) -> TaskAction:
    """``forward``, ``back``, ``forward_jump``, ... (any case, ``-`` for ``_``) as a TaskAction."""
    name = text.strip().lower().replace("-", "_")
    if name not in ACTIONS:
        raise argparse.ArgumentTypeError(
            f"invalid action {text!r} (choose from {', '.join(ACTIONS)})"
        )
    return TaskAction[name.upper()]


def add_commands(commands: Any, parents: Sequence[Parser]) -> None:
    common = [*parents, db_option()]
    start = commands.add_parser(
        "start",
        parents=common,
        help="start an instance of a graph and claim its first task",
        description="Store a new instance of GRAPH (with its variables) and claim its first "
        "task, so it waits for the first actor.",
    )
    start.add_argument("graph", metavar="GRAPH", help="a .yml/.yaml/.json graph file")
    start.add_argument(
        "--instance",
        metavar="ID",
        type=non_blank,
        help="instance id (default: <graph id>-<random hex>)",
    )
    start.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable for conditions (repeatable; VALUE is JSON when it parses: 5, true)",
    )
    actor_option(start, "who starts it (the 'actor' variable)")
    start.set_defaults(handler=run_start)

    claim = commands.add_parser(
        "claim",
        parents=common,
        help="claim the task an actor can work on",
        description="Walk INSTANCE's graph as ACTOR and mark the task ACTOR may work on as "
        "waiting. Prints the claimed task, or where the instance stands when there is none.",
    )
    claim.add_argument("instance", metavar="INSTANCE", help="instance id")
    actor_option(claim, "who claims (matches a node's meta 'actor')")
    graph_file_option(claim)
    claim.set_defaults(handler=run_claim)

    submit = commands.add_parser(
        "submit",
        parents=common,
        help="act on a task: forward, back, terminate, jumps, restart",
        description="Submit ACTION on task NODE of INSTANCE in one transaction, recording it in "
        "the history with --message. forward/back/terminate act on the waiting task ACTOR can "
        "claim (ACTOR defaults to the node's meta 'actor'); forward_jump/back_jump take NODE "
        "as the target to jump to; restart clears every state.",
    )
    submit.add_argument("instance", metavar="INSTANCE", help="instance id")
    submit.add_argument("node", metavar="NODE", help="node id of the task (or jump target)")
    submit.add_argument(
        "action", metavar="ACTION", type=parse_action, help=f"one of: {', '.join(ACTIONS)}"
    )
    actor_option(submit, "who acts (default: the node's meta 'actor')")
    submit.add_argument("-m", "--message", metavar="M", help="the comment kept in the history")
    graph_file_option(submit)
    submit.set_defaults(handler=run_submit)


def run_start(args: argparse.Namespace) -> int:
    from flow_cli._graphs import load_graph
    from flow_cli._session import Session, parse_vars

    data = parse_vars(args.var)
    graph = load_graph(args.graph, strict=True)
    instance_id = (
        args.instance if args.instance is not None else f"{graph.id}-{uuid.uuid4().hex[:8]}"
    )
    with Session.open(args.db) as session:
        session.start(graph, instance_id, data, args.actor)
        standing = session.standing(instance_id, graph)
    print(escaped(f"started {instance_id} (graph {graph.id!r})"))
    print(escaped(f"waiting on: {standing.describe()}"))
    return 0


def run_claim(args: argparse.Namespace) -> int:
    from flow_cli._graphs import graph_override
    from flow_cli._session import Session

    override = graph_override(args.graph)
    with Session.open(args.db) as session:
        graph = session.graph_of(session.snapshot(args.instance), override)
        node = session.claim(args.instance, graph, args.actor)
        if node is None:
            who = f"actor {args.actor!r}" if args.actor else "no actor (give --actor)"
            where = session.where(args.instance, graph)
            raise CliError(f"no task of {args.instance!r} for {who}; it stands at: {where}")
    print(escaped(f"claimed {node.id}{_title(node.title, node.id)} of {args.instance}"))
    return 0


def run_submit(args: argparse.Namespace) -> int:
    from flow_cli._graphs import graph_override
    from flow_cli._session import Session

    override = graph_override(args.graph)
    action: TaskAction = args.action
    with Session.open(args.db) as session:
        graph = session.graph_of(session.snapshot(args.instance), override)
        node = graph.get_node_or_throw(args.node)
        actor = args.actor or node.meta_as_str("actor")
        session.submit(args.instance, graph, node, action, actor=actor, message=args.message)
        standing = session.standing(args.instance, graph)
    by = f" as {actor}" if actor else ""
    print(escaped(f"{action.name.lower()} {node.id}{_title(node.title, node.id)}{by}"))
    print(escaped(f"{args.instance} now: {standing.describe()}"))
    return 0


def _title(title: str | None, node_id: str) -> str:
    return f" ({title})" if title and title != node_id else ""
