"""Actor and auditor values: stored as text when they are text (or an integer), refused
with a typed error naming the instance otherwise — never a bare exception from ``str()``,
never a half-written instance."""

from __future__ import annotations

import decimal
import enum
import fractions
import uuid
from typing import Any

import pytest
from wf_support import ListRecorder, load

from flow import ContextValueError, FlowContext, FlowEngine, FlowError
from flow.workflow import (
    ActorStateController,
    InMemoryStateRepository,
    InvalidArgumentTypeError,
    TaskAction,
    WorkflowExecutor,
)

OA = """
id: oa
layout:
  - {id: start, type: start}
  - {id: apply, meta: {actor: employee}}
  - {id: approve, meta: {actor: manager}}
  - {id: end, type: end}
"""


class _BrokenStr:
    """A value whose ``__str__`` (and ``__repr__``) raise."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _LoudStr(str):
    """A string whose own ``__str__`` raises: stored as the string it is."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


class _User:
    """An application object with no text form of its own (its str() is a memory address)."""


NOT_TEXT = [
    b"employee",
    ["employee"],
    {"name": "employee"},
    True,
    1.5,
    _BrokenStr(),
    _User(),
    fractions.Fraction(1, 2),
    decimal.Decimal("1.5"),
    int,
]
BAD = [
    *((value, InvalidArgumentTypeError) for value in NOT_TEXT),
    (10**5000, ContextValueError),
]


@pytest.fixture
def recorder() -> ListRecorder:
    return ListRecorder()


@pytest.fixture
def wf(engine: FlowEngine, recorder: ListRecorder) -> WorkflowExecutor:
    load(engine, OA)
    return WorkflowExecutor(
        engine, ActorStateController(), InMemoryStateRepository(), recorder=recorder
    )


def _nothing_stored(wf: WorkflowExecutor, recorder: ListRecorder, instance_id: str) -> None:
    repository = wf.state_repository
    assert isinstance(repository, InMemoryStateRepository)
    assert repository.states(instance_id) == {}
    assert wf.status(instance_id) is None
    assert recorder.records == []


@pytest.mark.parametrize("key", ["actor", "auditor", "creator"])
@pytest.mark.parametrize(("bad", "error"), BAD, ids=lambda v: type(v).__name__)
def test_a_submit_with_an_identity_that_is_not_text_is_refused_and_writes_nothing(
    wf: WorkflowExecutor, recorder: ListRecorder, key: str, bad: Any, error: type[Exception]
) -> None:
    ctx = FlowContext.of("exp-1", {key: bad})
    with pytest.raises(error, match=rf"^{key}\b.*\(instance 'exp-1'\)$") as caught:
        wf.submit_task_at("oa", "apply", TaskAction.FORWARD, ctx)
    assert isinstance(caught.value, FlowError)
    _nothing_stored(wf, recorder, "exp-1")
    wf.submit_task_at("oa", "apply", TaskAction.FORWARD, FlowContext.of("exp-1", {key: "bob"}))
    assert recorder.records[-1].task_id == "apply"


@pytest.mark.parametrize(("bad", "error"), BAD, ids=lambda v: type(v).__name__)
def test_a_claim_that_records_its_creator_refuses_an_auditor_that_is_not_text(
    wf: WorkflowExecutor, recorder: ListRecorder, bad: Any, error: type[Exception]
) -> None:
    ctx = FlowContext.of("exp-2", {"actor": "employee", "auditor": bad})
    with pytest.raises(error, match=r"\(instance 'exp-2'\)$"):
        wf.claim_task("oa", ctx)
    _nothing_stored(wf, recorder, "exp-2")


@pytest.mark.parametrize(("bad", "error"), BAD, ids=lambda v: type(v).__name__)
def test_withdraw_refuses_an_actor_that_is_not_text_and_keeps_the_instance_running(
    wf: WorkflowExecutor, recorder: ListRecorder, bad: Any, error: type[Exception]
) -> None:
    assert wf.claim_task("oa", FlowContext.of("exp-3", {"actor": "employee"})) is not None
    before = (wf.state_repository.states("exp-3"), wf.status("exp-3"))  # type: ignore[attr-defined]
    with pytest.raises(error, match=r"\(instance 'exp-3'\)$"):
        wf.withdraw("oa", FlowContext.of("exp-3", {"actor": bad}))
    assert (wf.state_repository.states("exp-3"), wf.status("exp-3")) == before  # type: ignore[attr-defined]
    assert recorder.records == []


class _Index:
    """An integer of another library (NumPy's ``int64``): not an ``int``, has ``__index__``."""

    def __index__(self) -> int:
        return 5


class _Role(enum.Enum):
    MANAGER = "manager"


class _Rights(enum.IntFlag):
    APPROVE = 4


_UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("employee", "employee"),
        (7, "7"),
        (-(10**30), str(-(10**30))),
        (_LoudStr("eve"), "eve"),
        (_Index(), "5"),
        (_UUID, str(_UUID)),
        (decimal.Decimal(7), "7"),
        (_Role.MANAGER, "_Role.MANAGER"),
        (_Rights.APPROVE, "4"),
    ],
    ids=["str", "int", "big int", "str subclass", "__index__", "UUID", "Decimal", "enum", "flag"],
)
def test_strings_integers_and_identifiers_are_stored_as_their_text(
    wf: WorkflowExecutor, recorder: ListRecorder, value: Any, stored: str
) -> None:
    ctx = FlowContext.of("exp-4", {"actor": value})
    wf.submit_task_at("oa", "apply", TaskAction.FORWARD, ctx)
    (record,) = recorder.records
    assert record.assignee == stored and type(record.assignee) is str
    assert wf.instances()[0].creator == stored


@pytest.mark.parametrize(("bad", "error"), BAD, ids=lambda v: type(v).__name__)
def test_actor_of_refuses_a_value_that_is_not_text(bad: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"\(instance 'exp-5'\)$"):
        ActorStateController().actor_of(FlowContext.of("exp-5", {"actor": bad}))
    assert ActorStateController().actor_of(FlowContext.of("exp-5", {"actor": 3})) == "3"
