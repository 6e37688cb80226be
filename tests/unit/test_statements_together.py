"""How statements sent together are split into queries (no server needed): a query carries
statements while their sizes (text and parameters, in characters) stay within
``TOGETHER_CHARS``; a statement larger than that goes alone, and none is ever split, dropped
or reordered."""

from __future__ import annotations

from flow_sqla._prepared import TOGETHER_CHARS, query_ends

_SMALL = 300
_LARGE = TOGETHER_CHARS - 100


def test_small_statements_go_in_one_query() -> None:
    assert query_ends([_SMALL, _SMALL, _SMALL]) == [3]


def test_a_statement_that_would_overflow_the_query_starts_the_next_one() -> None:
    assert query_ends([_SMALL, _LARGE, _SMALL]) == [1, 2, 3]
    assert query_ends([_LARGE, _SMALL]) == [1, 2]


def test_statements_right_up_to_the_limit_share_a_query() -> None:
    assert query_ends([TOGETHER_CHARS - 1, 1]) == [2]
    assert query_ends([TOGETHER_CHARS - 1, 2]) == [1, 2]


def test_a_statement_larger_than_the_limit_goes_alone() -> None:
    huge = 3 * TOGETHER_CHARS
    assert query_ends([huge]) == [1]
    assert query_ends([_SMALL, huge, huge, _SMALL, _SMALL]) == [1, 2, 3, 5]


def test_no_statements_make_no_query() -> None:
    assert query_ends([]) == []
