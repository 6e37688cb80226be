"""The ``Engine`` a repository or recorder creates when it is given a URL instead of one, and
whether an engine or connection commits every statement on its own."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from flow_sqla._dialect import json_dumps


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
    return sa.create_engine(bind, json_serializer=json_dumps, pool_reset_on_return=None)


def is_autocommit(bind: Engine | Connection) -> bool:
    """Whether ``bind`` runs in ``AUTOCOMMIT`` mode: its own ``isolation_level`` execution
    option, else the level its engine sets on every new connection (``create_engine(...,
    isolation_level=...)``, kept by the dialect). No SQL is sent."""
    level = bind.get_execution_options().get("isolation_level")
    if level is None:
        level = getattr(bind.dialect, "_on_connect_isolation_level", None)
    return isinstance(level, str) and level.upper() == "AUTOCOMMIT"


__all__ = ["engine_for", "is_autocommit"]
