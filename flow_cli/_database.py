"""Which database a command uses, and opening it with failures turned into one clear line.

SQLAlchemy is imported here lazily: ``import flow`` and ``flow validate`` never load it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flow_cli._errors import CliError, one_line

if TYPE_CHECKING:
    from sqlalchemy import Engine

ENV_VAR = "FLOW_DATABASE_URL"
DEMO_DIR = Path("flow-demo")
DEMO_DB = DEMO_DIR / "flow.sqlite"


def database_url(option: str | None) -> str:
    """``--db`` if given (even blank: the parser refuses that, and a caller passing one gets
    "bad database URL", never another database), else ``$FLOW_DATABASE_URL``, else the
    demo's SQLite file."""
    if option is not None:
        return option
    return os.environ.get(ENV_VAR) or default_url()


def default_url() -> str:
    return f"sqlite:///{DEMO_DB.as_posix()}"


def is_default(url: str) -> bool:
    return url == default_url()


#: Query parameters of a URL that carry a password to the driver (psycopg's ``password``,
#: PyMySQL's ``passwd``, ODBC-style ``pwd``): hidden like the URL's own password.
_SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd"})


def shown(url: str) -> str:
    """``url`` as it may be printed: the password hidden, also one passed as a query
    parameter (``?password=...``)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
        secret = {k: "***" for k in parsed.query if k.lower() in _SECRET_QUERY_KEYS}
        if secret:
            parsed = parsed.update_query_dict(secret)
        return parsed.render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is reported by open_engine: hidden as text
        return _masked_text(url)


#: ``scheme://user:`` then the password, up to the last ``@`` (SQLAlchemy's own URL pattern
#: lets a password hold anything but ``@``, ``/`` included).
_TEXT_PASSWORD = re.compile(r"^(?P<head>[\w+.-]+://[^:/@?#]*):.*@")
_TEXT_SECRET_QUERY = re.compile(
    r"(?P<head>[?&](?:" + "|".join(sorted(_SECRET_QUERY_KEYS)) + r")=)[^&]*", re.IGNORECASE
)


def _masked_text(url: str) -> str:
    """``url``, which SQLAlchemy cannot parse (a port that is no number, an IPv6 host left
    open), with its password hidden by pattern: the error naming such a URL is printed, and
    it once showed the password as typed. Masks more than the password rather than less."""
    url = _TEXT_PASSWORD.sub(r"\g<head>:***@", url, count=1)
    return _TEXT_SECRET_QUERY.sub(r"\g<head>***", url)


def open_engine(url: str) -> Engine:
    """An engine for ``url`` that has answered one round trip.

    Raises :class:`CliError` (one line) for a malformed URL, a missing driver, or a server or
    file that cannot be reached.
    """
    import sqlalchemy
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    try:
        engine = sqlalchemy.create_engine(url)
    except (ArgumentError, ValueError) as exc:
        raise CliError(f"bad database URL {shown(url)!r}: {one_line(exc)}") from exc
    except NoSuchModuleError as exc:
        raise CliError(f"no SQLAlchemy dialect for {shown(url)!r}: {one_line(exc)}") from exc
    except ImportError as exc:
        raise CliError(f"the database driver for {shown(url)!r} is not installed: {exc}") from exc
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except SQLAlchemyError as exc:
        engine.dispose()
        raise CliError(f"cannot connect to {shown(url)}: {driver_message(exc)}") from exc
    except (AttributeError, TypeError, ValueError, LookupError, OSError) as exc:
        # A driver that fails on its connection options before it reports a DBAPI error
        # (PyMySQL: an AttributeError for an unknown ``charset``, FileNotFoundError for a
        # missing ``ssl_ca``). Said as it is: --debug shows the chain.
        engine.dispose()
        raise CliError(
            f"cannot connect to {shown(url)}: {type(exc).__name__}: {one_line(exc)}"
        ) from exc
    return engine


def driver_message(exc: BaseException) -> str:
    """The driver's own message for a SQLAlchemy error, without SQL text or doc links."""
    orig = getattr(exc, "orig", None)
    if orig is not None:
        args: tuple[Any, ...] = tuple(getattr(orig, "args", ()))
        if len(args) >= 2 and isinstance(args[0], int):  # MySQL drivers: (code, message)
            return f"({args[0]}) {args[1]}"
        return one_line(orig)
    text = one_line(exc)
    return text.split(" (Background on this error")[0]
