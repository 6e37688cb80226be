"""start / claim / submit / history / instances / render --instance against a real database,
and the one-line errors a user gets when something is wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_support import REPO, Flow, single_error_line

OA = str(REPO / "examples" / "oa.yml")


def start(flow: Flow, db: str, instance: str, amount: int) -> None:
    result = flow(
        "start",
        OA,
        "--instance",
        instance,
        "--var",
        f"amount={amount}",
        "--actor",
        "employee",
        "--db",
        db,
    )
    assert result.code == 0, result.err
    assert f"started {instance} (graph 'oa')" in result.out
    assert "waiting on: apply (Apply, for employee)" in result.out


def test_a_large_amount_goes_to_the_director_and_is_recorded(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "exp-1", 9000)
    submitted = flow("submit", "exp-1", "apply", "forward", "-m", "new monitor", "--db", migrated)
    assert submitted.code == 0, submitted.err
    assert "exp-1 now: director (Director approval, for director)" in submitted.out
    claimed = flow("claim", "exp-1", "--actor", "director", "--db", migrated)
    assert claimed.code == 0, claimed.err
    assert "claimed director (Director approval) of exp-1" in claimed.out
    approved = flow(
        "submit",
        "exp-1",
        "director",
        "FORWARD",
        "--actor",
        "director",
        "-m",
        "ok",
        "--db",
        migrated,
    )
    assert approved.code == 0, approved.err
    assert "exp-1 now: finished" in approved.out
    history = flow("history", "exp-1", "--db", migrated)
    assert history.code == 0, history.err
    rows = history.out.strip().splitlines()[2:]
    assert len(rows) == 2
    assert re.search(r"^1 .* apply +completed +employee +director +new monitor$", rows[0])
    assert re.search(r"^2 .* director +completed +director +end +ok$", rows[1])


def test_instances_lists_where_each_instance_stands(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "small-1", 100)
    start(flow, migrated, "small-2", 200)
    flow("submit", "small-2", "apply", "forward", "--db", migrated)
    flow("submit", "small-2", "manager", "terminate", "-m", "no", "--db", migrated)
    listed = flow("instances", "--db", migrated)
    assert listed.code == 0, listed.err
    lines = {line.split()[0]: line for line in listed.out.splitlines()[2:]}
    assert "apply (Apply, for employee)" in lines["small-1"]
    assert "terminated at manager" in lines["small-2"]


def test_send_back_returns_the_task_to_the_employee(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "back-1", 300)
    flow("submit", "back-1", "apply", "forward", "--db", migrated)
    back = flow("submit", "back-1", "manager", "back", "-m", "receipt?", "--db", migrated)
    assert back.code == 0, back.err
    assert "back-1 now: apply (Apply, for employee)" in back.out


def test_render_instance_colours_the_waiting_task(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "pic-1", 300)
    flow("submit", "pic-1", "apply", "forward", "--db", migrated)
    result = flow("render", "--instance", "pic-1", "--db", migrated)
    assert result.code == 0, result.err
    assert "class n_manager waiting" in result.out
    assert "class n_apply,n_amount completed" in result.out
    assert 'subgraph legend["instance pic-1"]' in result.out
    assert 'n_manager["Manager approval (for manager)"]' in result.out
    assert "    linkStyle 0,1,3 stroke:#2f855a" in result.out  # start-apply-amount-manager


def test_render_instance_never_writes_over_its_sqlite_database(flow: Flow, tmp_path: Path) -> None:
    """``-o`` naming the SQLite file the instance is read from replaced the database."""
    url = f"sqlite:///{tmp_path / 'app.sqlite'}"
    assert flow("migrate", "--db", url).code == 0
    start(flow, url, "pic-2", 300)
    before = (tmp_path / "app.sqlite").read_bytes()
    result = flow(
        "render", "--instance", "pic-2", "--db", url, "-o", "app.sqlite", "--format", "dot"
    )
    assert single_error_line(result).endswith(
        "-o app.sqlite: that is the database; give another file"
    )
    assert (tmp_path / "app.sqlite").read_bytes() == before


def test_submit_by_the_wrong_actor_is_refused_in_one_line(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "who-1", 300)
    result = flow("submit", "who-1", "apply", "forward", "--actor", "manager", "--db", migrated)
    line = single_error_line(result)
    assert "not a waiting task for actor 'manager'" in line
    assert "apply (Apply, for employee)" in line


def test_unknown_instance_is_one_line(flow: Flow, migrated: str) -> None:
    for command in (("history", "nope"), ("claim", "nope"), ("submit", "nope", "a", "forward")):
        line = single_error_line(flow(*command, "--db", migrated))
        assert "no instance 'nope'" in line


def test_unknown_node_is_one_line(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "node-1", 300)
    line = single_error_line(flow("submit", "node-1", "boss", "forward", "--db", migrated))
    assert "Node not found: 'boss' in graph 'oa'" in line


def test_starting_an_existing_instance_is_refused(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "twice", 300)
    result = flow("start", OA, "--instance", "twice", "--db", migrated)
    assert "instance 'twice' already exists" in single_error_line(result)


def test_bad_action_lists_the_valid_ones(flow: Flow) -> None:
    result = flow("submit", "x", "apply", "approve")
    assert result.code == 2
    line = single_error_line(result)
    assert "invalid action 'approve'" in line
    assert "forward, forward_jump, terminate, restart" in line


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql+pymysql://nobody@127.0.0.1:1/x", "cannot connect to "),
        # PyMySQL fails on an unknown charset with an AttributeError, before any DBAPI error.
        ("mysql+pymysql://nobody@127.0.0.1:1/x?charset=bogus", "cannot connect to "),
        ("sqlite:////nonexistent/directory/flow.sqlite", "no database at "),
    ],
)
def test_unreachable_database_is_one_line(flow: Flow, url: str, says: str) -> None:
    line = single_error_line(flow("instances", "--db", url))
    assert line.startswith(f"flow: error: {says}")


def test_a_read_of_a_sqlite_file_that_does_not_exist_creates_no_file(
    flow: Flow, tmp_path: Path
) -> None:
    missing = tmp_path / "typo.sqlite"
    for command in (("instances",), ("inbox", "--actor", "a"), ("history", "x")):
        line = single_error_line(flow(*command, "--db", f"sqlite:///{missing}"))
        assert f"no database at {missing}" in line and "flow migrate" in line
    assert not missing.exists()


def test_the_advised_migrate_creates_a_missing_directory_too(flow: Flow, tmp_path: Path) -> None:
    """The read's error says "create it with 'flow migrate --db URL'": that command (and
    ``flow demo --db URL``) creates the file's directory, as ``alembic upgrade`` does."""
    url = f"sqlite:///{tmp_path / 'new' / 'dir' / 'flow.sqlite'}"
    advice = single_error_line(flow("instances", "--db", url))
    assert f"'flow migrate --db {url}'" in advice
    assert flow("migrate", "--db", url).code == 0
    assert flow("instances", "--db", url).code == 0
    demo_url = f"sqlite:///{tmp_path / 'demo' / 'flow.sqlite'}"
    assert flow("demo", "--db", demo_url).code == 0


