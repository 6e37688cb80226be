"""The inbox, withdraw and send-back endpoints: what each caller sees, and the typed refusals
as HTTP statuses (404 unknown, 409 closed or decided, 422 guard, 403 not a candidate) with
nothing written."""

from __future__ import annotations

from fastapi.testclient import TestClient

EMPLOYEE = {"X-Actor": "employee"}
MANAGER = {"X-Actor": "manager"}
DIRECTOR = {"X-Actor": "director"}


def file_expense(client: TestClient, amount: int, purpose: str = "Taxi") -> str:
    response = client.post(
        "/expenses", json={"purpose": purpose, "amount": amount}, headers=EMPLOYEE
    )
    assert response.status_code == 201, response.text
    expense_id: str = response.json()["id"]
    return expense_id


def inbox(client: TestClient, headers: dict[str, str], **params: int) -> dict[str, object]:
    response = client.get("/inbox", headers=headers, params=params)
    assert response.status_code == 200, response.text
    page: dict[str, object] = response.json()
    return page


def expenses(page: dict[str, object]) -> list[str]:
    tasks = page["tasks"]
    assert isinstance(tasks, list)
    return [t["expense"] for t in tasks]


def history_length(client: TestClient, expense_id: str) -> int:
    return len(client.get(f"/expenses/{expense_id}/history").json())


def test_the_inbox_shows_each_caller_their_tasks_page_by_page(client: TestClient) -> None:
    small = [file_expense(client, 100 + i) for i in range(3)]
    large = file_expense(client, 9000)
    first = inbox(client, MANAGER, limit=2)
    assert expenses(first) == small[:2]
    tasks = first["tasks"]
    assert isinstance(tasks, list)
    assert {k: tasks[0][k] for k in ("node", "title", "state", "sent_by")} == {
        "node": "manager",
        "title": "Manager approval",
        "state": "ready",
        "sent_by": "apply",
    }
    after = first["next"]
    assert isinstance(after, int)
    rest = inbox(client, MANAGER, limit=2, after=after)
    assert expenses(rest) == small[2:]
    assert rest["next"] is None
    assert expenses(inbox(client, DIRECTOR)) == [large]
    assert expenses(inbox(client, EMPLOYEE)) == []
    assert client.get("/inbox", headers=MANAGER, params={"limit": 0}).status_code == 422


def test_withdraw_takes_the_expense_out_of_every_inbox(client: TestClient) -> None:
    expense_id = file_expense(client, 100)
    done = client.post(
        f"/expenses/{expense_id}/withdraw", json={"message": "not needed"}, headers=EMPLOYEE
    )
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "withdrawn"
    assert done.json()["tasks"] == []
    assert expenses(inbox(client, MANAGER)) == []
    assert client.get(f"/expenses/{expense_id}/history").json()[-1] == {
        "task": "manager",
        "result": "terminated",
        "by": "employee",
        "next": "manager",
        "message": "not needed",
    }
    again = client.post(f"/expenses/{expense_id}/withdraw", json={}, headers=EMPLOYEE)
    assert again.status_code == 409
    decided = client.post(
        f"/expenses/{expense_id}/decisions", json={"decision": "approve"}, headers=MANAGER
    )
    assert decided.status_code == 409
    assert history_length(client, expense_id) == 2


def test_only_the_filer_may_withdraw_and_unknown_is_404(client: TestClient) -> None:
    expense_id = file_expense(client, 100)
    refused = client.post(f"/expenses/{expense_id}/withdraw", json={}, headers=MANAGER)
    assert refused.status_code == 403
    assert client.get(f"/expenses/{expense_id}").json()["status"] == "pending"
    assert client.post("/expenses/nope/withdraw", json={}, headers=EMPLOYEE).status_code == 404
    assert client.post("/expenses/nope/send-back", json={}, headers=MANAGER).status_code == 404


