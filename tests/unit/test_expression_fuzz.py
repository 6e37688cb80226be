"""Fuzzing the expression compiler: whatever the text, only the library's errors come out.

Compiling raises nothing but :class:`ExpressionError`; running a compiled text inside a graph
raises nothing but a :class:`FlowError` (the engine wraps the expression's own ordinary errors,
such as a division by zero, in ``TaskError``/``ConditionError``). Bounded so CI spends a few
seconds here.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flow import FlowContext, FlowEngine, Graph
from flow.errors import ExpressionError, FlowError
from flow.evaluation import check_condition, check_script

FUZZ = settings(
    max_examples=120,
    deadline=timedelta(seconds=3),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

NAMES = ["s", "n", "big", "items", "m", "d", "f", "none", "node", "context", "missing"]
METHODS = [
    "upper", "split", "join", "replace", "ljust", "zfill", "expandtabs", "translate", "count",
    "append", "extend", "update", "get", "keys", "pop", "copy", "sort", "to_bytes",
    "bit_length", "format", "maketrans", "from_file", "from_bytes", "fromkeys", "mro",
    "getGraph", "getId", "getFrom_file", "meta_get", "put", "get_node", "of", "isDone",
]  # fmt: skip
FUNCTIONS = ["len", "str", "int", "float", "round", "min", "max", "abs", "bool", "range", "open"]
ATTRIBUTES = ["id", "graph", "meta", "type", "name", "real", "start", "nodes", "_x", "__class__"]
BINARY = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "&&", "||"]
COMPARE = ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is"]

leaves = st.one_of(
    st.sampled_from(NAMES),
    st.integers(min_value=-(10**6), max_value=10**12).map(str),
    st.sampled_from(["99999", "10 ** 9", "0", "-1", "1.5", "1e308"]),
    st.text(alphabet="ab\t%{}:0", max_size=6).map(repr),
    st.sampled_from(["null", "true", "false", "[]", "{}", "()"]),
)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(BINARY), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, st.sampled_from(COMPARE), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda e: f"!({e})"),
        inner.map(lambda e: f"-({e})"),
        st.tuples(inner, st.sampled_from(METHODS), st.lists(inner, max_size=2)).map(
            lambda t: f"{t[0]}.{t[1]}({', '.join(t[2])})"
        ),
        st.tuples(st.sampled_from(FUNCTIONS), st.lists(inner, max_size=2)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"
        ),
        st.tuples(inner, st.sampled_from(ATTRIBUTES)).map(lambda t: f"{t[0]}.{t[1]}"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}:]"),
        st.lists(inner, max_size=3).map(lambda items: f"[{', '.join(items)}]"),
        st.tuples(inner, inner).map(lambda t: f"{{{t[0]}: {t[1]}}}"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
    )


expressions = st.recursive(leaves, _extend, max_leaves=12)


def _graph(task: str | None, when: str | None) -> Graph:
    link: dict[str, Any] = {"nextId": "e"}
    if when is not None:
        link["when"] = when
    return Graph.from_dict(
        {
            "id": "fuzz",
            "layout": [
                {"id": "s", "type": "start", "link": [{"nextId": "t"}]},
                {"id": "t", "task": task, "link": [{"nextId": "x"}]},
                {"id": "x", "type": "exclusive", "link": [link]},
                {"id": "e", "type": "end"},
            ],
        }
    )


def _context() -> FlowContext:
    data = {
        "s": "ab",
        "n": 7,
        "big": "x" * 1000,
        "items": [1, 2, 3],
        "m": {"k": "v"},
        "d": Decimal("1e9999"),
        "f": 1.5,
    }
    return FlowContext.of("i-1", data)


ORDINARY = (ArithmeticError, TypeError, ValueError, LookupError)
"""What a wrong-but-harmless expression may raise itself (``1 / 0``, ``'a' + 1``, ``[][0]``)."""


def _only_library_errors(graph: Graph) -> None:
    try:
        FlowEngine().eval(graph, _context())
    except ExpressionError:
        pass
    except FlowError as exc:
        assert isinstance(exc.__cause__, ORDINARY), repr(exc.__cause__)


@FUZZ
@given(st.text(max_size=120))
def test_compiling_any_text_raises_only_expression_error(text: str) -> None:
    for check in (check_condition, check_script):
        with contextlib.suppress(ExpressionError):
            check(text)


@FUZZ
@given(expressions)
def test_running_generated_expressions_raises_only_library_errors(expression: str) -> None:
    with contextlib.suppress(ExpressionError):
        check_condition(expression)
    _only_library_errors(_graph(f"r = {expression}", None))
    _only_library_errors(_graph(None, expression))
