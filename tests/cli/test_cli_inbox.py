"""inbox / instances --status / withdraw / send-back / reindex against a real database: what
the task index answers, paging, the refusals (one line, nothing written) and reindexing rows
written without the index, in batches, resumably, with progress only on a terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_support import REPO, Flow, flow_script, single_error_line

from flow import FlowContext, FlowEngine, Graph
from flow.workflow import ActorStateController, TaskAction
from flow_sqla import migrations, sql_workflow

OA = str(REPO / "examples" / "oa.yml")


def start(flow: Flow, db: str, instance: str, amount: int, *, forward: bool = True) -> None:
    args = ("start", OA, "--instance", instance, "--var", f"amount={amount}")
    result = flow(*args, "--actor", "employee", "--db", db)
    assert result.code == 0, result.err
    if forward:
        done = flow("submit", instance, "apply", "forward", "-m", "please", "--db", db)
        assert done.code == 0, done.err


def table(out: str) -> list[list[str]]:
    """The rows of a printed table (cells split on two or more spaces)."""
    lines = out.strip().splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines[2:] if not line.startswith("more")]


def history_count(flow: Flow, db: str, instance: str) -> int:
    result = flow("history", instance, "--db", db)
    assert result.code == 0, result.err
    return len(result.out.strip().splitlines()) - 2


def test_inbox_lists_what_waits_for_an_actor_and_pages(flow: Flow, migrated: str) -> None:
    for i in range(3):
        start(flow, migrated, f"small-{i}", 100 + i)
    start(flow, migrated, "large", 9000)
    start(flow, migrated, "draft", 50, forward=False)

    page = flow("inbox", "--actor", "manager", "--limit", "2", "--db", migrated)
    assert page.code == 0, page.err
    rows = table(page.out)
    assert [r[0] for r in rows] == ["small-0", "small-1"]
    assert rows[0][1:6] == ["oa", "manager (Manager approval)", "ready", "actor:manager", "apply"]
    cursor = page.out.strip().splitlines()[-1].removeprefix("more: add --after ")
    rest = flow("inbox", "--actor", "manager", "--after", cursor, "--db", migrated)
    assert [r[0] for r in table(rest.out)] == ["small-2"]
    assert "more:" not in rest.out

    director = flow("inbox", "--actor", "director", "--db", migrated)
    assert [r[0] for r in table(director.out)] == ["large"]
    employee = flow("inbox", "--actor", "employee", "--db", migrated)
    assert [(r[0], r[5]) for r in table(employee.out)] == [("draft", "-")]
    nobody = flow("inbox", "--actor", "auditor", "--db", migrated)
    assert nobody.out.strip() == "no open task for actor 'auditor'"


def test_a_claimed_task_reads_waiting(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "c-1", 100)
    assert flow("claim", "c-1", "--actor", "manager", "--db", migrated).code == 0
    rows = table(flow("inbox", "--actor", "manager", "--db", migrated).out)
    assert rows[0][3] == "waiting"


def test_inbox_usage_errors(flow: Flow, migrated: str) -> None:
    missing = flow("inbox", "--db", migrated)
    assert missing.code == 2
    assert "give --actor A and/or --role R" in single_error_line(missing)
    bad = flow("inbox", "--actor", "x", "--after", "-1", "--db", migrated)
    assert bad.code == 2
    assert "expected a cursor" in single_error_line(bad)
    for command in (["inbox", "--actor", "x"], ["instances", "--status", "running"]):
        huge = flow(*command, "--after", str(10**23), "--db", migrated)
        assert huge.code == 2 and "expected a cursor" in single_error_line(huge)
        many = flow(*command, "--limit", str(10**23), "--db", migrated)
        assert many.code == 2 and "expected at most 10000" in single_error_line(many)


def test_a_blank_actor_or_role_is_a_usage_error_for_every_command(
    flow: Flow, tmp_path: Path
) -> None:
    """``--actor ""`` meant the node's own actor to submit and send-back, and was refused by
    inbox: it is a usage error everywhere now, before the database is opened."""
    db = tmp_path / "untouched.sqlite"
    url = f"sqlite:///{db}"
    commands = [
        ["inbox"],
        ["claim", "b-1"],
        ["submit", "b-1", "manager", "forward"],
        ["send-back", "b-1", "manager"],
        ["withdraw", "b-1"],
        ["start", OA, "--instance", "b-2"],
    ]
    for command, blank in zip(commands, ["", "  "] * 3, strict=True):
        result = flow(*command, "--actor", blank, "--db", url)
        assert result.code == 2, (command, result.err)
        assert "argument --actor: must not be empty" in single_error_line(result)
    role = flow("inbox", "--role", "", "--db", url)
    assert role.code == 2 and "argument --role: must not be empty" in single_error_line(role)
    assert not db.exists()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_blank_graph_db_instance_out_or_output_is_a_usage_error_for_every_command(
    flow: Flow, migrated: str, tmp_path: Path
) -> None:
    """``--graph ""`` made claim, submit, withdraw and send-back go ahead with the stored graph
    (start and reindex refused it), ``--db ""`` meant the default database, ``start --instance
    ""`` a random id, ``demo --out ""`` the current directory, and ``render -o ""`` failed
    with "cannot write .: Is a directory". A blank value given explicitly is a usage error
    now, before anything is opened or written."""
    start(flow, migrated, "b-1", 100)
    before = history_count(flow, migrated, "b-1")
    db = ("--db", migrated)
    commands = [
        ["claim", "b-1", "--actor", "manager", "--graph", "", *db],
        ["submit", "b-1", "manager", "forward", "--graph", " ", *db],
        ["withdraw", "b-1", "--actor", "employee", "--graph", "", *db],
        ["send-back", "b-1", "manager", "--graph", "", *db],
        ["reindex", "--graph", "", *db],
        ["inbox", "--actor", "manager", "--graph", "", *db],
        ["instances", "--graph", "", *db],
        ["instances", "--creator", "", *db],
        ["start", OA, "--instance", "", "--var", "amount=5", *db],
        ["render", "--instance", "", *db],
        ["submit", "b-1", "manager", "forward", "--db", ""],
        ["instances", "--db", ""],
        ["migrate", "--db", " "],
        ["demo", "--db", ""],
        ["demo", "--out", "", *db],
        ["render", OA, "-o", ""],
        ["render", OA, "--output", " "],
    ]
    for command in commands:
        result = flow(*command)
        assert result.code == 2, (command, result.err)
        option = command[[arg.strip() for arg in command].index("") - 1]
        named, _, reason = single_error_line(result).partition("argument ")[2].partition(": ")
        # argparse names an option with a short alias as "-o/--output"
        assert option in named.split("/") and reason.startswith("must not be empty"), command
    assert history_count(flow, migrated, "b-1") == before
    assert [row[0] for row in table(flow("instances", "--db", migrated).out)] == ["b-1"]
    assert not (tmp_path / "flow-demo").exists()


def test_python_dash_m_flow_cli_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flow_cli", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: flow ")


def test_inbox_by_role_and_graph(flow: Flow, migrated: str) -> None:
    """Candidates an app's controller stored (actor and role) meet --actor/--role."""
    graph = Graph.from_text(
        "id: pay\nlayout:\n"
        "  - {id: s, type: start, link: check}\n"
        "  - {id: check, title: Check, meta: {role: finance}, link: e}\n"
        "  - {id: e, type: end}\n"
    )
    wf = sql_workflow(
        migrated, FlowEngine(), state_controller=ActorStateController("actor", "role")
    )
    try:
        ctx = FlowContext.of("pay-1", {"role": "finance"})
        assert wf.claim_task(graph, ctx) is not None
    finally:
        wf.state_repository.engine.dispose()  # type: ignore[attr-defined]
    start(flow, migrated, "oa-1", 100)
    both = flow("inbox", "--actor", "manager", "--role", "finance", "--db", migrated)
    assert [(r[0], r[4]) for r in table(both.out)] == [
        ("pay-1", "role:finance"),
        ("oa-1", "actor:manager"),
    ]
    only = flow("inbox", "--role", "finance", "--graph", "pay", "--db", migrated)
    assert [r[0] for r in table(only.out)] == ["pay-1"]