def test_send_back_returns_the_task_to_whoever_sent_it(client: TestClient) -> None:
    expense_id = file_expense(client, 9000)
    back = client.post(
        f"/expenses/{expense_id}/send-back", json={"message": "invoice?"}, headers=DIRECTOR
    )
    assert back.status_code == 200, back.text
    assert back.json()["status"] == "sent back"
    assert back.json()["tasks"] == [{"node": "apply", "title": "Apply", "actor": "employee"}]
    mine = inbox(client, EMPLOYEE)
    assert expenses(mine) == [expense_id]
    assert client.get(f"/expenses/{expense_id}/history").json()[-1]["message"] == "invoice?"


def test_send_back_refusals_write_nothing(client: TestClient) -> None:
    expense_id = file_expense(client, 100)
    stranger = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=DIRECTOR)
    assert stranger.status_code == 403
    assert client.post(f"/expenses/{expense_id}/send-back", json={}, headers=MANAGER).is_success
    first = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=EMPLOYEE)
    assert first.status_code == 422
    assert "first task" in first.json()["detail"]
    assert history_length(client, expense_id) == 2
    withdrawn = client.post(f"/expenses/{expense_id}/withdraw", json={}, headers=EMPLOYEE)
    assert withdrawn.status_code == 200
    closed = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=EMPLOYEE)
    assert closed.status_code == 409


def test_the_filer_asking_to_send_back_the_managers_task_gets_403_a_double_click_409(
    client: TestClient,
) -> None:
    """Filing is no decision: the employee's filing row made their send-back a 409 "already
    decided" while the manager's task waited, where the README promises 403 (not theirs)."""
    expense_id = file_expense(client, 100)
    filer = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=EMPLOYEE)
    assert filer.status_code == 403, filer.text
    assert client.post(f"/expenses/{expense_id}/send-back", json={}, headers=MANAGER).is_success
    twice = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=MANAGER)
    assert twice.status_code == 409, twice.text
    assert "already decided" in twice.json()["detail"]
    assert history_length(client, expense_id) == 2


def test_a_send_back_decision_on_the_first_task_is_422_and_writes_nothing(
    client: TestClient,
) -> None:
    """A BACK of the first task only cleared its own state: the employee could "send back"
    their own task again and again, each time 200 and a history row."""
    expense_id = file_expense(client, 100)
    assert client.post(f"/expenses/{expense_id}/send-back", json={}, headers=MANAGER).is_success
    for _ in range(2):
        again = client.post(
            f"/expenses/{expense_id}/decisions", json={"decision": "send_back"}, headers=EMPLOYEE
        )
        assert again.status_code == 422, again.text
        assert "first task" in again.json()["detail"]
    assert history_length(client, expense_id) == 2
    assert client.get(f"/expenses/{expense_id}").json()["tasks"][0]["node"] == "apply"
    results = [h["result"] for h in client.get(f"/expenses/{expense_id}/history").json()]
    assert results == ["completed", "sent back"]


def test_a_utf8_actor_header_is_read_as_the_text_the_client_sent(client: TestClient) -> None:
    """HTTP hands header bytes over as Latin-1: ``José`` arrived as ``JosÃ©`` and 64
    characters of ``é`` (128 bytes) were refused as too long."""
    refused = client.post(
        "/expenses",
        json={"purpose": "Taxi", "amount": 5},
        headers=[(b"X-Actor", "José".encode())],
    )
    assert refused.status_code == 403
    assert refused.json()["detail"] == "'José' cannot file an expense"
    long = client.get("/inbox", headers=[(b"X-Actor", ("é" * 64).encode())])
    assert long.status_code == 200, long.text
    too_long = client.get("/inbox", headers=[(b"X-Actor", ("é" * 65).encode())])
    assert too_long.status_code == 422


def test_an_inbox_cursor_past_any_row_id_is_refused(client: TestClient) -> None:
    for after in (2**63, 10**23, -1):
        refused = client.get("/inbox", params={"after": after}, headers=MANAGER)
        assert refused.status_code == 422, refused.text
    assert client.get("/inbox", params={"after": 2**63 - 1}, headers=MANAGER).json()["tasks"] == []


