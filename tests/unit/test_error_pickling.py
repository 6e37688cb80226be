"""Errors cross process boundaries: a process pool's worker raises, the caller receives it.

Most errors take other arguments than their message, so the default pickling of exceptions
(``cls(*args)`` again) failed on unpickling — and a pool whose result cannot be unpickled
breaks as a whole (``BrokenProcessPool``), hiding the error."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

import flow.workflow.errors
import flow_sqla.errors
from flow import FlowContext
from flow.errors import FlowError, InvalidArgumentTypeError


def _every_error_class() -> list[type[FlowError]]:
    found: list[type[FlowError]] = []
    pending: list[type[FlowError]] = [FlowError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    assert flow.workflow.errors.GraphMismatchError in found
    assert flow_sqla.errors.SchemaMismatchError in found
    return sorted(set(found), key=lambda c: (c.__module__, c.__qualname__))


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda c: c.__qualname__)
def test_every_error_pickles_as_itself(cls: type[FlowError]) -> None:
    error = cls.__new__(cls, "what went wrong")
    error.args = ("what went wrong",)
    error.instance_id = "exp-1"  # type: ignore[attr-defined]
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls
    assert (str(again), again.instance_id) == ("what went wrong", "exp-1")


def _context_of_a_list() -> None:
    FlowContext.of("exp-1", [("amount", 1)])  # type: ignore[arg-type]


def test_an_error_raised_in_a_process_pool_reaches_the_caller() -> None:
    expected = pytest.raises(InvalidArgumentTypeError, match="data must be a mapping")
    with ProcessPoolExecutor(max_workers=1) as pool, expected as raised:
        pool.submit(_context_of_a_list).result(timeout=60)
    assert raised.value.instance_id == "exp-1"


def test_an_error_holding_what_does_not_pickle_reaches_the_caller_quoted() -> None:
    """An error keeps the offending value (``.value``): a generator does not pickle, so it
    crosses as its quoted form instead of replacing the error with a pickling one."""
    error = InvalidArgumentTypeError("data", (n for n in ()), "a mapping", instance_id="x")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is InvalidArgumentTypeError and str(again) == str(error)
    assert isinstance(again.value, str) and again.value.startswith("<generator")
