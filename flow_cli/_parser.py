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
    parent.add_argument("--db", metavar="URL", type=non_blank, help=DB_HELP)
    return parent


def non_blank(value: str) -> str:
    """A value given explicitly (``--db``, ``--graph``, ``--instance``, ``--actor``,
    ``--role``): blank is a usage error, never "not given" — ``--graph ""`` once made submit
    and withdraw fall back to the stored graph while start refused it, ``--db ""`` meant the
    default database, ``start --instance ""`` a random id, and an empty ``--actor`` the node's
    own actor to one command while another refused it."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def actor_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--actor A`` (a blank value is a usage error)."""
    parser.add_argument("--actor", metavar="A", type=non_blank, help=help)


def graph_file_option(parser: argparse.ArgumentParser) -> None:
    """``--graph GRAPH``: the graph file to use instead of the one stored with the instance
    (a blank value is a usage error, never "the stored graph")."""
    parser.add_argument(
        "--graph",
        metavar="GRAPH",
        type=non_blank,
        help="graph file (default: the graph stored with INSTANCE)",
    )
