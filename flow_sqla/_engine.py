"""The ``Engine`` a repository or recorder creates when it is given a URL instead of one."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

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


__all__ = ["engine_for"]
