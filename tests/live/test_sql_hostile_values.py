"""Hostile context values on real databases: a poisoned value never bricks an instance.

Either the value round-trips exactly, or the write is refused with ``ContextValueError``
naming the instance and the key, nothing is written (states, vars, history, not even a new
row), and the next call with a clean context works. Rows written before the tag escape, and
stored JSON nested too deeply to parse, are read or refused with ``SnapshotError``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
import sqlalchemy as sa
from _support import (
    approve,
    count_rows,
    ctx,
    every_row,
    executor,
    flow_engine,
    migrate,
    raw_row,
)

from flow import CodecLimits, ContextValueError, FlowContext, SnapshotError
from flow.workflow import ActorStateController, TaskAction, WorkflowExecutor
from flow_sqla import SqlStateRepository, TaskHistoryRecorder, sql_workflow


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    return migrate(engine)


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _cyclic() -> list[Any]:
    value: list[Any] = ["x"]
    value.append(value)
    return value


def _set_vars(db: sa.Engine, instance_id: str, text: str) -> None:
    with db.begin() as conn:
        conn.execute(
            sa.text("UPDATE bpm_flow_repository SET vars = :v WHERE instant_id = :i"),
            {"v": text, "i": instance_id},
        )


def _workflow(db: sa.Engine, **options: Any) -> WorkflowExecutor:
    return sql_workflow(db, flow_engine(), state_controller=ActorStateController(), **options)


TAG_SHAPED = [
    {"$decimal": "approx. 12 EUR"},
    {"$date": "2026-01-02"},
    {"$datetime": "not a time"},
    {"$uuid": "x"},
    {"$dict": {"$time": "03:04"}},
    {"$ref": [1, {"$date": "2026-13-45"}]},
    {"note": {"$decimal": "NaN-ish"}, "$date": "x"},
]


@pytest.mark.parametrize("plain_json", [False, True])
@pytest.mark.parametrize("form", TAG_SHAPED, ids=repr)
def test_user_dicts_shaped_like_tags_round_trip_and_never_brick(
    db: sa.Engine, form: Any, plain_json: bool
) -> None:
    ex = _workflow(db, plain_json=plain_json)
    assert approve(ex, "tag-1", "employee", amount=1, form=form)
    assert approve(ex, "tag-1", "manager")  # the instance goes on for everyone
    assert SqlStateRepository(db).restore_context("tag-1").get("form") == form
    history = TaskHistoryRecorder(db).history("tag-1")
    assert [entry.variables.get("form") for entry in history] == [form, form]


TAG_NAMED = {
    "$decimal": "1.5",
    "$date": "2026-01-02",
    "$uuid": str(uuid.UUID(int=7)),
    "$dict": {"amount": 9000},
}


@pytest.mark.parametrize(("name", "value"), TAG_NAMED.items(), ids=list(TAG_NAMED))
def test_variables_named_like_tags_are_names_and_never_brick(
    db: sa.Engine, name: str, value: Any
) -> None:
    """The stored variables object is never read as a tag: ``{"$decimal": "1.5"}`` is a
    variable of that name, not a ``Decimal`` the instance cannot be read as."""
    ex = _workflow(db)
    assert approve(ex, "tag-v", "employee", **{name: value})
    restored = SqlStateRepository(db).restore_context("tag-v")
    assert restored.get(name) == value and restored.get("amount") is None
    assert approve(ex, "tag-v", "manager")  # routed without an amount nobody set
    recorder = TaskHistoryRecorder(db)
    assert [entry.variables.get(name) for entry in recorder.history("tag-v")] == [value, value]
    assert [entry.assignee for entry in recorder.by_assignee("employee")] == ["employee"]


def test_rows_written_before_the_escape_read_and_continue(db: sa.Engine) -> None:
    """An unparseable tag in an old row was a user dict: it reads as that dict, and the
    instance is no longer bricked."""
    ex = executor(db)
    approve(ex, "old-1", "employee", amount=1)
    _set_vars(db, "old-1", '{"amount": 1, "form": {"$decimal": "approx. 12 EUR"}}')
    assert approve(ex, "old-1", "manager")
    assert SqlStateRepository(db).restore_context("old-1").get("form") == {
        "$decimal": "approx. 12 EUR"
    }


BAD_VALUES: list[Any] = [
    10**4300,
    -(10**5000),
    {"n": [10**4400]},
    _nested(5000),
    _nested(31),
    _cyclic(),
    "text with a lone \ud800 surrogate",
    ["ok", {"k": "\udfff"}],
    {"key \ud83d": 1},
    {7: "non-string key"},
    float("nan"),
    [float("inf")],
    "x" * 1_100_000,
    # Data the codec has no form for, at the top level too (it was left out, like a service
    # object, and read back as null).
    timedelta(days=3),
    complex(1, 2),
    Fraction(1, 3),
]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=lambda v: type(v).__name__)
def test_a_poisoned_submit_is_refused_nothing_is_written_and_the_instance_goes_on(
    db: sa.Engine, bad: Any
) -> None:
    ex = executor(db)
    approve(ex, "poison-1", "employee", amount=1)
    task = ex.claim_task("oa", ctx("poison-1", "manager"))
    before = raw_row(db, "poison-1")
    # the key is named, except for the size of the whole document
    with pytest.raises(ContextValueError, match=r"('attachment'.*|bytes of JSON.*)'poison-1'"):
        ex.submit_task_if_waiting(
            task, TaskAction.FORWARD, ctx("poison-1", "manager", attachment=bad)
        )
    assert raw_row(db, "poison-1") == before
    assert count_rows(db, "bpm_flow_task", "poison-1") == 1
    assert approve(ex, "poison-1", "manager")  # a clean context continues the instance
    assert count_rows(db, "bpm_flow_task", "poison-1") == 2


@pytest.mark.parametrize(
    "bad",
    [10**4300, _cyclic(), "\ud800", "x" * 1_100_000],
    ids=["int", "cycle", "surrogate", "size"],
)
def test_a_poisoned_first_write_creates_no_row(db: sa.Engine, bad: Any) -> None:
    ex = executor(db)
    with pytest.raises(ContextValueError, match="'new-1'"):
        approve(ex, "new-1", "employee", amount=1, attachment=bad)
    assert count_rows(db, "bpm_flow_repository", "new-1") == 0
    assert count_rows(db, "bpm_flow_task", "new-1") == 0
    assert approve(ex, "new-1", "employee", amount=1)


@pytest.mark.parametrize("index", [False, True], ids=["index off", "index on"])
@pytest.mark.parametrize("step", ["claim", "submit_task_at"])
def test_a_refused_first_operation_in_a_transaction_the_caller_commits_leaves_no_row(
    db: sa.Engine, step: str, index: bool
) -> None:
    """The caller catches the refusal and commits the rest of their transaction: the row the
    operation's locking read inserted for the unknown id is gone too (it stayed, empty)."""
    ex = executor(db, index=index)
    with db.begin() as conn:
        c = ctx("new-2", "employee", conn, amount=1, attachment=float("nan"))
        with pytest.raises(ContextValueError, match="'new-2'"):
            if step == "claim":
                ex.claim_task("oa", c)
            else:
                ex.submit_task_at("oa", "apply", TaskAction.FORWARD, c)
        conn.execute(sa.text("SELECT 1"))  # the caller's transaction goes on
    assert count_rows(db, "bpm_flow_repository") == 0
    assert count_rows(db, "bpm_flow_task") == 0
    assert approve(ex, "new-2", "employee", amount=1)