def test_instances_by_status(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "run-1", 100)
    start(flow, migrated, "done-1", 100)
    flow("submit", "done-1", "manager", "forward", "--db", migrated)
    start(flow, migrated, "gone-1", 100)
    assert flow("withdraw", "gone-1", "--actor", "employee", "--db", migrated).code == 0

    running = table(flow("instances", "--status", "running", "--db", migrated).out)
    assert [(r[0], r[2], r[3], r[6]) for r in running] == [
        ("run-1", "running", "employee", "manager (Manager approval)")
    ]
    completed = table(flow("instances", "--status", "COMPLETED", "--db", migrated).out)
    assert [(r[0], r[6]) for r in completed] == [("done-1", "-")]
    withdrawn = table(flow("instances", "--status", "withdrawn", "--db", migrated).out)
    assert [r[0] for r in withdrawn] == ["gone-1"]
    newest = flow("instances", "--creator", "employee", "--limit", "2", "--db", migrated)
    assert [r[0] for r in table(newest.out)] == ["gone-1", "done-1"]
    cursor = newest.out.strip().splitlines()[-1].removeprefix("more: add --after ")
    older = flow("instances", "--creator", "employee", "--after", cursor, "--db", migrated)
    assert [r[0] for r in table(older.out)] == ["run-1"]
    plain = flow("instances", "--db", migrated)
    assert "withdrawn" in next(line for line in plain.out.splitlines() if "gone-1" in line)
    none = flow("instances", "--status", "terminated", "--graph", "oa", "--db", migrated)
    assert none.out.strip() == "no terminated instance of graph 'oa'"


