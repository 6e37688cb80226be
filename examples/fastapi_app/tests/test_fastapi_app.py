"""The example service: file an expense, approve / send back / reject it, read its history —
each request one transaction covering the flow state, its history and the app's own row."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

EMPLOYEE = {"X-Actor": "employee"}
MANAGER = {"X-Actor": "manager"}
DIRECTOR = {"X-Actor": "director"}


def file_expense(client: TestClient, amount: int, purpose: str = "Taxi") -> dict[str, object]:
    response = client.post(
        "/expenses", json={"purpose": purpose, "amount": amount}, headers=EMPLOYEE
    )
    assert response.status_code == 201, response.text
    body: dict[str, object] = response.json()
    return body


def test_a_small_expense_waits_for_the_manager(client: TestClient) -> None:
    body = file_expense(client, 120)
    assert body["status"] == "pending"
    assert body["tasks"] == [{"node": "manager", "title": "Manager approval", "actor": "manager"}]


def test_tasks_lists_who_has_to_act(client: TestClient) -> None:
    expense_id = file_expense(client, 120)["id"]
    tasks = client.get(f"/expenses/{expense_id}/tasks")
    assert tasks.status_code == 200
    assert tasks.json() == [{"node": "manager", "title": "Manager approval", "actor": "manager"}]


def test_a_large_expense_waits_for_the_director(client: TestClient) -> None:
    body = file_expense(client, 8000)
    assert body["tasks"] == [
        {"node": "director", "title": "Director approval", "actor": "director"}
    ]


def test_approval_finishes_the_expense_and_is_in_the_history(client: TestClient) -> None:
    expense_id = file_expense(client, 120)["id"]
    decided = client.post(
        f"/expenses/{expense_id}/decisions",
        json={"decision": "approve", "message": "fine"},
        headers=MANAGER,
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "approved"
    assert decided.json()["tasks"] == []
    history = client.get(f"/expenses/{expense_id}/history").json()
    assert history == [
        {
            "task": "apply",
            "result": "completed",
            "by": "employee",
            "next": "manager",
            "message": "Taxi",
        },
        {
            "task": "manager",
            "result": "completed",
            "by": "manager",
            "next": "end",
            "message": "fine",
        },
    ]


def test_sent_back_expense_returns_to_the_employee_and_can_be_resubmitted(
    client: TestClient,
) -> None:
    expense_id = file_expense(client, 9000)["id"]
    back = client.post(
        f"/expenses/{expense_id}/decisions",
        json={"decision": "send_back", "message": "invoice?"},
        headers=DIRECTOR,
    )
    assert back.json()["status"] == "sent back"
    assert back.json()["tasks"] == [{"node": "apply", "title": "Apply", "actor": "employee"}]
    again = client.post(
        f"/expenses/{expense_id}/decisions",
        json={"decision": "approve", "message": "attached"},
        headers=EMPLOYEE,
    )
    assert again.json()["status"] == "pending"
    assert again.json()["tasks"][0]["node"] == "director"
    results = [h["result"] for h in client.get(f"/expenses/{expense_id}/history").json()]
    assert results == ["completed", "sent back", "completed"]


def test_rejection_terminates_the_flow(client: TestClient) -> None:
    expense_id = file_expense(client, 300)["id"]
    rejected = client.post(
        f"/expenses/{expense_id}/decisions", json={"decision": "reject"}, headers=MANAGER
    )
    assert rejected.json()["status"] == "rejected"
    assert client.get(f"/expenses/{expense_id}/history").json()[-1]["result"] == "terminated"


def test_the_wrong_actor_gets_409_and_nothing_changes(client: TestClient) -> None:
    expense_id = file_expense(client, 300)["id"]
    refused = client.post(
        f"/expenses/{expense_id}/decisions", json={"decision": "approve"}, headers=DIRECTOR
    )
    assert refused.status_code == 409
    assert len(client.get(f"/expenses/{expense_id}/history").json()) == 1
    assert client.get(f"/expenses/{expense_id}").json()["status"] == "pending"


def test_unknown_expense_is_404(client: TestClient) -> None:
    assert client.get("/expenses/nope").status_code == 404
    assert client.get("/expenses/nope/history").status_code == 404


def test_a_failed_request_leaves_no_flow_row_behind(client: TestClient) -> None:
    response = client.post(
        "/expenses", json={"purpose": "Taxi", "amount": 120}, headers={"X-Actor": "manager"}
    )
    assert response.status_code == 403
    engine: sa.Engine = client.app.state.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        flow_rows = conn.exec_driver_sql("SELECT COUNT(*) FROM bpm_flow_repository").scalar()
        expense_rows = conn.exec_driver_sql("SELECT COUNT(*) FROM expense").scalar()
    assert (flow_rows, expense_rows) == (0, 0)


def test_concurrent_decisions_on_one_expense_give_one_200_and_409s(client: TestClient) -> None:
    """Four managers click "approve" at once: each request is one run_in_transaction unit
    (claim + submit_task_if_waiting); one wins, the others are told it was decided — no 500,
    no hang, one history row for the manager."""
    import threading

    expense_id = file_expense(client, 120)["id"]
    barrier = threading.Barrier(4)
    codes: list[int] = []

    def click() -> None:
        barrier.wait(timeout=60)
        response = client.post(
            f"/expenses/{expense_id}/decisions", json={"decision": "approve"}, headers=MANAGER
        )
        codes.append(response.status_code)

    threads = [threading.Thread(target=click) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(codes) == [200, 409, 409, 409]
    history = client.get(f"/expenses/{expense_id}/history").json()
    assert [h["task"] for h in history] == ["apply", "manager"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"purpose": "x", "amount": 2147483648}',  # past the INTEGER column
        b'{"purpose": "x", "amount": 9223372036854775808}',
        b'{"purpose": "x", "amount": true}',
        b'{"purpose": "x", "amount": "5"}',
        b'{"purpose": "x", "amount": NaN}',
        b'{"purpose": "x", "amount": 1e400}',
        b'{"purpose": "\\ud800", "amount": 1}',
        b'{"purpose": "Ta\\u0000xi", "amount": 1}',  # PostgreSQL's text holds no NUL
        b'{"\\ud800": 1}',
    ],
)
def test_a_body_the_model_refuses_is_a_422_that_files_nothing(
    client: TestClient, body: bytes
) -> None:
    """Never a 500: not for an amount the column cannot hold, nor for a rejected value (a
    lone surrogate, NaN) that FastAPI's own 422 would echo and fail to encode."""
    headers = {**EMPLOYEE, "content-type": "application/json"}
    refused = client.post("/expenses", content=body, headers=headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"][0] == "body"
    assert client.get("/inbox", headers=EMPLOYEE).json()["tasks"] == []


def test_a_decision_the_model_refuses_is_a_422(client: TestClient) -> None:
    expense_id = file_expense(client, 120)["id"]
    headers = {"X-Actor": "manager", "content-type": "application/json"}
    for body in (b'{"decision": "\\ud800"}', b'{"decision": Infinity}'):
        refused = client.post(f"/expenses/{expense_id}/decisions", content=body, headers=headers)
        assert refused.status_code == 422, refused.text
    assert client.get(f"/expenses/{expense_id}").json()["status"] == "pending"
    assert file_expense(client, 2147483647)["amount"] == 2147483647