def test_a_refused_operation_on_an_existing_instance_keeps_its_row_in_a_committed_transaction(
    db: sa.Engine,
) -> None:
    """Only a row that holds nothing is removed after a refusal: an instance's row stays as
    it was when the caller commits after the error."""
    ex = executor(db)
    approve(ex, "old-1", "employee", amount=1)
    task = ex.claim_task("oa", ctx("old-1", "manager"))
    before = raw_row(db, "old-1")
    with db.begin() as conn:
        c = ctx("old-1", "manager", conn, attachment=float("nan"))
        with pytest.raises(ContextValueError, match="'old-1'"):
            ex.submit_task_if_waiting(task, TaskAction.FORWARD, c)
    assert raw_row(db, "old-1") == before
    assert approve(ex, "old-1", "manager")


def test_a_stored_number_out_of_json_s_range_is_refused_by_every_operation(
    db: sa.Engine,
) -> None:
    """``1e400`` is valid JSON text (every server accepts it) and reads as infinity: a
    withdraw wrote the row back as ``Infinity`` on SQLite — no JSON, unreadable by the Go
    plugin for good — and failed on the other servers. Every operation now refuses the row,
    naming the instance and the key, and writes nothing."""
    ex = executor(db, index=True)
    approve(ex, "inf-1", "employee", amount=1)
    _set_vars(db, "inf-1", '{"amount": 1, "big": 1e400}')
    before = raw_row(db, "inf-1")
    calls = (
        lambda: ex.withdraw("oa", ctx("inf-1", "employee")),
        lambda: ex.claim_task("oa", ctx("inf-1", "manager")),
        lambda: SqlStateRepository(db).restore_context("inf-1"),
    )
    for call in calls:
        with pytest.raises(SnapshotError, match=r"'big'.*'inf-1'"):
            call()
    assert raw_row(db, "inf-1") == before
    assert count_rows(db, "bpm_flow_task", "inf-1") == 1