def test_withdraw_closes_every_open_task_once(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "w-1", 100)
    done = flow("withdraw", "w-1", "--actor", "employee", "-m", "not needed", "--db", migrated)
    assert done.code == 0, done.err
    assert done.out.strip() == "withdrew w-1 by employee; terminated: manager"
    assert flow("inbox", "--actor", "manager", "--db", migrated).out.startswith("no open task")
    history = flow("history", "w-1", "--db", migrated).out.strip().splitlines()
    assert re.search(r"manager +terminated +employee +manager +not needed$", history[-1])

    again = flow("withdraw", "w-1", "--db", migrated)
    assert "instance 'w-1' is not running (WITHDRAWN)" in single_error_line(again)
    assert history_count(flow, migrated, "w-1") == 2
    refused = flow("submit", "w-1", "manager", "forward", "--db", migrated)
    assert refused.code == 1
    assert "the instance stands at: withdrawn" in single_error_line(refused)
    claim = flow("claim", "w-1", "--actor", "manager", "--db", migrated)
    assert "it stands at: withdrawn (only a restart changes it)" in single_error_line(claim)
    unknown = flow("withdraw", "nope", "--db", migrated)
    assert "no instance 'nope'" in single_error_line(unknown)


def test_send_back_returns_to_the_task_that_sent_it(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "b-1", 9000)
    back = flow("send-back", "b-1", "director", "-m", "invoice?", "--db", migrated)
    assert back.code == 0, back.err
    assert back.out.splitlines() == [
        "sent director (Director approval) of b-1 back as director",
        "b-1 now waits on: apply (Apply)",
    ]
    rows = table(flow("inbox", "--actor", "employee", "--db", migrated).out)
    assert [(r[0], r[3]) for r in rows] == [("b-1", "waiting")]
    history = flow("history", "b-1", "--db", migrated).out.strip().splitlines()
    assert re.search(r"director +sent back +director +apply +invoice\?$", history[-1])


def test_send_back_refusals_write_nothing(flow: Flow, migrated: str) -> None:
    start(flow, migrated, "r-1", 100)
    wrong = flow("send-back", "r-1", "manager", "--actor", "director", "--db", migrated)
    assert "not a waiting task for actor 'director'" in single_error_line(wrong)
    back = flow("send-back", "r-1", "manager", "--db", migrated)
    assert back.code == 0, back.err
    first = flow("send-back", "r-1", "apply", "--db", migrated)
    line = single_error_line(first)
    assert "Cannot send back task oa:apply of instance 'r-1'" in line
    assert "first task" in line
    assert history_count(flow, migrated, "r-1") == 2
    unknown_node = flow("send-back", "r-1", "boss", "--db", migrated)
    assert "Node not found: 'boss'" in single_error_line(unknown_node)


