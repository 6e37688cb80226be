"""The CLI's tables: what the database holds is shown so that no two values look alike and
nothing reaches the terminal as a control sequence."""

from __future__ import annotations

import pytest

from flow_cli._table import format_table, printable


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (" lead", " lead"),
        ("a\tb", "a\\tb"),
        ("a  b", "a  b"),
        ("line\u2028sep", "line\\u2028sep"),
        ("esc\x1b[2J", "esc\\x1b[2J"),
        ("\u061cal\u202eb", "\\u061cal\\u202eb"),
        ("i" * 64, "i" * 64),
    ],
)
def test_an_id_is_shown_whole_with_every_control_character_escaped(value: str, shown: str) -> None:
    table = format_table(("instance", "task"), [(value, "t")])
    row = table.splitlines()[2]
    assert row.startswith(shown + " ")
    assert all(ch.isprintable() for ch in table if ch != "\n")


def test_other_cells_are_one_line_cut_and_escaped() -> None:
    table = format_table(("id", "title"), [("x", "a\nb\tc " + "long " * 20 + "\x1b[31m")])
    row = table.splitlines()[2]
    assert row.startswith("x   a b c long") and row.endswith("…")
    assert printable("red\x1b[31m  text\n") == "red\\x1b[31m text"
    assert printable("👨‍👩‍👧 中文") == "👨‍👩‍👧 中文"  # joiners and wide text kept
