"""Each request holds at most one pooled connection, and a request that finds nothing to do
answers from what has committed: a request that took a second connection while holding one
made concurrent requests wait for each other's until the pool timed out (a 500), and a
send-back that lost a race to an approval answered 403 ("not yours") for a closed expense."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from flow.workflow import WorkflowExecutor

EMPLOYEE = {"X-Actor": "employee"}
MANAGER = {"X-Actor": "manager"}
DIRECTOR = {"X-Actor": "director"}


class CheckoutCounter:
    """The most pooled connections checked out at once since :meth:`reset`."""

    def __init__(self, engine: sa.Engine) -> None:
        self.now = 0
        self.most = 0
        sa.event.listen(engine.pool, "checkout", self._out)
        sa.event.listen(engine.pool, "checkin", self._in)

    def _out(self, *args: Any) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def _in(self, *args: Any) -> None:
        self.now -= 1

    def reset(self) -> None:
        self.most = self.now


@pytest.fixture
def counted(client: TestClient) -> Iterator[tuple[TestClient, CheckoutCounter]]:
    engine: sa.Engine = client.app.state.engine  # type: ignore[attr-defined]
    yield client, CheckoutCounter(engine)


def file_expense(client: TestClient, amount: int) -> str:
    response = client.post(
        "/expenses", json={"purpose": "Taxi", "amount": amount}, headers=EMPLOYEE
    )
    assert response.status_code == 201, response.text
    expense_id: str = response.json()["id"]
    return expense_id


def test_every_endpoint_holds_one_connection_at_a_time(
    counted: tuple[TestClient, CheckoutCounter],
) -> None:
    client, pool = counted
    expense_id = file_expense(client, 100)
    requests = [
        ("get", f"/expenses/{expense_id}", MANAGER, None, 200),
        ("get", f"/expenses/{expense_id}/history", MANAGER, None, 200),
        ("get", "/inbox", MANAGER, None, 200),
        ("post", f"/expenses/{expense_id}/send-back", DIRECTOR, {}, 403),  # not the director's
        ("post", f"/expenses/{expense_id}/send-back", MANAGER, {}, 200),
        ("post", f"/expenses/{expense_id}/withdraw", EMPLOYEE, {}, 200),
        ("post", f"/expenses/{expense_id}/withdraw", EMPLOYEE, {}, 409),  # closed
        ("post", f"/expenses/{expense_id}/send-back", EMPLOYEE, {}, 409),  # closed
        ("post", f"/expenses/{expense_id}/decisions", MANAGER, {"decision": "approve"}, 409),
    ]
    for method, url, headers, body, status in requests:
        pool.reset()
        response = client.request(method, url, headers=headers, json=body)
        assert response.status_code == status, (url, response.text)
        assert pool.most <= 1, f"{method} {url} held {pool.most} connections at once"


def test_a_send_back_that_loses_the_race_to_an_approval_is_409(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    expense_id = file_expense(client, 100)
    claim = WorkflowExecutor.claim_task
    approved: list[int] = []

    def approve_first(self: WorkflowExecutor, graph: Any, ctx: Any) -> Any:
        # The manager's approval, in a request of its own, commits just before the
        # send-back's claim (after the send-back read the expense).
        if not approved:
            approved.append(1)
            monkeypatch.setattr(WorkflowExecutor, "claim_task", claim)
            done = client.post(
                f"/expenses/{expense_id}/decisions", json={"decision": "approve"}, headers=MANAGER
            )
            assert done.status_code == 200, done.text
        return claim(self, graph, ctx)

    monkeypatch.setattr(WorkflowExecutor, "claim_task", approve_first)
    lost = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=MANAGER)
    assert approved
    assert lost.status_code == 409, lost.text
    assert "closed" in lost.json()["detail"]
    assert client.get(f"/expenses/{expense_id}").json()["status"] == "approved"


def test_a_second_send_back_by_the_same_caller_is_409(client: TestClient) -> None:
    """A double click: the first sent the task back; the second finds nothing of the
    caller's waiting, because the caller already decided — not because it is not theirs."""
    expense_id = file_expense(client, 100)
    first = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=MANAGER)
    assert first.status_code == 200, first.text
    second = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=MANAGER)
    assert second.status_code == 409, second.text
    stranger = client.post(f"/expenses/{expense_id}/send-back", json={}, headers=DIRECTOR)
    assert stranger.status_code == 403, stranger.text