def _unindexed(db: str, *ids: str) -> None:
    """Instances written as the Go plugin (or index=False) writes them: no status."""
    wf = sql_workflow(db, FlowEngine(), state_controller=ActorStateController(), index=False)
    graph = Graph.from_file(OA)
    try:
        for instance_id in ids:
            ctx = FlowContext.of(instance_id, {"amount": 100, "actor": "employee"})
            task = wf.claim_task(graph, ctx)
            wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)
    finally:
        wf.state_repository.engine.dispose()  # type: ignore[attr-defined]


def _store_graph_as_id(db: str, instance_id: str) -> None:
    engine = sa.create_engine(db)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE bpm_flow_repository SET graph = :g WHERE instant_id = :i"),
                {"g": '"oa"', "i": instance_id},
            )
    finally:
        engine.dispose()


def test_withdraw_of_an_instance_not_yet_reindexed_reports_what_it_closed(
    flow: Flow, migrated: str
) -> None:
    _unindexed(migrated, "u-1", "u-2")
    done = flow("withdraw", "u-1", "--actor", "employee", "--graph", OA, "--db", migrated)
    assert done.code == 0, done.err
    assert done.out.strip() == "withdrew u-1 by employee; terminated: manager"
    wf = sql_workflow(migrated, FlowEngine(), state_controller=ActorStateController())
    try:
        ctx = FlowContext.of("u-2", {"actor": "manager"})
        wf.submit_task_if_waiting(wf.claim_task(Graph.from_file(OA), ctx), TaskAction.FORWARD, ctx)
        sql = "UPDATE bpm_flow_repository SET status = NULL WHERE instant_id = 'u-2'"
        with wf.state_repository.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(sa.text(sql))
    finally:
        wf.state_repository.engine.dispose()  # type: ignore[attr-defined]
    finished = flow("withdraw", "u-2", "--graph", OA, "--db", migrated)
    assert "instance 'u-2' is not running (finished)" in single_error_line(finished)


def test_reindex_in_batches_resumes_after_a_missing_graph(flow: Flow, migrated: str) -> None:
    _unindexed(migrated, "go-1", "go-2", "go-3", "go-4")
    _store_graph_as_id(migrated, "go-3")
    before = flow("inbox", "--actor", "manager", "--db", migrated)
    assert before.out.startswith("no open task")
    assert "some instances have no index yet" in before.err and "flow reindex" in before.err

    failed = flow("reindex", "--batch", "2", "--db", migrated)
    line = single_error_line(failed)
    assert "go-3" in line and "--graph" in line and "2 instances indexed before it" in line
    assert [r[0] for r in table(flow("inbox", "--actor", "manager", "--db", migrated).out)] == [
        "go-1",
        "go-2",
    ]
    resumed = flow("reindex", "--batch", "2", "--graph", OA, "--db", migrated)
    assert resumed.code == 0, resumed.err
    assert resumed.out == "indexed 2 instance(s) of 2 row(s) in " + _shown(migrated) + "\n"
    assert "\r" not in resumed.out  # no progress when stdout is not a terminal
    after = flow("inbox", "--actor", "manager", "--db", migrated)
    assert [r[0] for r in table(after.out)] == ["go-1", "go-2", "go-3", "go-4"]
    assert after.err == ""
    nothing = flow("reindex", "--db", migrated)
    assert nothing.out.startswith("indexed 0 instance(s) of 0 row(s)")
    everything = flow("reindex", "--all", "--graph", OA, "--db", migrated)
    assert everything.out.startswith("indexed 4 instance(s) of 4 row(s)")


