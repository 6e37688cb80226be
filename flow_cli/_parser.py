"""The argument parser shared by every command: one-line usage errors, common options."""

from __future__ import annotations

import argparse
from typing import NoReturn

from flow_cli._errors import CliError

DB_HELP = (
    "database URL (SQLAlchemy form, e.g. mysql+pymysql://user@host/db); default: "
    "$FLOW_DATABASE_URL, else the demo's SQLite file flow-demo/flow.sqlite"
)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line naming the help to read."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')", exit_code=2)


def debug_option() -> Parser:
    """A parent parser adding ``--debug`` to a command (tracebacks instead of one-liners)."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of an error",
    )
    return parent


def db_option() -> Parser:
    """A parent parser adding ``--db URL`` to the commands that use a database."""
    parent = Parser(add_help=False)
    parent.add_argument("--db", metavar="URL", help=DB_HELP)
    return parent


def identity(value: str) -> str:
    """An ``--actor``/``--role`` value: blank is a usage error, never "no one" — an empty
    ``--actor`` once meant the node's own actor to one command and was refused by another."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def actor_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--actor A`` (a blank value is a usage error)."""
    parser.add_argument("--actor", metavar="A", type=identity, help=help)
