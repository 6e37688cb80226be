"""SafeEvaluation refuses to run anything outside its small language, and runs nothing then."""

from __future__ import annotations

import os
from typing import Any

import pytest

from flow.context import FlowContext
from flow.errors import ExpressionError
from flow.evaluation import SafeEvaluation, check_script

EVALUATION = SafeEvaluation()


class Spy:
    """A data object that records every attribute it hands out."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def execute(self, *args: Any) -> None:
        self.touched.append("execute")


ESCAPES = [
    "().__class__.__bases__[0].__subclasses__()",
    "context.__class__",
    "context.put.__self__",
    "x.__dict__",
    "x._private",
    "x.func_globals",
    "x.f_globals",
    "x.mro()",
    "__import__('os').system('true')",
    "__builtins__",
    "import os",
    "from os import system",
    "open('/etc/passwd').read()",
    "eval('1 + 1')",
    "exec('x = 1')",
    "getattr(context, 'connection')",
    "setattr(context, 'x', 1)",
    "type(context)",
    "compile('1', 'f', 'eval')",
    "globals()",
    "vars()",
    "print('x')",
    "breakpoint()",
    "lambda: 1",
    "[c for c in 'ab']",
    "{k: 1 for k in 'ab'}",
    "{c for c in 'ab'}",
    "list(c for c in 'ab')",
    "'{0.__class__}'.format(context)",
    "'{a}'.format_map(m)",
    "f'{context}'",
    "'%0999999999d' % 1",
    "9**9**9",
    "2**1000000",
    "'a' * 10**9",
    "[0] * 10**9",
    "range(10**12)",
    "def f(): pass",
    "class A: pass",
    "del x",
    "for i in 'ab': pass",
    "while True: pass",
    "with x as y: pass",
    "try:\n  pass\nexcept Exception:\n  pass",
    "raise ValueError()",
    "assert False",
    "global x",
    "x[0] = 1",
    "x.y = 1",
    "a, b = 1, 2",
    "(y := 1)",
    "len(*items)",
    "dict(**m)",
    "{**m}",
    "[*items]",
    "a ~ b",
    "f()()",
    "x[0](1)",
    "...",
]


@pytest.mark.parametrize("attempt", ESCAPES)
def test_escape_attempt_is_rejected_before_anything_runs(attempt: str) -> None:
    ctx = FlowContext.of("i-1", {"x": {}, "m": {}, "items": []})
    with pytest.raises(ExpressionError):
        EVALUATION.run_task(ctx, f'context.put("ran", 1)\n{attempt}')
    assert "ran" not in ctx


@pytest.mark.parametrize("attempt", ESCAPES)
def test_escape_attempt_fails_the_load_time_check(attempt: str) -> None:
    with pytest.raises(ExpressionError):
        check_script(attempt)


@pytest.mark.parametrize(
    "attempt",
    [
        "context.connection.execute('DROP TABLE t')",
        "context.exchanger.engine",
        "context.trace.clear()",
        "r = context.connection",
    ],
)
def test_context_exposes_only_its_public_data_surface(attempt: str) -> None:
    spy = Spy()
    ctx = FlowContext.of("i-1", connection=spy)
    with pytest.raises(ExpressionError):
        EVALUATION.run_task(ctx, attempt)
    assert spy.touched == []
    assert "r" not in ctx


@pytest.mark.parametrize(
    "attempt",
    [
        "s * 10**9",
        "n * s",
        "[s] * n",
        "s.ljust(n)",
        "s.center(n)",
        "s.zfill(n)",
        "s.replace('', big)",
        "big.join(many)",
        "(1).to_bytes(n, 'big')",
        "[[0] * 100000] * 100000",
        "big + big",
        "n ** n",
        # Items compared one by one: a huge integer costs its digits, as a long string does.
        "([h] * 99000).count(h)",
        "h in [h + 1] * 99000",
    ],
)
def test_unbounded_work_from_data_is_stopped(attempt: str) -> None:
    data = {
        "s": "ab", "n": 10**9, "big": "x" * 60000, "many": ["a"] * 60000, "h": (1 << 99990) + 1,
    }  # fmt: skip
    with pytest.raises(ExpressionError):
        EVALUATION.run_condition(FlowContext.of("i-1", data), attempt)


def test_module_placed_in_data_cannot_be_used() -> None:
    with pytest.raises(ExpressionError):
        EVALUATION.run_condition(FlowContext.of("i-1", {"os": os}), "os.getcwd()")


def test_class_placed_in_data_cannot_be_used() -> None:
    with pytest.raises(ExpressionError):
        EVALUATION.run_condition(FlowContext.of("i-1", {"t": int}), "t.from_bytes(b'1', 'big')")


def test_forbidden_function_reached_through_data_is_refused() -> None:
    with pytest.raises(ExpressionError):
        EVALUATION.run_condition(FlowContext.of("i-1", {"m": {"f": eval}}), "m.get('f')")


def test_size_limits_allow_ordinary_work() -> None:
    ctx = FlowContext.of("i-1", {"s": "ab"})
    EVALUATION.run_task(ctx, "r = s * 3 + '-' + str(2**64); p = [0] * 10")
    assert ctx.get("r") == "ababab-18446744073709551616"


def test_deep_nesting_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        check_script("x = " + "(" * 5000 + "1" + ")" * 5000)


def test_function_from_data_is_never_called_through_a_builtin() -> None:
    calls: list[object] = []
    data = {"f": calls.append, "items": ["x"]}
    with pytest.raises(ExpressionError):
        EVALUATION.run_condition(FlowContext.of("i-1", data), "min(items, key=f)")
    assert calls == []


def test_function_from_data_is_never_passed_to_a_method() -> None:
    calls: list[object] = []
    data = {"f": calls.append, "items": ["x", "y"]}
    with pytest.raises(ExpressionError):
        EVALUATION.run_task(FlowContext.of("i-1", data), "items.sort(key=f)")
    assert calls == []


def test_unhashable_callable_data_object_is_usable() -> None:
    class Rule:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self) -> None:
            pass

        def limit(self) -> int:
            return 3

    assert EVALUATION.run_condition(
        FlowContext.of("i-1", {"r": {"rule": Rule()}}), "r.rule.limit() == 3"
    )


def test_ordinary_integers_in_a_long_list_compare_at_one_unit_each() -> None:
    """Comparing item by item charges a huge integer by its size, not every integer by its
    digits: 80,000 ordinary ids are searched as before."""
    data = {"ids": [10**12 + i for i in range(80_000)], "x": 5}
    ctx = FlowContext.of("i-1", data)
    assert EVALUATION.run_condition(ctx, "x not in ids and ids.count(x) == 0")


def test_an_operation_budget_charges_nested_work_once_and_never_refunds_it() -> None:
    from flow._expression.limits import METER, OperationBudget

    costly = "([1] * 20000).count(2) == 0"
    with OperationBudget():
        EVALUATION.run_condition(FlowContext.of("i-1"), costly)
        one = 10_000_000 - METER.operation_left
        with OperationBudget():  # task code running another operation
            EVALUATION.run_condition(FlowContext.of("i-2"), costly)
        assert 10_000_000 - METER.operation_left == 2 * one  # kept, not refunded

        class Nested:
            def check(self) -> bool:  # application code evaluating from an expression
                return bool(EVALUATION.run_condition(FlowContext.of("i-3"), costly))

        before = METER.operation_left
        EVALUATION.run_condition(FlowContext.of("i-4", {"h": Nested()}), f"h.check() and {costly}")
        assert before - METER.operation_left <= 2 * one + 10  # each unit charged once
    assert METER.operation_left is None
