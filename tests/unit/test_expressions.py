"""The expression language of SafeEvaluation: conditions, task scripts, null-safety, caching."""

from __future__ import annotations

from typing import Any

import pytest

from flow._expression import compile_condition, compile_script
from flow.context import FlowContext
from flow.errors import ExpressionError, FlowError
from flow.evaluation import Evaluation, SafeEvaluation, check_condition, check_script

EVALUATION = SafeEvaluation()


def holds(expression: str, **data: Any) -> bool:
    return EVALUATION.run_condition(FlowContext.of("i-1", data), expression)


def run(script: str, **data: Any) -> FlowContext:
    ctx = FlowContext.of("i-1", data)
    EVALUATION.run_task(ctx, script)
    return ctx


@pytest.mark.parametrize(
    ("expression", "data", "expected"),
    [
        ("x > 10", {"x": 11}, True),
        ("x > 10", {"x": 10}, False),
        ("x <= 10", {"x": 10}, True),
        ("choice == 1", {"choice": 1}, True),
        ("choice == 1", {"choice": 2}, False),
        ("a > 3", {"a": 4}, True),
        ("b > 5", {"b": 5}, False),
        ("day>=3 && day<7", {"day": 3}, True),
        ("day>=3 && day<7", {"day": 7}, False),
        ("amount>=100000", {"amount": 100000}, True),
        ("option1", {"option1": True}, True),
        ("option1", {"option1": False}, False),
        ('"open".equals(status)', {"status": "open"}, True),
        ('"open".equals(status)', {"status": "closed"}, False),
        ('choice.equals("A")', {"choice": "A"}, True),
        ('"type1".equals(dataType)', {"dataType": "type2"}, False),
        ("score > 90", {"score": 95}, True),
        ("s.amount > 100 && s.amount <= 500", {"s": {"amount": 300}}, True),
        ("s.amount > 100 && s.amount <= 500", {"s": {"amount": 600}}, False),
        ("a == null", {}, True),
        ("a == null", {"a": 1}, False),
        ("a != null", {"a": 1}, True),
        ("!flag", {"flag": False}, True),
        ("!flag", {"flag": True}, False),
        ("x > 1 AND y < 2", {"x": 2, "y": 1}, True),
        ("x > 1 AND y < 2", {"x": 2, "y": 3}, False),
        ("x > 1 OR y < 2", {"x": 0, "y": 1}, True),
        ("NOT done", {"done": False}, True),
        ("a || b", {"a": False, "b": True}, True),
        ("flag == true", {"flag": True}, True),
        ("flag == false", {"flag": False}, True),
    ],
)
def test_reference_condition_forms_evaluate_as_in_solon_flow(
    expression: str, data: dict[str, Any], expected: bool
) -> None:
    assert holds(expression, **data) is expected


def test_python_syntax_works_alongside_solon_operators() -> None:
    assert holds("x > 1 and not y or z in [1, 2]", x=2, y=False, z=9)
    assert holds("'b' in tags and len(tags) == 2", tags=["a", "b"])
    assert holds("1 < x < 3 if ok else False", x=2, ok=True)


def test_bang_binds_tighter_than_comparison_as_in_java() -> None:
    assert holds("!flag == true", flag=False)


def test_and_binds_tighter_than_or() -> None:
    assert holds("a || b && c", a=True, b=False, c=False)


def test_operators_inside_string_literals_are_not_translated() -> None:
    assert holds('s == "a && !b || null AND true"', s="a && !b || null AND true")


def test_an_f_string_is_refused_alike_on_every_python() -> None:
    """Python 3.12+ tokenizes an f-string's parts: its ``!r`` must not become ``~r``, which
    would turn the refusal into a syntax error that depends on the Python version."""
    with pytest.raises(ExpressionError, match="JoinedStr is not allowed"):
        compile_condition('f"{x!r}" == "1"')


def test_keywords_after_a_dot_are_attribute_names() -> None:
    assert holds("m.null == 1 && m.AND == 2", m={"null": 1, "AND": 2})


def test_single_quoted_strings_work() -> None:
    assert holds("'open'.equals(status)", status="open")


def test_missing_name_is_none() -> None:
    assert holds("missing == null")


def test_missing_attribute_and_key_are_none() -> None:
    assert holds("s.x.y == null && s['nope'] == null && t.upper() == null", s={}, t=None)


def test_attribute_of_plain_object_is_read() -> None:
    class Order:
        amount = 7

    assert holds("order.amount == 7", order=Order())


@pytest.mark.parametrize("expression", ["a > 1", "a >= 1", "a < 1", "a <= 1", "1 < a"])
def test_ordering_with_none_is_false_instead_of_an_error(expression: str) -> None:
    assert holds(expression, a=None) is False


def test_equals_on_null_receiver_is_false() -> None:
    assert holds('status.equals("open")') is False


def test_in_on_missing_container_is_false() -> None:
    assert holds("1 in items") is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), (True, True), (False, False), (0, True), ("", True), ([], True), (2, True)],
)
def test_condition_truthiness_follows_the_reference(value: Any, expected: bool) -> None:
    assert holds("v", v=value) is expected


