"""The example's README: its run command names the app factory, its endpoint table lists every
route of the app, and the request session it shows works as printed."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from examples.fastapi_app.app import create_app

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_run_command_names_the_app_factory() -> None:
    assert "uvicorn --factory examples.fastapi_app.app:create_app" in README


def test_endpoint_table_lists_every_route(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'routes.sqlite'}")
    try:
        routes = {
            f"{method} {route.path.replace('instance_id', 'id')}"
            for route in app.routes
            if isinstance(route, APIRoute)
            for method in route.methods
        }
        listed = set(re.findall(r"^\| `([A-Z]+ /[^`]*)` \|", README, re.M))
        assert listed == routes
    finally:
        app.state.engine.dispose()


def test_the_session_shown_works(client: TestClient) -> None:
    filed = client.post(
        "/expenses",
        headers={"X-Actor": "employee"},
        json={"purpose": "Taxi to the airport", "amount": 120},
    )
    assert filed.status_code == 201
    expense_id = filed.json()["id"]
    assert filed.json()["tasks"] == [
        {"node": "manager", "title": "Manager approval", "actor": "manager"}
    ]
    assert '"tasks":[{"node":"manager","title":"Manager approval","actor":"manager"}]}' in README
    decided = client.post(
        f"/expenses/{expense_id}/decisions",
        headers={"X-Actor": "manager"},
        json={"decision": "approve", "message": "OK"},
    )
    assert decided.json()["status"] == "approved"
    assert [h["task"] for h in client.get(f"/expenses/{expense_id}/history").json()] == [
        "apply",
        "manager",
    ]