def test_a_database_without_tables_says_how_to_create_them(flow: Flow, db_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    engine.connect().close()  # an empty SQLite file exists
    engine.dispose()
    line = single_error_line(flow("history", "x", "--db", db_url))
    assert "has no flow tables yet" in line and "flow migrate" in line


def test_no_demo_database_yet_says_to_run_the_demo(flow: Flow) -> None:
    line = single_error_line(flow("instances"))
    assert "run 'flow demo' first" in line


def test_bad_var_is_a_usage_error(flow: Flow, migrated: str) -> None:
    result = flow("start", OA, "--var", "amount", "--db", migrated)
    assert result.code == 2
    assert "--var wants KEY=VALUE" in single_error_line(result)


def test_a_var_nested_too_deeply_is_a_usage_error_naming_it(flow: Flow, tmp_path: Path) -> None:
    """JSON deeper than the decoder's recursion limit ended in the generic "RecursionError"
    line (exit 1); it is bad input, refused before the database is opened."""
    db = tmp_path / "untouched.sqlite"
    # 5,000 levels: past the decoder's recursion limit up to Python 3.12, not on 3.13; 31 past
    # what a variable may hold (CodecLimits.max_depth) on every version.
    for depth in (5000, 31):
        deep = "[" * depth + "]" * depth
        result = flow("start", OA, "--var", f"amount={deep}", "--db", f"sqlite:///{db}")
        assert result.code == 2, result.err
        line = single_error_line(result)
        assert "--var 'amount': the JSON value is nested too deeply" in line
        assert "RecursionError" not in line
        assert not db.exists()


@pytest.mark.parametrize("raw", ["1e400", "[1, -1e999]", '{"a": 1e309}'])
def test_a_var_number_beyond_json_is_a_usage_error_naming_it(
    flow: Flow, tmp_path: Path, raw: str
) -> None:
    """``1e400`` is JSON syntax that reads as infinity, which no JSON can store: the start
    failed after opening the database, exit 1, with the storage error's words."""
    db = tmp_path / "untouched.sqlite"
    result = flow("start", OA, "--var", f"amount={raw}", "--db", f"sqlite:///{db}")
    assert result.code == 2, result.err
    assert f"--var 'amount': {raw} is beyond JSON's numbers" in single_error_line(result)
    assert not db.exists()


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity"])
def test_a_var_spelled_like_a_python_float_constant_is_text(
    flow: Flow, migrated: str, raw: str
) -> None:
    """Python's JSON reads ``NaN`` and ``Infinity``; JSON has neither: the value is the text,
    as any other value that is no JSON (the start failed when it stored the float)."""
    start_with_note = ["start", OA, "--instance", "c-1", "--var", f"note={raw}"]
    result = flow(*start_with_note, "--actor", "employee", "--db", migrated)
    assert result.code == 0, result.err
    assert "started c-1" in result.out


def test_debug_shows_the_traceback(flow: Flow) -> None:
    result = flow("--debug", "instances", "--db", "sqlite:////nonexistent/directory/x.sqlite")
    assert result.code != 0
    assert "Traceback" in result.err


def test_an_argument_spelled_debug_after_double_dash_shows_no_traceback(flow: Flow) -> None:
    """After ``--`` every word is an argument: an instance named ``--debug`` is looked up,
    and its error is the one line, not a traceback (the whole command line was searched)."""
    result = flow("history", "--db", "sqlite:////nonexistent/directory/x.sqlite", "--", "--debug")
    line = single_error_line(result)
    assert result.code == 1
    assert "no database at /nonexistent/directory/x.sqlite" in line


def test_start_without_actor_claims_the_first_task_as_the_actor_it_names(
    flow: Flow, migrated: str
) -> None:
    result = flow("start", OA, "--instance", "no-actor", "--var", "amount=5", "--db", migrated)
    assert result.code == 0 and "waiting on: apply (Apply, for employee)" in result.out
    inbox = flow("inbox", "--actor", "employee", "--db", migrated)
    assert "no-actor" in inbox.out and "waiting" in inbox.out


def test_start_as_someone_the_first_task_is_not_for_stores_nothing(
    flow: Flow, migrated: str
) -> None:
    result = flow(
        "start", OA, "--instance", "wrong", "--var", "amount=5", "--actor", "manager",
        "--db", migrated,
    )  # fmt: skip
    line = single_error_line(result)
    assert "'wrong' not started" in line and "actor 'manager'" in line
    assert "nothing was stored" in line
    assert "no instance 'wrong'" in single_error_line(flow("history", "wrong", "--db", migrated))


def test_one_line_results_escape_control_characters(flow: Flow, migrated: str) -> None:
    instance = "esc\x1b[31mred\tx"
    started = flow("start", OA, "--instance", instance, "--var", "amount=5", "--db", migrated)
    assert started.code == 0, started.err
    assert "\x1b" not in started.out and "started esc\\x1b[31mred\\tx" in started.out
    claimed = flow("claim", instance, "--actor", "employee", "--db", migrated)
    submitted = flow("submit", instance, "apply", "forward", "--db", migrated)
    for result in (claimed, submitted):
        assert result.code == 0, result.err
        assert "\x1b" not in result.out and "\t" not in result.out


def test_ids_are_shown_whole_and_escaped_in_every_message(flow: Flow, migrated: str) -> None:
    """``flow history`` of an instance with nothing submitted printed its id raw (an ESC
    reached the terminal); withdraw and send-back folded whitespace ("tab<TAB>here" read
    "tab here", another id), and so did every error line ("two  spaces")."""
    esc, tab, spaced = "ev\x1b[31mil", "tab\there", "two  spaces"
    for instance in (esc, tab, spaced):
        start_args = ("start", OA, "--instance", instance, "--var", "amount=10")
        started = flow(*start_args, "--actor", "employee", "--db", migrated)
        assert started.code == 0, started.err
    history = flow("history", esc, "--db", migrated)
    assert history.out == "ev\\x1b[31mil: no task submitted yet\n", history.out

    assert flow("submit", tab, "apply", "forward", "--db", migrated).code == 0
    sent = flow("send-back", tab, "manager", "--db", migrated)
    assert sent.code == 0, sent.err
    assert sent.out.splitlines() == [
        "sent manager (Manager approval) of tab\\there back as manager",
        "tab\\there now waits on: apply (Apply)",
    ]
    withdrawn = flow("withdraw", tab, "--actor", "employee", "--db", migrated)
    assert withdrawn.code == 0, withdrawn.err
    assert withdrawn.out == "withdrew tab\\there by employee; terminated: apply\n"

    unclaimed = flow("claim", spaced, "--actor", "director", "--db", migrated)
    assert "no task of 'two  spaces' for actor 'director'" in single_error_line(unclaimed)
    unknown = flow("history", "no  such\tid", "--db", migrated)
    assert "no instance 'no  such\\tid'" in single_error_line(unknown)


def hand_edit(db: str, instance: str, column: str, value: object) -> None:
    """Set one column of an instance row as another program (or a hand edit) might."""
    engine = sa.create_engine(db)
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE bpm_flow_repository SET {column} = :v WHERE instant_id = :i"),
            {"v": value, "i": instance},
        )
    engine.dispose()