def test_values_at_the_limits_round_trip_on_every_dialect(db: sa.Engine) -> None:
    """30 levels inside the vars object is the deepest MariaDB's JSON check accepts."""
    values = {
        "deep": _nested(30),
        "deep_date": _nested(29, date(2026, 1, 2)),
        "deep_escape": _nested(28, {"$ref": "x"}),
        "long": 10**4300 - 1,
        "text": "Grüße 👋 \u2028",
    }
    ex = executor(db)
    assert approve(ex, "edge-1", "employee", amount=1, **values)
    restored = SqlStateRepository(db).restore_context("edge-1")
    assert {k: restored.get(k) for k in values} == values


def test_configured_limits_apply_to_the_repository_and_the_history(db: sa.Engine) -> None:
    ex = _workflow(db, limits=CodecLimits(max_depth=3, max_bytes=2000))
    assert approve(ex, "lim-1", "employee", amount=1, items=[[1]])
    with pytest.raises(ContextValueError, match="'lim-1'"):
        approve(ex, "lim-1", "manager", items=[[[[1]]]])
    with pytest.raises(ContextValueError, match="'lim-1'"):
        approve(ex, "lim-1", "manager", note="x" * 3000)
    assert approve(ex, "lim-1", "manager")


# MariaDB's json_valid CHECK refuses documents deeper than 32 levels: only SQLite and
# PostgreSQL can hold such a row (written by another service or by hand).
@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize(
    "text",
    ['{"v": ' + "[" * 5000 + "]" * 5000 + "}", '{"v": ' + '{"a":' * 5000 + "1" + "}" * 5000 + "}"],
    ids=["lists", "objects"],
)
def test_stored_json_nested_too_deeply_raises_snapshot_error_naming_the_instance(
    db: sa.Engine, text: str
) -> None:
    ex = executor(db)
    approve(ex, "deep-1", "employee", amount=1)
    _set_vars(db, "deep-1", text)
    with pytest.raises(SnapshotError, match="'deep-1'"):
        ex.claim_task("oa", ctx("deep-1", "manager"))
    with pytest.raises(SnapshotError, match="'deep-1'"):
        SqlStateRepository(db).restore_context("deep-1")
    assert approve(ex, "deep-2", "employee", amount=1)  # other instances keep working


TYPED = {
    "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    "day": date(2026, 1, 2),
    "at": time(3, 4, 5),
    "price": Decimal("12.50"),
    "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
}
PLAIN = {
    "when": "2026-01-02T03:04:05+00:00",
    "day": "2026-01-02",
    "at": "03:04:05",
    "price": "12.50",
    "ref": "12345678-1234-5678-1234-567812345678",
}


def test_plain_json_stores_dates_and_decimals_as_strings_in_both_tables(db: sa.Engine) -> None:
    ex = _workflow(db, plain_json=True)
    assert approve(ex, "plain-1", "employee", amount=1, **TYPED)
    row = raw_row(db, "plain-1")
    assert row is not None
    assert {k: row["vars"][k] for k in PLAIN} == PLAIN  # what a Go condition sees
    restored = SqlStateRepository(db).restore_context("plain-1")
    assert {k: restored.get(k) for k in PLAIN} == PLAIN  # the trade-off: strings come back
    (entry,) = TaskHistoryRecorder(db).history("plain-1")
    assert {k: entry.variables[k] for k in PLAIN} == PLAIN
    with db.connect() as conn:
        variables = conn.execute(
            sa.select(sa.column("variables", sa.JSON)).select_from(sa.table("bpm_flow_task"))
        ).scalar_one()
    assert {k: variables[k] for k in PLAIN} == PLAIN


def test_switching_to_plain_json_reads_tagged_rows_then_rewrites_them_as_strings(
    db: sa.Engine,
) -> None:
    approve(executor(db), "mix-1", "employee", amount=1, **TYPED)
    plain_repo = SqlStateRepository(db, plain_json=True)
    restored = plain_repo.restore_context("mix-1")
    assert {k: restored.get(k) for k in TYPED} == TYPED
    assert approve(_workflow(db, plain_json=True), "mix-1", "manager")
    restored = plain_repo.restore_context("mix-1")
    assert {k: restored.get(k) for k in PLAIN} == PLAIN


