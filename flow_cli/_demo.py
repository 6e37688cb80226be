"""``flow demo``: the expense approval (``oa.yml``) moved through its steps in a database.

Seven instances, each a short story: a small amount the manager approves, a large one for the
director, one sent back and resubmitted, one terminated, one left waiting for the manager (whose
picture is written to ``flow-demo/``), one the director sends back to whoever sent it and one
the employee withdraws; then the manager's and the employee's inboxes. Each run uses fresh
instance ids, so the demo can be run again on the same database.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flow.context import FlowContext
from flow.graph import Graph
from flow.workflow.states import TaskAction
from flow_cli._database import DEMO_DIR, shown
from flow_cli._errors import CliError
from flow_cli._parser import Parser, db_option, non_blank
from flow_cli._table import format_table

if TYPE_CHECKING:
    from flow_cli._session import Session

FORWARD, BACK, TERMINATE = TaskAction.FORWARD, TaskAction.BACK, TaskAction.TERMINATE


@dataclass(frozen=True, kw_only=True)
class Step:
    actor: str
    action: TaskAction
    message: str


@dataclass(frozen=True, kw_only=True)
class Story:
    key: str
    purpose: str
    amount: int
    note: str
    steps: tuple[Step, ...]


STORIES = (
    Story(
        key="taxi",
        purpose="Taxi to the airport",
        amount=120,
        note="a small amount: the manager approves",
        steps=(
            Step(actor="employee", action=FORWARD, message="Taxi to the airport, receipt attached"),
            Step(actor="manager", action=FORWARD, message="Approved"),
        ),
    ),
    Story(
        key="laptop",
        purpose="New laptop",
        amount=8000,
        note="5000 and more: the director approves",
        steps=(
            Step(actor="employee", action=FORWARD, message="Laptop for the new designer"),
            Step(actor="director", action=FORWARD, message="Approved, within budget"),
        ),
    ),
    Story(
        key="conference",
        purpose="Conference trip",
        amount=6500,
        note="sent back, resubmitted, approved",
        steps=(
            Step(actor="employee", action=FORWARD, message="Trip to PyCon"),
            Step(actor="director", action=BACK, message="Please attach the hotel invoice"),
            Step(actor="employee", action=FORWARD, message="Hotel invoice attached"),
            Step(actor="director", action=FORWARD, message="Approved"),
        ),
    ),
    Story(
        key="gadget",
        purpose="Desk gadget",
        amount=300,
        note="terminated by the manager",
        steps=(
            Step(actor="employee", action=FORWARD, message="A desk gadget"),
            Step(actor="manager", action=TERMINATE, message="Not a business expense"),
        ),
    ),
    Story(
        key="training",
        purpose="SQL training course",
        amount=2000,
        note="submitted, now waiting for the manager",
        steps=(Step(actor="employee", action=FORWARD, message="SQL training course"),),
    ),
)
HISTORY_STORY = "conference"
PICTURE_STORY = "training"


def add_commands(commands: Any, parents: Sequence[Parser]) -> None:
    demo = commands.add_parser(
        "demo",
        parents=[*parents, db_option()],
        help="run the expense approval demo end to end",
        description="Create the flow tables if needed, then move seven instances of the "
        "expense approval (graph 'oa') through their steps as different actors (a send-back "
        "and a withdraw among them), print each step, the audit trail of one instance and the "
        "inboxes of the manager and the employee, and write a picture of one instance "
        "(Mermaid .mmd, plus .svg when Graphviz is installed).",
    )
    demo.add_argument(
        "--out",
        metavar="DIR",
        type=non_blank,
        default=str(DEMO_DIR),
        help=f"where to write the pictures (default: {DEMO_DIR})",
    )
    demo.set_defaults(handler=run_demo)


def demo_graph_text() -> str:
    """The text of the demo graph shipped inside the package (``flow_cli/oa.yml``)."""
    return resources.files("flow_cli").joinpath("oa.yml").read_text(encoding="utf-8")


def run_demo(args: argparse.Namespace) -> int:
    from flow_cli._session import Session

    graph = Graph.from_text(demo_graph_text(), strict=True)
    run = uuid.uuid4().hex[:6]
    out_dir = picture_directory(Path(args.out))
    with Session.open(args.db, migrate=True) as session:
        print(f"flow demo: {graph.title!r} (graph {graph.id!r}) in {shown(session.url)}")
        print(f"tables are migrated; this run's instances are {graph.id}-{run}-*")
        for number, story in enumerate(STORIES, start=1):
            print()
            play(session, graph, f"{graph.id}-{run}-{story.key}", story, number)
        print()
        tasks(session, graph, run, len(STORIES) + 1)
        history_id = f"{graph.id}-{run}-{HISTORY_STORY}"
        print(f"\nHistory of {history_id} (flow history {history_id}):")
        print(_indent(_history(session, history_id)))
        picture_id = f"{graph.id}-{run}-{PICTURE_STORY}"
        written = write_pictures(session, picture_id, out_dir)
    print(f"\nPicture of {picture_id}, where it stands: {' and '.join(map(str, written))}")
    if len(written) == 1:
        print("(Graphviz adds an .svg of it: apt-get install graphviz, then run the demo again)")
    flow, hint = how_to_type_flow()
    db = f" --db {shlex.quote(shown(args.db))}" if args.db else ""
    print(f"\nTry next{hint}:")
    print(f"  {flow} instances{db}")
    print(f"  {flow} inbox --actor manager{db}")
    print(f"  {flow} instances --status withdrawn{db}")
    print(f"  {flow} render --instance {picture_id}{db}")
    print(f"  {flow} history {picture_id}{db}")
    print(f"  {flow} submit {picture_id} manager forward --actor manager -m Approved{db}")
    return 0


def how_to_type_flow() -> tuple[str, str]:
    """How to type the running ``flow`` command in this shell, and a hint when that is a path.

    ``make demo`` runs ``.venv/bin/flow``, which is not on ``PATH`` until the venv is activated:
    printing a bare ``flow`` would send the user to "command not found".
    """
    script = Path(sys.argv[0])
    if script.name != "flow" or not script.is_file():
        return "flow", ""
    found = shutil.which("flow")
    if found is not None and Path(found).resolve() == script.resolve():
        return "flow", ""
    try:
        typed = script.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        typed = str(script.resolve())
    activate = script.parent / "activate"
    if not activate.is_file():
        return shlex.quote(typed), ""
    activate_typed = shlex.quote((Path(typed).parent / "activate").as_posix())
    return shlex.quote(typed), f" (or activate the venv once, . {activate_typed}, then type flow)"


def play(session: Session, graph: Graph, instance_id: str, story: Story, number: int) -> None:
    """Start ``instance_id`` and run ``story``'s steps, printing one table row per step."""
    data = {"amount": story.amount, "purpose": story.purpose}
    print(f"{number}. {instance_id}: {story.purpose}, amount {story.amount} ({story.note})")
    session.start(graph, instance_id, data, story.steps[0].actor)
    rows = []
    for step in story.steps:
        node = session.claim(instance_id, graph, step.actor)
        if node is None:
            where = session.standing(instance_id, graph).describe()
            raise CliError(f"demo: {step.actor} has no task in {instance_id} (at: {where})")
        session.submit(
            instance_id, graph, node, step.action, actor=step.actor, message=step.message
        )
        then = session.standing(instance_id, graph).describe()
        action = step.action.name.lower()
        rows.append((step.actor, node.title or node.id, action, step.message, then))
    print(_indent(format_table(("by", "task", "action", "message", "then"), rows)))