def _listed(flow: Flow, db: str) -> dict[str, str]:
    """``flow instances``: each instance's line by its id (no Python error named anywhere)."""
    result = flow("instances", "--db", db)
    assert result.code == 0, result.err
    assert "Error" not in result.out + result.err
    return {line.split()[0]: line for line in result.out.splitlines()[2:]}


_COLUMNS = ("states", "graph", "vars")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_row_that_is_not_json_is_listed_as_unreadable_and_hides_no_other(
    flow: Flow, migrated: str
) -> None:
    """One row per JSON column holding text that is no JSON, beside a good one."""
    start(flow, migrated, "good-1", 300)
    for column in _COLUMNS:
        start(flow, migrated, f"bad-{column}", 300)
        hand_edit(migrated, f"bad-{column}", column, "{nope")
    lines = _listed(flow, migrated)
    assert "apply (Apply, for employee)" in lines["good-1"]
    assert [column for column in _COLUMNS if "unreadable" not in lines[f"bad-{column}"]] == []


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_a_row_nested_deeper_than_the_decoder_goes_is_unreadable_and_hides_no_other(
    flow: Flow, migrated: str
) -> None:
    """Written by another program (SQLite and PostgreSQL keep it): a bare RecursionError once
    failed the whole listing for a deep ``graph``. One row per JSON column."""
    start(flow, migrated, "good-1", 300)
    for column in _COLUMNS:
        start(flow, migrated, f"deep-{column}", 300)
        hand_edit(migrated, f"deep-{column}", column, '{"a":' * 5000 + "{}" + "}" * 5000)
    lines = _listed(flow, migrated)
    assert "apply (Apply, for employee)" in lines["good-1"]
    assert [column for column in _COLUMNS if "unreadable" not in lines[f"deep-{column}"]] == []


