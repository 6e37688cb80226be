"""Every workflow operation needs a usable instance id, whatever the repository: ``""`` (a
context made without one), whitespace or a non-string would otherwise share one state set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flow import FlowContext, FlowEngine
from flow.workflow import (
    ActorStateController,
    InMemoryStateRepository,
    InvalidInstanceIdError,
    TaskAction,
    WorkflowExecutor,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "oa.yml"


def _executor() -> tuple[WorkflowExecutor, InMemoryStateRepository]:
    engine = FlowEngine()
    engine.load(EXAMPLE)
    repo = InMemoryStateRepository()
    return WorkflowExecutor(engine, ActorStateController(), repo), repo


def _ctx(instance_id: Any) -> FlowContext:
    ctx = FlowContext.of("placeholder", {"actor": "employee", "amount": 1})
    ctx.instance_id = instance_id
    return ctx


@pytest.mark.parametrize("instance_id", ["", " ", "\t", "\n \u3000", None, 7])
@pytest.mark.parametrize("operation", ["claim", "find", "next", "submit_at"])
def test_operations_reject_an_empty_blank_or_non_string_instance_id(
    instance_id: Any, operation: str
) -> None:
    ex, repo = _executor()
    ctx = _ctx("" if instance_id is None else instance_id)
    calls = {
        "claim": lambda: ex.claim_task("oa", ctx),
        "find": lambda: ex.find_task("oa", ctx),
        "next": lambda: ex.find_next_tasks("oa", ctx),
        "submit_at": lambda: ex.submit_task_at("oa", "apply", TaskAction.FORWARD, ctx),
    }
    with pytest.raises(InvalidInstanceIdError) as caught:
        calls[operation]()
    assert isinstance(caught.value, ValueError)
    assert repo.states(ctx.instance_id if isinstance(ctx.instance_id, str) else "") == {}


def test_a_context_made_without_an_id_is_rejected() -> None:
    ex, _ = _executor()
    with pytest.raises(InvalidInstanceIdError, match="empty"):
        ex.claim_task("oa", FlowContext.of(None, {"actor": "employee"}))


@pytest.mark.parametrize("instance_id", ["inv-7 ", " inv-7", "Ab3xZ", "café-1", "x" * 500])
def test_other_ids_are_kept_exactly_as_given(instance_id: str) -> None:
    ex, repo = _executor()
    assert ex.claim_task("oa", _ctx(instance_id)) is not None
    assert repo.states(instance_id) == {"oa:apply": 1001}
