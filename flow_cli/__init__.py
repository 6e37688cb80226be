"""The ``flow`` command line: a demo, graph checks and pictures, and instances in a database.

``main()`` is the console script. Every failure is printed as one line
(``flow: error: ...``) with exit code 1 (2 for bad usage); ``--debug`` shows the traceback
instead. Database libraries are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from flow_cli._errors import CliError, one_line
from flow_cli._parser import Parser, debug_option

__all__ = ["CliError", "main"]

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> Parser:
    """The parser with every command registered (one module per command group)."""
    from flow_cli._demo import add_commands as add_demo
    from flow_cli._graphs import add_commands as add_graphs
    from flow_cli._inbox import add_commands as add_inbox
    from flow_cli._instances import add_commands as add_instances
    from flow_cli._tasks import add_commands as add_tasks

    parser = Parser(
        prog="flow",
        description="Run the approval demo, check and draw graphs, and drive flow instances "
        "stored in a database.",
        epilog="Run 'flow COMMAND --help' for the options of a command.",
    )
    parser.add_argument(
        "--debug", action="store_true", default=False, help="show the full traceback of an error"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    parents = [debug_option()]
    for add_commands in (add_demo, add_graphs, add_tasks, add_instances, add_inbox):
        add_commands(commands, parents)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = _asks_for_debug(args_list)
    try:
        args = build_parser().parse_args(args_list)
        handler: Handler = args.handler
        return handler(args)
    except CliError as exc:
        if debug:
            raise
        _fail(one_line(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except BrokenPipeError:  # e.g. `flow history X | head`: the reader has gone
        return _reader_gone()
    except Exception as exc:
        if debug:
            raise
        _fail(_describe(exc))
        return 1


#: The exit code of a command whose output's reader went away: 128 + SIGPIPE, the status a
#: shell gives any program that pipe ends (``cat big | head``).
READER_GONE = 141


def _reader_gone() -> int:
    """The command stopped when its standard output's reader closed the pipe: its outcome is
    unknown (``flow validate bad.yml | head`` stopped before it could exit 1 for the errors),
    so it must not exit 0 — a script with ``set -o pipefail`` would read success. Standard
    output goes to ``/dev/null`` so that the interpreter's last flush stays quiet."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return READER_GONE


def _asks_for_debug(args: Sequence[str]) -> bool:
    """Whether the command line gives ``--debug`` — known before parsing, so that a usage error
    shows its traceback too. Only words before ``--`` count: after it every word is an
    argument, and ``flow history -- --debug`` (an instance so named) printed a traceback."""
    options = args[: args.index("--")] if "--" in args else args
    return "--debug" in options


def _describe(exc: Exception) -> str:
    from flow.errors import FlowError

    if isinstance(exc, FlowError):
        return one_line(exc) + _cause(exc)
    if _is_database_error(exc):
        return f"database error: {_message_of(exc)}"
    return f"{type(exc).__name__}: {one_line(exc)} (run with --debug for the traceback)"


def _cause(exc: BaseException) -> str:
    """`` (Type: message)`` of the error a FlowError wraps (a task's own failure, say), unless
    the message already says it: the user should not need --debug to learn why."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, type(exc)) or _already_said(cause, str(exc)):
        return ""
    return f" ({type(cause).__name__}: {_message_of(cause)})"


def _is_database_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("sqlalchemy.")


def _message_of(exc: BaseException) -> str:
    """``exc``'s message on one line; a database error's as its driver says it — never the SQL
    statement and bound parameters SQLAlchemy appends (long, and holding row values)."""
    if _is_database_error(exc):
        from flow_cli._database import driver_message

        return driver_message(exc)
    return one_line(exc)


def _already_said(cause: BaseException, text: str) -> bool:
    """Whether ``text`` (the wrapping error's message) already carries ``cause``'s: flow_sqla
    quotes the first line of the driver's message in its own ("Database error ...")."""
    said = [_message_of(cause)]
    orig = getattr(cause, "orig", None)
    if orig is not None:
        said.append(next(iter(str(orig).strip().splitlines()), ""))
    return any(part and part in text for part in said)


def _fail(message: str) -> None:
    """Print the error line. ``message`` is one line already (:func:`one_line`); it may quote
    stored values (ids, titles written by another service), so control characters are shown
    escaped — and whitespace is kept, never folded: an id shown is the id, whole."""
    from flow_cli._table import escaped

    print(f"flow: error: {escaped(message)}", file=sys.stderr)