#: Rows of the wrong shape: (column, value, what the listing says of it).
_WRONG_SHAPES = {
    "odd-vars": ("vars", "[1]", "Stored vars must be a JSON object, got list"),
    "odd-states": ("states", "[]", "Stored states must be a JSON object, got list"),
    "odd-code": (
        "states",
        '{"oa:apply": "done"}',
        "Stored state 'oa:apply' must be an integer code",
    ),
}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_row_of_the_wrong_shape_is_unreadable_saying_what_it_holds(
    flow: Flow, migrated: str
) -> None:
    """As the library's own reads say it, not Python's ``'list' object has no attribute``."""
    for instance, (column, value, _) in _WRONG_SHAPES.items():
        start(flow, migrated, instance, 300)
        hand_edit(migrated, instance, column, value)
    lines = _listed(flow, migrated)
    for instance, (_, _, said) in _WRONG_SHAPES.items():
        assert f"unreadable: {said}" in lines[instance], instance


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_row_whose_time_is_no_time_is_named_so_by_the_commands_reading_it(
    flow: Flow, migrated: str
) -> None:
    """Not "the stored row is not valid JSON": the JSON columns are fine. Text, and dates
    out of range in two ways, each in its own row."""
    values = {"bad-1": "garbage", "bad-2": "2024-13-45 00:00:00", "bad-3": "2024-02-30 10:00:00"}
    for instance, value in values.items():
        start(flow, migrated, instance, 300)
        hand_edit(migrated, instance, "update_time", value)
    for instance, value in values.items():
        for command in (["history", instance], ["withdraw", instance, "--actor", "employee"]):
            result = flow(*command, "--db", migrated)
            assert result.code == 1, result.err
            line = single_error_line(result)
            assert f"bpm_flow_repository.update_time holds '{value}', which is not a time" in line
            assert f"instance '{instance}'" in line and "JSON" not in line, command


