"""The ``Engine`` a repository or recorder creates when it is given a URL instead of one."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from flow_sqla._dialect import json_dumps
from flow_sqla.errors import RepositoryError


def engine_for(bind: Engine | str) -> Engine:
    """``bind`` itself when it is an ``Engine``; else a new engine for the URL.

    A new engine stores JSON compactly with readable non-ASCII text (:func:`json_dumps`) and
    skips the pool's reset-on-return ``ROLLBACK``: every use of it here is a ``with
    engine.begin()`` (committed or rolled back) or a ``with engine.connect()`` (whose close
    rolls back an open transaction), so that extra round trip after each operation would only
    repeat what has been done.
    """
    if isinstance(bind, Engine):
        return bind
    try:
        engine = sa.create_engine(bind, json_serializer=json_dumps, pool_reset_on_return=None)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError) as exc:
        # Not a URL, an unknown dialect, a bad query argument: a library error, not SQLAlchemy's.
        raise RepositoryError(f"Cannot create a database engine for {_shown(bind)}: {exc}") from exc
    except ImportError as exc:
        # A known dialect whose driver is not installed (``postgresql+pg8000`` without pg8000).
        raise RepositoryError(
            f"Cannot create a database engine for {_shown(bind)}: its driver is not installed "
            f"({exc})"
        ) from exc
    sa.event.listen(engine, "do_connect", _refusing_bad_arguments(_shown(bind)))
    return engine


def _refusing_bad_arguments(url: str) -> Callable[..., Any]:
    """A ``do_connect`` listener that connects as SQLAlchemy would, and turns a driver refusing
    the URL's query arguments — PyMySQL's ``TypeError`` for an unknown one (``?bad=1``), its
    ``AttributeError`` for an unknown ``charset``, an unknown encoding's ``LookupError`` — into
    a RepositoryError naming ``url``: SQLAlchemy wraps only the driver's own ``Error``
    classes, so these left every operation (and the migrations) with a bare exception. For
    engines made from URLs here; an engine the caller made is the caller's."""

    def connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> Any:
        try:
            return dialect.connect(*cargs, **cparams)
        except (TypeError, AttributeError, LookupError, ValueError) as exc:
            raise RepositoryError(
                f"Cannot connect to {url}: the driver refused the URL's arguments: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    return connect


def _shown(url: object) -> str:
    """The URL with its password hidden (SQLAlchemy's own rendering), or as given."""
    try:
        return repr(sa.engine.make_url(url).render_as_string(hide_password=True))  # type: ignore[arg-type]
    except Exception:  # not parseable: show what was given, its password hidden, cut
        text = repr(_PASSWORD.sub(r"\1***@", url) if isinstance(url, str) else url)
        return text if len(text) <= 80 else text[:75] + "..."


#: The password of ``scheme://user:password@host...`` as far as it can be told in a URL that
#: SQLAlchemy cannot parse (a bad port, a broken IPv6 address): up to the last ``@`` before
#: the path, as SQLAlchemy's own parser reads it.
_PASSWORD = re.compile(r"(://[^:/@]*:)[^/]*@")


__all__ = ["engine_for"]