def test_instance_id_and_context_are_names() -> None:
    assert holds("instanceId == 'i-1' && context.get('k') == 3", k=3)


def test_multi_line_condition_is_one_expression() -> None:
    assert holds("a > 1 &&\n    b > 1", a=2, b=2)


def test_script_statements_split_on_semicolons_and_new_lines() -> None:
    ctx = run("a = 1; b = a + 1\nc = b * 2;")
    assert (ctx.get("a"), ctx.get("b"), ctx.get("c")) == (1, 2, 4)


def test_script_can_call_context_put() -> None:
    assert run('context.put("result", 111 + a)', a=1).get("result") == 112


def test_script_assignment_is_stored_with_put() -> None:
    ctx = run("x = null; y = 'v'", x=5)
    assert (ctx.get("x"), ctx.get("y")) == (5, "v")


def test_script_augmented_assignment_updates_the_variable() -> None:
    assert run("count += 2", count=1).get("count") == 3


def test_script_lines_may_be_indented() -> None:
    assert run("  a = 1\n    b = 2\n").get("b") == 2


def test_script_sees_the_node_name() -> None:
    assert run("seen = node.id", node={"id": "n1"}).get("seen") == "n1"


def test_script_can_use_str_list_and_dict_methods() -> None:
    ctx = run("m.update({'k': 1}); parts = 'a,b'.split(','); k = m.get('k')", m={})
    assert (ctx.get("parts"), ctx.get("k")) == (["a", "b"], 1)


def test_script_methods_change_data_values() -> None:
    ctx = run("items.append(name.upper()); n = ','.join(items)", items=[], name="x")
    assert ctx.get("n") == "X"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("len(s)", 3),
        ("min(1, 2)", 1),
        ("max([4, 5])", 5),
        ("abs(-2)", 2),
        ("round(2.567, 2)", 2.57),
        ("str(12)", "12"),
        ("int('7')", 7),
        ("float('1.5')", 1.5),
        ("bool(0)", False),
    ],
)
def test_builtin_functions_are_available(expression: str, expected: Any) -> None:
    assert run(f"r = {expression}", s="abc").get("r") == expected


def test_literals_of_every_collection_kind() -> None:
    ctx = run("r = [1, (2, 3), {'k': {4}}][2]['k']")
    assert ctx.get("r") == {4}


def test_syntax_error_is_an_expression_error_naming_the_text() -> None:
    with pytest.raises(ExpressionError, match="a >"):
        holds("a >")


def test_expression_error_is_a_flow_error_so_drivers_do_not_wrap_it() -> None:
    assert issubclass(ExpressionError, FlowError)


def test_empty_condition_is_rejected() -> None:
    with pytest.raises(ExpressionError):
        check_condition("   ")


def test_condition_must_be_one_expression() -> None:
    with pytest.raises(ExpressionError):
        check_condition("a = 1")


def test_ordinary_runtime_errors_propagate_unchanged() -> None:
    with pytest.raises(ZeroDivisionError):
        holds("a / 0 > 1", a=1)
    with pytest.raises(TypeError):
        run("r = 'a' + n", n=1)


def test_check_functions_compile_without_running() -> None:
    ctx = FlowContext.of("i-1")
    check_script('context.put("ran", 1)')
    check_condition("1 / 0 > 1")
    assert "ran" not in ctx


def test_check_script_rejects_bad_text() -> None:
    with pytest.raises(ExpressionError):
        check_script("a = ")


def test_compiled_form_is_cached_per_text() -> None:
    assert compile_condition("cached > 1") is compile_condition("cached > 1")
    assert compile_script("cached = 1") is compile_script("cached = 1")


def test_safe_evaluation_satisfies_the_evaluation_protocol() -> None:
    evaluation: Evaluation = SafeEvaluation()
    assert evaluation.run_condition(FlowContext.of(), "true")


def test_list_literal_is_a_fresh_list_on_every_run() -> None:
    first = run("items = [1]; items.append(2)").get("items")
    second = run("items = [1]; items.append(2)").get("items")
    assert first == second == [1, 2]
    assert first is not second


def test_java_bean_getter_reads_the_property() -> None:
    class Order:
        original_price = 150

    assert holds("order.getOriginalPrice() < 200 && order.getOriginalPrice() > 100", order=Order())
    assert holds("s.getAmount() == 5 && s.isDone()", s={"amount": 5, "done": True})


def test_host_object_methods_can_be_called() -> None:
    class Counter:
        def __init__(self) -> None:
            self.value = 0

        def increment_and_get(self) -> int:
            self.value += 1
            return self.value

    counter = Counter()
    assert holds("demo.increment_and_get() < 5", demo=counter)
    assert counter.value == 1


def test_comments_in_scripts_are_ignored() -> None:
    assert run("a = 1  # first\n# whole line\nb = 2").get("b") == 2


def test_indented_multi_line_condition_from_yaml_block() -> None:
    assert holds("  a > 1\n  && b > 1\n", a=2, b=2)