def _hand_edit_states(url: str, instance_id: str) -> None:
    """Give the row states that are not JSON (SQLite stores them)."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE bpm_flow_repository SET states = '{\"oa:' WHERE instant_id = :i"),
                {"i": instance_id},
            )
    finally:
        engine.dispose()


def test_reindex_names_a_malformed_row_and_skips_it_when_asked(flow: Flow, migrated: str) -> None:
    if not migrated.startswith("sqlite"):
        pytest.skip("only SQLite stores text that is not JSON in a JSON column")
    _unindexed(migrated, "m-1", "m-2", "m-3")
    _hand_edit_states(migrated, "m-2")
    failed = flow("reindex", "--db", migrated)
    assert failed.code == 1
    line = single_error_line(failed)
    assert "'m-2'" in line and "not JSON" in line and "; give --skip-bad to go on" in line
    skipping = flow("reindex", "--skip-bad", "--db", migrated)
    assert skipping.code == 1
    assert skipping.out.startswith("indexed 2 instance(s) of 3 row(s)")
    assert "skipped m-2:" in skipping.err and "1 instance(s) could not be indexed" in skipping.err
    inbox = table(flow("inbox", "--actor", "manager", "--db", migrated).out)
    assert [r[0] for r in inbox] == ["m-1", "m-3"]
    # An indexed row whose states no longer read: a full pass clears its index and says so.
    _hand_edit_states(migrated, "m-1")
    full = flow("reindex", "--all", "--skip-bad", "--graph", OA, "--db", migrated)
    assert full.code == 1
    assert "skipped m-1:" in full.err and "which its states contradict, was cleared" in full.err
    inbox = table(flow("inbox", "--actor", "manager", "--db", migrated).out)
    assert [r[0] for r in inbox] == ["m-3"]


def test_reindex_shows_a_skipped_id_whole_and_escaped(flow: Flow, migrated: str) -> None:
    """The "skipped" line folded whitespace: the id "tab<TAB>id" read "tab id", another id."""
    _unindexed(migrated, "tab\tid")
    _store_graph_as_id(migrated, "tab\tid")
    skipping = flow("reindex", "--skip-bad", "--db", migrated)
    assert skipping.code == 1
    skipped = skipping.err.splitlines()[0]
    assert skipped.startswith("flow: skipped tab\\tid: "), skipping.err
    assert "\t" not in skipping.err


def test_reindex_all_continues_after_a_row_id(flow: Flow, migrated: str) -> None:
    _unindexed(migrated, "a-1", "a-2", "a-3")
    first = _first_row_id(migrated)
    rest = flow("reindex", "--all", "--after", str(first), "--db", migrated)
    assert rest.code == 0, rest.err
    assert rest.out.startswith("indexed 2 instance(s) of 2 row(s)")
    assert flow("reindex", "--batch", str(10**6), "--db", migrated).code == 2


def _first_row_id(db: str) -> int:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            query = sa.text("SELECT MIN(id) FROM bpm_flow_repository")
            return int(conn.execute(query).scalar_one())
    finally:
        engine.dispose()


def _shown(url: str) -> str:
    return sa.engine.make_url(url).render_as_string(hide_password=True)


def test_reindex_shows_progress_on_a_terminal(migrated: str, tmp_path: object) -> None:
    _unindexed(migrated, "t-1", "t-2", "t-3")
    out = _on_terminal(tmp_path, "reindex", "--batch", "2", "--db", migrated)
    assert "\r2 / 3 (66.7%) rows, 2 indexed" in out
    assert "\r3 / 3 (100.0%) rows, 3 indexed" in out
    assert "indexed 3 instance(s) of 3 row(s)" in out


def test_progress_of_a_resumed_pass_counts_the_rows_after_its_start(
    migrated: str, tmp_path: object
) -> None:
    _unindexed(migrated, "p-1", "p-2", "p-3")
    first = _first_row_id(migrated)
    args = ("reindex", "--all", "--after", str(first), "--graph", OA, "--db", migrated)
    out = _on_terminal(tmp_path, *args)
    assert "\r2 / 2 (100.0%) rows, 2 indexed" in out


def _on_terminal(cwd: object, *args: str) -> str:
    """What ``flow ARGS`` writes to a terminal (a pseudo-terminal as its stdout)."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "FLOW_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    with subprocess.Popen(
        [str(flow_script()), *args],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(cwd),
    ) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    os.close(leader)
    return b"".join(chunks).decode()


