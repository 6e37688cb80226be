"""The driver-level path runs exactly the SQL the Core constructs compile to.

``flow_sqla._prepared`` compiles the repository's and the recorder's fixed statements once per
dialect and executes the text on the driver-level path; the compiled-SQL snapshots guard the
constructs, these tests guard that the prepared text, parameter order and bind processing are
the compiler's own (tests/live/test_driver_path.py runs them on real servers).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import pymysql
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from flow_sqla._prepared import PreparedStatement
from flow_sqla.tables import FlowTables

DIALECTS = ["mysql", "mysql8", "mariadb", "postgresql", "sqlite"]


def _update(tables: FlowTables) -> sa.Update:
    t = tables.repository
    return (
        t.update()
        .where(t.c.instant_id == sa.bindparam("row_key", type_=t.c.instant_id.type))
        .values(
            states=sa.bindparam("states", type_=t.c.states.type),
            update_time=sa.bindparam("update_time", type_=t.c.update_time.type),
        )
    )


@pytest.mark.parametrize("key", DIALECTS)
def test_prepared_text_is_the_compiled_text(
    key: str, dialect_for: Callable[[str], Dialect]
) -> None:
    dialect = dialect_for(key)
    stmt = _update(FlowTables())
    assert PreparedStatement(stmt, dialect).sql == str(stmt.compile(dialect=dialect))


@pytest.mark.parametrize("key", DIALECTS)
def test_parameters_are_processed_and_ordered_as_the_compiler_says(
    key: str, dialect_for: Callable[[str], Dialect]
) -> None:
    dialect = dialect_for(key)
    stmt = _update(FlowTables())
    compiled = stmt.compile(dialect=dialect)
    when = datetime(2026, 12, 2, 8, 30)
    values = {"states": {"oa:apply": 1002}, "update_time": when, "row_key": "inv-1"}
    params = PreparedStatement(stmt, dialect).bind(values)
    expected = compiled.construct_params(values)
    processors = compiled._bind_processors
    processed = {
        name: processors[name](value) if callable(processors.get(name)) else value  # type: ignore[operator]
        for name, value in expected.items()
    }
    if compiled.positional:
        ordered = tuple(processed[n] for n in compiled.positiontup or ())
        assert _as_sent(key, params) == _as_sent(key, ordered)
    else:
        assert _plain({name: params[name] for name in processed}) == _plain(processed)
    # JSON goes to the driver encoded (psycopg: wrapped in its Json adapter), never as a dict.
    encoded = params[0] if compiled.positional else params["states"]
    assert not isinstance(encoded, dict)


def _as_sent(key: str, values: tuple[Any, ...]) -> Any:
    """What the server receives: MySQL's drivers render each parameter into the text on the
    client (PyMySQL's rendering, the same as MySQLdb's), the others bind them."""
    if key in ("mysql", "mysql8", "mariadb"):
        return tuple(pymysql.converters.escape_item(value, "utf8mb4") for value in values)
    return _plain(values)


def _plain(values: Any) -> Any:
    """Driver adapter objects without equality (psycopg's ``Json``) compared by content."""
    if isinstance(values, dict):
        return {name: _plain(value) for name, value in values.items()}
    if isinstance(values, tuple):
        return tuple(_plain(value) for value in values)
    return getattr(values, "obj", values)


def test_statements_with_post_compile_parameters_are_refused(
    dialect_for: Callable[[str], Dialect],
) -> None:
    t = FlowTables().repository
    stmt = sa.select(t.c.id).where(t.c.instant_id.in_(sa.bindparam("ids", expanding=True)))
    with pytest.raises(ValueError, match="post-compile"):
        PreparedStatement(stmt, dialect_for("postgresql"))


class _Refusing(sa.types.TypeDecorator[str]):
    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str:
        raise ValueError(f"cannot store {value!r}")


def test_a_failing_bind_processor_raises_what_connection_execute_raises(
    dialect_for: Callable[[str], Dialect],
) -> None:
    """A ``StatementError`` (which the library translates), never the raw exception."""
    t = FlowTables().repository
    stmt = t.update().values(updater=sa.bindparam("who", type_=_Refusing()))
    dialect = dialect_for("sqlite")
    with pytest.raises(sa.exc.StatementError, match="cannot store 'x'"):
        PreparedStatement(stmt, dialect).bind({"who": "x"})


_TIMES = [
    datetime(2026, 12, 6, 8, 30),
    datetime(2026, 12, 6, 8, 30, 5, 120),
    datetime(5, 1, 2, 3, 4, 5),
    datetime(2026, 12, 6, 8, 30, tzinfo=UTC),
    date(2026, 12, 6),
    None,
]


@pytest.mark.parametrize("url", ["mysql+mysqldb://", "mariadb+pymysql://"])
@pytest.mark.parametrize("when", _TIMES, ids=repr)
def test_mysql_drivers_receive_a_time_as_the_literal_they_render_for_it(
    url: str, when: Any
) -> None:
    """MySQLdb and PyMySQL render parameters into the text on the client, a ``datetime``
    through a Python function; a naive one is bound as its text (one C call), and the
    statement the server receives does not change."""
    dialect = sa.make_url(url).get_dialect()()
    stmt = _update(FlowTables())
    values = {"states": {}, "update_time": when, "row_key": "inv-1"}
    sent = PreparedStatement(stmt, dialect).bind(values)
    position = stmt.compile(dialect=dialect).positiontup.index("update_time")  # type: ignore[union-attr]
    literal = pymysql.converters.escape_item(sent[position], "utf8mb4")
    assert literal == pymysql.converters.escape_item(when, "utf8mb4")
    naive = isinstance(when, datetime) and when.tzinfo is None
    assert isinstance(sent[position], str) is naive


def test_drivers_that_bind_on_the_server_keep_the_typed_time(
    dialect_for: Callable[[str], Dialect],
) -> None:
    when = datetime(2026, 12, 6, 8, 30)
    stmt = _update(FlowTables())
    values = {"states": {}, "update_time": when, "row_key": "inv-1"}
    sent = PreparedStatement(stmt, dialect_for("postgresql")).bind(values)
    assert sent["update_time"] is when
