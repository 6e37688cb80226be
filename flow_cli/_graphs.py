"""``flow validate`` and ``flow render``: check graph files, draw graphs and instances."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flow.errors import GraphDefinitionError
from flow.graph import Graph
from flow_cli._errors import CliError, one_line
from flow_cli._parser import Parser, db_option, non_blank
from flow_cli._table import escaped

FORMATS = ("mermaid", "dot", "svg", "png")
_SUFFIX_FORMATS = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
}


def add_commands(commands: Any, parents: Sequence[Parser]) -> None:
    validate = commands.add_parser(
        "validate",
        parents=parents,
        help="check graph files and print every problem",
        description="Load each graph file strictly and print every problem with its node id: "
        "parse errors with line and column, duplicate node ids, links to unknown nodes, "
        "expressions that do not parse (errors) and unknown types, unreachable nodes, "
        "joins that never fire (warnings). Exit code 1 when any file has an error.",
    )
    validate.add_argument("graphs", nargs="+", metavar="GRAPH", help="a .yml/.yaml/.json file")
    validate.set_defaults(handler=run_validate)

    render = commands.add_parser(
        "render",
        parents=[*parents, db_option()],
        help="draw a graph, or where an instance stands",
        description="Draw GRAPH as Mermaid or Graphviz text, or as SVG/PNG through Graphviz's "
        "`dot` program. With --instance the nodes are coloured by the instance's states "
        "(completed green, waiting amber, terminated red) and GRAPH may be left out: the "
        "graph stored with the instance is used.",
    )
    render.add_argument("graph", nargs="?", metavar="GRAPH", help="a .yml/.yaml/.json file")
    render.add_argument(
        "--instance", metavar="ID", type=non_blank, help="colour nodes by this instance's states"
    )
    render.add_argument(
        "--format",
        choices=FORMATS,
        help="output format (default: from the -o suffix, else mermaid)",
    )
    render.add_argument(
        "-o", "--output", metavar="FILE", type=non_blank, help="write here instead of stdout"
    )
    render.set_defaults(handler=run_render)


# -- validate -------------------------------------------------------------------------------


def run_validate(args: argparse.Namespace) -> int:
    errors = warnings = 0
    for path in args.graphs:
        for severity, line in check_file(path):
            print(escaped(line))  # ids are the file's: no line or escape sequence of theirs
            errors += severity == "error"
            warnings += severity == "warning"
    files = len(args.graphs)
    print(
        f"{files} file{'s' * (files != 1)} checked: "
        f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    )
    return 1 if errors else 0


def check_file(path: str) -> list[tuple[str, str]]:
    """``(severity, line)`` per problem of the graph file at ``path`` (``("ok", "path: ok
    ...")`` when none) — counted by severity, never by what a line says (an id may say
    anything)."""
    from flow.loader import read_graph_file
    from flow.spec import GraphSpec

    try:
        graph = GraphSpec.from_text(read_graph_file(path)).create()
    except GraphDefinitionError as exc:
        where, message = path, one_line(exc).removeprefix(f"{path}: ")
        if exc.line is not None:
            where += f":{exc.line}:{exc.column or 1}"
            message = message.replace(f" at line {exc.line}, column {exc.column}", "")
        return [("error", f"{where}: error: {message}")]
    problems = graph.validate()
    if not problems:
        return [("ok", f"{path}: ok (graph {graph.id!r}, {len(graph.nodes)} nodes)")]
    return [(problem.severity, f"{path}: {problem}") for problem in problems]


# -- render ---------------------------------------------------------------------------------


def run_render(args: argparse.Namespace) -> int:
    fmt = args.format or _format_of(args.output)
    if args.graph is None and args.instance is None:
        raise CliError("give a GRAPH file, or --instance ID to draw a stored instance", exit_code=2)
    if args.output is not None:
        _check_not_an_input(args.output, args)
    if fmt == "png" and args.output is None:
        raise CliError("png output needs -o FILE", exit_code=2)
    graph = load_graph(args.graph) if args.graph is not None else None
    states: Mapping[str, int] | None = None
    if args.instance is not None:
        from flow_cli._session import Session

        with Session.open(args.db) as session:
            graph, states = session.picture_states(args.instance, graph)
    if graph is None:  # unreachable: one of GRAPH / --instance was checked above
        raise CliError("no graph to draw")
    data = render_graph(graph, states, fmt, args.instance)
    if args.output is None:
        sys.stdout.write(data.decode("utf-8"))
    else:
        write_output(Path(args.output), data)
        print(f"wrote {args.output}")
    return 0


def _format_of(output: str | None) -> str:
    """The format an ``-o`` file's suffix names; Mermaid for standard output or a file without
    a suffix. Another suffix is a usage error: ``-o pic.jpg`` wrote Mermaid text into a file
    every viewer takes for a JPEG."""
    suffix = Path(output or "").suffix.lower()
    if not suffix:
        return "mermaid"
    fmt = _SUFFIX_FORMATS.get(suffix)
    if fmt is None:
        known = ", ".join(_SUFFIX_FORMATS)
        raise CliError(
            f"-o {output}: no picture format is known by the suffix {suffix!r} ({known}); "
            "give --format",
            exit_code=2,
        )
    return fmt


def _check_not_an_input(output: str, args: argparse.Namespace) -> None:
    """Refuse an ``-o`` file that is the graph file being drawn, or the SQLite database the
    instance is read from: it was overwritten with the picture."""
    from flow_cli._database import database_url
    from flow_cli._session import sqlite_file

    inputs = [("the graph file being drawn", None if args.graph is None else Path(args.graph))]
    if args.instance is not None:
        inputs.append(("the database", sqlite_file(database_url(args.db))))
    for what, path in inputs:
        if path is not None and _same_file(Path(output), path):
            raise CliError(f"-o {output}: that is {what}; give another file", exit_code=2)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return (a.exists() and b.exists() and a.samefile(b)) or a.resolve() == b.resolve()
    except OSError:  # a path that cannot be resolved names no file of the other
        return False


def graph_override(path: str | None) -> Graph | None:
    """The graph a ``--graph`` file option names (:func:`graph_file_option`), loaded strictly
    — or ``None`` when it was not given: the command then uses the graph stored with the
    instance."""
    return load_graph(path, strict=True) if path is not None else None


def load_graph(path: str, *, strict: bool = False) -> Graph:
    """The graph in the file at ``path``; a missing or broken file is one clear error.

    ``strict`` (the commands that run a graph) refuses a graph that ``flow validate`` rejects,
    before anything is written; ``flow render`` draws any graph that loads.
    """
    try:
        return Graph.from_file(path, strict=strict)
    except GraphDefinitionError as exc:
        message = one_line(exc)
        if exc.problems:
            message += f" (see: flow validate {path})"
        raise CliError(message if message.startswith(path) else f"{path}: {message}") from exc


def render_graph(
    graph: Graph, states: Mapping[str, int] | None, fmt: str, instance_id: str | None = None
) -> bytes:
    """``graph`` drawn in ``fmt`` (mermaid, dot, svg or png) as bytes; with ``states``, the
    picture of instance ``instance_id`` (legend, actors, path taken)."""
    from flow.render import graph_to_dot, graph_to_mermaid

    if fmt == "mermaid":
        return graph_to_mermaid(graph, states, instance_id=instance_id).encode("utf-8")
    dot_text = graph_to_dot(graph, states, instance_id=instance_id)
    if fmt == "dot":
        return dot_text.encode("utf-8")
    return run_dot(dot_text, fmt)


def dot_program() -> str | None:
    """The path of Graphviz's ``dot``, or ``None`` when it is not installed."""
    return shutil.which("dot")


def run_dot(dot_text: str, fmt: str) -> bytes:
    """``dot_text`` rendered to ``fmt`` by Graphviz; raises :class:`CliError` without it."""
    program = dot_program()
    if program is None:
        raise CliError(
            f"{fmt} output needs Graphviz's `dot` program, which is not installed "
            "(e.g. apt-get install graphviz); --format mermaid or dot works without it"
        )
    try:
        done = subprocess.run(
            [program, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True, check=False
        )
    except OSError as exc:
        raise CliError(f"cannot run {program}: {exc}") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CliError(f"dot failed: {detail[0] if detail else f'exit code {done.returncode}'}")
    return done.stdout


def write_output(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from exc