def test_an_update_time_that_is_no_time_is_shown_as_such_and_hides_no_other(
    flow: Flow, migrated: str
) -> None:
    """The listing reads the times as text row by row: SQLite keeps any text in the column
    (a hand edit), and one such row must not fail the whole listing with a ValueError."""
    import re

    import sqlalchemy as sa

    start(flow, migrated, "good-1", 300)
    start(flow, migrated, "bad-1", 300)
    start(flow, migrated, "num-1", 300)
    engine = sa.create_engine(migrated)
    if engine.dialect.name == "sqlite":
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE bpm_flow_repository SET update_time = 'garbage' "
                    "WHERE instant_id = 'bad-1'"
                )
            )
            conn.execute(
                sa.text(
                    "UPDATE bpm_flow_repository SET update_time = 20240101 "
                    "WHERE instant_id = 'num-1'"
                )
            )
    engine.dispose()
    result = flow("instances", "--db", migrated)
    assert result.code == 0, result.err
    lines = {line.split()[0]: line for line in result.out.splitlines()[2:]}
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", lines["good-1"])
    if migrated.startswith("sqlite"):
        assert lines["bad-1"].endswith("not a time: 'garbage'")
        assert lines["num-1"].endswith("not a time: '20240101'")


@pytest.mark.parametrize(("table", "variable"), [("bpm_flow_task", "FLOW_TASK_TABLE")])
def test_a_migrated_database_whose_history_table_is_gone_is_one_clear_line(
    flow: Flow, migrated: str, table: str, variable: str
) -> None:
    """A table dropped by hand (or a mistyped name) is named, with what to check — by 'flow
    migrate' too, which does not recreate it (the database is at the newest revision)."""
    assert flow("start", OA, "--instance", "t-1", "--actor", "employee", "--db", migrated).code == 0
    engine = sa.create_engine(migrated)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE {table}")
    engine.dispose()
    for command in (("history", "t-1"), ("submit", "t-1", "apply", "forward"), ("migrate",)):
        line = single_error_line(flow(*command, "--db", migrated))
        assert f"history table {table!r} does not exist" in line
        assert variable in line


@pytest.mark.parametrize("key", ["password", "passwd", "PWD"])
def test_a_password_given_as_a_query_parameter_is_never_printed(flow: Flow, key: str) -> None:
    url = f"mysql+pymysql://nobody@127.0.0.1:1/x?{key}=s3cret-word"
    line = single_error_line(flow("instances", "--db", url))
    assert line.startswith("flow: error: cannot connect to ")
    assert "s3cret-word" not in line and f"{key}=" in line


@pytest.mark.parametrize(
    "url",
    [
        "mysql+pymysql://nobody:s3cret-word@127.0.0.1:abc/x",  # a port that is no number
        "mysql+pymysql://nobody:s3cret-word@[::1/x",  # an IPv6 host left open
        "mysql+pymysql://nobody:s3cret/word@127.0.0.1:abc/x",  # a '/' in the password
        "mysql+pymysql://nobody@127.0.0.1:abc/x?ssl=1&passwd=s3cret-word",
    ],
)
def test_a_password_in_a_url_that_does_not_parse_is_never_printed(flow: Flow, url: str) -> None:
    """A URL SQLAlchemy cannot parse is echoed in the error, and its password hidden too."""
    line = single_error_line(flow("instances", "--db", url))
    assert line.startswith("flow: error: bad database URL ")
    assert "s3cret" not in line and "***" in line
    assert "nobody" in line  # the user is still named: the error says which URL
