"""Range texts of loop nodes (``$in``), as the reference's Stepper reads them."""

from __future__ import annotations

import pytest

from flow import parse_range


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("1...5", [1, 2, 3, 4]),
        ("0:10:3", [0, 3, 6, 9]),
        (" 1 ... 3 ", [1, 2]),
        ("5...1", []),
        ("3...3", []),
        ("-2...1", [-2, -1, 0]),
    ],
)
def test_range_text_gives_items_with_end_excluded(text: str, items: list[int]) -> None:
    assert list(parse_range(text)) == items


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1:5:0", "step must be > 0"),
        ("1:5:-1", "step must be > 0"),
        ("1:5", "expected"),
        ("1:2:3:4", "expected"),
        ("a...5", "not an integer"),
        ("1...x", "not an integer"),
        ("...5", "missing start"),
        ("1.5:3:1", "not an integer"),
    ],
)
def test_bad_range_text_raises_value_error_saying_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_range(text)