def test_withdraw_needs_no_body(client: TestClient) -> None:
    expense_id = file_expense(client, 100)
    done = client.post(f"/expenses/{expense_id}/withdraw", headers=EMPLOYEE)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "withdrawn"


def test_values_the_tables_cannot_hold_are_refused_with_422(client: TestClient) -> None:
    """An actor longer than its column or a NUL in a message: refused, nothing written —
    never a 500."""
    too_long = client.post(
        "/expenses", json={"purpose": "Taxi", "amount": 5}, headers={"X-Actor": "e" * 100}
    )
    assert too_long.status_code == 422, too_long.text
    nul = client.post("/expenses", json={"purpose": "Ta\u0000xi", "amount": 5}, headers=EMPLOYEE)
    assert nul.status_code == 422, nul.text
    assert client.get("/inbox", headers={"X-Actor": "man\u0000ager"}).status_code == 422
    assert expenses(inbox(client, MANAGER)) == []


def test_an_actor_with_nul_is_refused_as_bad_input_on_every_endpoint(client: TestClient) -> None:
    """PostgreSQL's text cannot hold NUL: filing an expense as such an actor inserted the app's
    own row (``filed_by``) before the flow checked the actor, and failed with a 500 there (a 422
    on the other backends). The header is refused alike everywhere, naming it."""
    expense_id = file_expense(client, 100)
    before = client.get(f"/expenses/{expense_id}").json()
    calls: list[tuple[str, str, dict[str, object] | None]] = [
        ("POST", "/expenses", {"purpose": "Taxi", "amount": 5}),
        ("GET", "/inbox", None),
        ("POST", f"/expenses/{expense_id}/decisions", {"decision": "approve"}),
        ("POST", f"/expenses/{expense_id}/withdraw", {}),
        ("POST", f"/expenses/{expense_id}/send-back", {}),
    ]
    for actor in ("\u0000", "man\u0000ager"):
        for method, path, body in calls:
            response = client.request(method, path, headers={"X-Actor": actor}, json=body)
            assert response.status_code == 422, (actor, path, response.text)
            assert response.json()["detail"][0]["loc"] == ["header", "X-Actor"], response.text
    assert client.get(f"/expenses/{expense_id}").json() == before
    assert expenses(inbox(client, MANAGER)) == [expense_id]


def test_an_expense_id_differing_in_case_or_trailing_space_is_another_expense(
    client: TestClient,
) -> None:
    """The flow's ids compare exactly, so must the app's own: with MariaDB's default collation
    ``EXP-…`` or ``exp-… `` found the expense row while naming another flow instance — a
    decision on it started that instance and overwrote the real expense's status."""
    expense_id = file_expense(client, 100)
    before = client.get(f"/expenses/{expense_id}").json()
    for variant in (expense_id.upper(), expense_id + " "):
        assert client.get(f"/expenses/{variant}").status_code == 404
        decided = client.post(
            f"/expenses/{variant}/decisions", json={"decision": "approve"}, headers=EMPLOYEE
        )
        assert decided.status_code == 404, decided.text
        assert (
            client.post(f"/expenses/{variant}/withdraw", json={}, headers=EMPLOYEE).status_code
            == 404
        )
    assert client.get(f"/expenses/{expense_id}").json() == before
    assert expenses(inbox(client, MANAGER)) == [expense_id]


def test_an_expense_id_with_nul_is_refused_as_bad_input(client: TestClient) -> None:
    """PostgreSQL's text cannot hold NUL: the query failed with a 500 there."""
    expense_id = file_expense(client, 100)
    bad = expense_id + "%00"
    for method, path in [
        ("GET", ""),
        ("GET", "/history"),
        ("GET", "/tasks"),
        ("POST", "/withdraw"),
        ("POST", "/send-back"),
        ("POST", "/decisions"),
    ]:
        body = {"decision": "approve"} if path == "/decisions" else {}
        response = client.request(
            method,
            f"/expenses/{bad}{path}",
            headers=MANAGER,
            json=body if method == "POST" else None,
        )
        assert response.status_code == 422, (method, path, response.text)
    assert expenses(inbox(client, MANAGER)) == [expense_id]