def test_a_todo_table_name_the_database_lacks_is_refused_not_written_around(
    flow: Flow, migrated: str
) -> None:
    """A mistyped FLOW_TODO_TABLE on a migrated database: every command says so, none
    writes the instance without its index (which would leave the index stale)."""
    start(flow, migrated, "typo-1", 100, forward=False)
    typo = {"FLOW_TODO_TABLE": "bpm_flow_todos"}
    for args in (
        ("submit", "typo-1", "apply", "forward"),
        ("inbox", "--actor", "manager"),
        ("migrate",),
    ):
        result = flow(*args, "--db", migrated, env=typo)
        assert result.code == 1, (args, result.out)
        line = single_error_line(result)
        assert "'bpm_flow_todos' does not exist" in line and "FLOW_TODO_TABLE" in line
    waiting = table(flow("inbox", "--actor", "employee", "--db", migrated).out)
    assert [(r[0], r[2]) for r in waiting] == [("typo-1", "apply (Apply)")]
    assert "no task submitted yet" in flow("history", "typo-1", "--db", migrated).out


def test_index_tables_show_whole_ids_and_escape_control_characters(
    flow: Flow, migrated: str
) -> None:
    """An id is copied into the next command: never clipped. Text written by another service
    may hold terminal escape sequences: shown escaped, never sent to the terminal."""
    long_id = "i" * 64
    start(flow, migrated, long_id, 100)
    wf = sql_workflow(migrated, FlowEngine(), state_controller=ActorStateController())
    try:
        ctx = FlowContext.of("esc\x1b[2Jid", {"amount": 100, "actor": "employee"})
        task = wf.claim_task(Graph.from_file(OA), ctx)
        assert wf.submit_task_if_waiting(task, TaskAction.FORWARD, ctx)
    finally:
        wf.state_repository.engine.dispose()  # type: ignore[attr-defined]
    inbox = flow("inbox", "--actor", "manager", "--db", migrated)
    assert [r[0] for r in table(inbox.out)] == [long_id, "esc\\x1b[2Jid"]
    assert "\x1b" not in inbox.out
    listed = flow("instances", "--status", "running", "--db", migrated)
    assert {r[0] for r in table(listed.out)} == {long_id, "esc\\x1b[2Jid"}
    assert "\x1b" not in listed.out


def test_reindex_and_withdraw_refuse_a_graph_file_that_does_not_validate(
    flow: Flow, migrated: str
) -> None:
    """As ``start``, ``claim`` and ``submit`` do: a graph with errors is refused before
    anything is written (a dangling link would index instances as running with no task)."""
    _unindexed(migrated, "v-1")
    bad = str(REPO / "tests" / "cli" / "graphs" / "dangling_link.yml")
    for args in (("reindex", "--graph", bad), ("withdraw", "v-1", "--graph", bad)):
        result = flow(*args, "--db", migrated)
        assert result.code == 1, args
        assert "flow validate" in single_error_line(result)
    assert flow("inbox", "--actor", "manager", "--db", migrated).out.startswith("no open task")


@pytest.mark.parametrize(
    "command",
    [
        ("inbox", "--actor", "manager"),
        ("instances", "--status", "running"),
        ("withdraw", "x"),
        ("send-back", "x", "apply"),
        ("reindex",),
    ],
)
def test_a_database_without_the_index_says_how_to_get_it(
    flow: Flow, db_url: str, command: tuple[str, ...]
) -> None:
    migrations.upgrade(db_url, revision="flow0003")
    line = single_error_line(flow(*command, "--db", db_url))
    assert "keeps no task index yet" in line and "flow migrate" in line


def test_claim_and_submit_still_work_before_the_index(flow: Flow, db_url: str) -> None:
    migrations.upgrade(db_url, revision="flow0003")
    start(flow, db_url, "old-1", 100)
    listed = flow("instances", "--db", db_url)
    assert "manager (Manager approval, for manager)" in listed.out