@pytest.mark.parametrize("bad", [None, 5, b"x", ["a"]])
def test_reads_given_an_id_that_is_not_a_string_raise_typed_errors(db: sa.Engine, bad: Any) -> None:
    """As the executor's own reads do: never an AttributeError from deep inside a check."""
    from flow.workflow import InvalidInstanceIdError, InvalidQueryError

    ex = executor(db, index=True)
    repository = ex.state_repository
    assert isinstance(repository, SqlStateRepository)
    recorder = TaskHistoryRecorder(db)
    for read in (
        lambda: recorder.history(bad),
        lambda: repository.restore_context(bad),
        lambda: repository.states(bad),
        lambda: repository.load_snapshot(bad),
        lambda: ex.status(bad),
        lambda: ex.open_tasks(bad),
    ):
        with pytest.raises(InvalidInstanceIdError):
            read()
    with pytest.raises(InvalidQueryError, match="assignee must be a string"):
        recorder.by_assignee(bad)


class _BrokenStr:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


IDENTITIES_NOT_TEXT = [b"employee", ["employee"], {"name": "employee"}, True, 1.5, _BrokenStr()]


@pytest.mark.parametrize("step", ["claim", "submit_task_at"])
@pytest.mark.parametrize("key", ["actor", "auditor"])
@pytest.mark.parametrize("bad", [*IDENTITIES_NOT_TEXT, 10**5000], ids=lambda v: type(v).__name__)
def test_an_actor_or_auditor_that_is_not_text_is_refused_and_writes_no_row(
    db: sa.Engine, bad: Any, key: str, step: str
) -> None:
    """Stored as ``assignee``/``creator``/``updater`` text: a string or an integer only (an
    integer past Python's digit limit cannot be written as text at all)."""
    from flow.workflow import InvalidArgumentTypeError

    ex = executor(db, index=True)
    data = {"actor": "employee", "amount": 1, key: bad}
    c = FlowContext.of("who-1", data)
    error = ContextValueError if isinstance(bad, int) and not isinstance(bad, bool) else None
    with pytest.raises(error or InvalidArgumentTypeError, match=rf"^{key}\b.*'who-1'\)$"):
        if step == "claim":
            ex.claim_task("oa", c)
        else:
            ex.submit_task_at("oa", "apply", TaskAction.FORWARD, c)
    for table in ("bpm_flow_repository", "bpm_flow_task", "bpm_flow_todo"):
        assert count_rows(db, table) == 0, table
    assert approve(ex, "who-1", "employee", amount=1)


@pytest.mark.parametrize("bad", [b"clerk", 10**5000], ids=["bytes", "huge int"])
def test_an_auditor_that_is_not_text_leaves_an_existing_instance_as_it_was(
    db: sa.Engine, bad: Any
) -> None:
    ex = executor(db, index=True)
    approve(ex, "who-2", "employee", amount=1)
    task = ex.claim_task("oa", ctx("who-2", "manager"))
    before = every_row(db)
    with pytest.raises((ContextValueError, TypeError), match="'who-2'"):
        ex.submit_task_if_waiting(task, TaskAction.FORWARD, ctx("who-2", "manager", auditor=bad))
    assert every_row(db) == before
    assert approve(ex, "who-2", "manager")


def test_an_integer_actor_is_stored_as_its_digits(db: sa.Engine) -> None:
    ex = executor(db, index=True)
    c = FlowContext.of("who-3", {"actor": 42, "amount": 1})
    ex.submit_task_at("oa", "apply", TaskAction.FORWARD, c)
    (entry,) = TaskHistoryRecorder(db).history("who-3")
    assert (entry.assignee, entry.creator) == ("42", "42")


def test_an_auditor_hook_returning_an_integer_past_the_digit_limit_writes_no_row(
    db: sa.Engine,
) -> None:
    """A custom ``auditor=`` hook's integer is written as its digits — one with more than
    Python writes as text is refused with the codec's error, nothing stored."""
    ex = executor(db, index=True)
    ex.state_repository = SqlStateRepository(db, auditor=lambda c: 10**5000, index=True)
    with pytest.raises(ContextValueError, match=r"auditor.*'who-4'"):
        ex.claim_task("oa", ctx("who-4", "employee", amount=1))
    assert count_rows(db, "bpm_flow_repository") == 0