def tasks(session: Session, graph: Graph, run: str, number: int) -> None:
    """The task index: a send-back by lineage, a withdraw, and the inboxes afterwards."""
    from flow_cli._inbox import inbox_table, task_label

    trip = f"{graph.id}-{run}-trip"
    print(f"{number}. {trip}: Team offsite, amount 7000 (sent back to whoever sent it)")
    session.start(graph, trip, {"amount": 7000, "purpose": "Team offsite"}, "employee")
    node = session.claim(trip, graph, "employee")
    if node is None:
        raise CliError(f"demo: employee has no task in {trip}")
    session.submit(trip, graph, node, FORWARD, actor="employee", message="Team offsite")
    director = graph.get_node_or_throw("director")
    waiting = session.send_back(trip, graph, director, actor="director", message="Which venue?")
    back_to = ", ".join(task_label(node_id, title) for node_id, title in waiting)
    print(f"   director sends it back (flow send-back {trip} director): waits on {back_to}")

    chair = f"{graph.id}-{run}-chair"
    print(f"\n{number + 1}. {chair}: Office chair, amount 400 (withdrawn by the employee)")
    session.start(graph, chair, {"amount": 400, "purpose": "Office chair"}, "employee")
    node = session.claim(chair, graph, "employee")
    if node is None:
        raise CliError(f"demo: employee has no task in {chair}")
    session.submit(chair, graph, node, FORWARD, actor="employee", message="Office chair")
    closed = session.withdraw(chair, graph, actor="employee", message="Bought one myself")
    print(f"   employee withdraws it (flow withdraw {chair}): terminated {', '.join(closed)}")

    executor = session.query_executor("inbox")
    for actor in ("manager", "employee"):
        found = [
            t
            for t in executor.inbox(FlowContext.of(None, {"actor": actor}), limit=200)
            if t.instance_id.startswith(f"{graph.id}-{run}-")
        ]
        print(f"\nInbox of {actor} (flow inbox --actor {actor}):")
        print(_indent(inbox_table(found) if found else "no open task"))


def _history(session: Session, instance_id: str) -> str:
    from flow_cli._instances import history_table

    return history_table(session.history(instance_id))


def picture_directory(out_dir: Path) -> Path:
    """``--out``, created if need be — before the demo opens its database: an ``--out`` that
    cannot be a directory (a file, or a path under one) once failed only after the whole demo
    had been stored, with a bare 'File exists'."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileExistsError | NotADirectoryError):
            reason = "it is not a directory" if out_dir.exists() else "a parent is not a directory"
        raise CliError(f"--out {out_dir}: {reason}") from exc
    return out_dir


def write_pictures(session: Session, instance_id: str, out_dir: Path) -> list[Path]:
    """``<instance>.mmd`` always, ``<instance>.svg`` too when Graphviz is installed."""
    from flow_cli._graphs import dot_program, render_graph, write_output

    graph, states = session.picture_states(instance_id, None)
    written = [out_dir / f"{instance_id}.mmd"]
    write_output(written[0], render_graph(graph, states, "mermaid", instance_id))
    if dot_program() is not None:
        written.append(out_dir / f"{instance_id}.svg")
        write_output(written[1], render_graph(graph, states, "svg", instance_id))
    return written


def _indent(text: str) -> str:
    return "\n".join("   " + line for line in text.splitlines())
