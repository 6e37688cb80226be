"""Aligned plain-text tables for terminal output (wide CJK characters count double).

Cells come from the database, which other writers share (a Go service, an app's own SQL):
control characters in them are shown escaped, never sent to the terminal, where an escape
sequence could clear the screen or repaint what the table says.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Sequence

from flow._text import escape_controls

MAX_CELL = 48


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: East Asian wide/full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def printable(text: str) -> str:
    """``text`` on one line (runs of whitespace become one space) with control characters
    escaped (``\\x1b``, ``\\u202e``)."""
    return escaped(" ".join(text.split()))


def escaped(text: str) -> str:
    """``text`` with every control, line-separating or bidi character escaped, whitespace
    otherwise kept: an id is shown as it is (the renderers escape the same way)."""
    return escape_controls(text)


def _clip(text: str, limit: int | None) -> str:
    """A cell: whole (``limit`` None: escaped only) or on one line, cut to ``limit``."""
    if limit is None:
        return escaped(text)
    text = printable(text)
    if display_width(text) <= limit:
        return text
    out = ""
    for ch in text:
        if display_width(out + ch) > limit - 1:
            break
        out += ch
    return out + "…"


def _pad(text: str, width: int) -> str:
    return text + " " * (width - display_width(text))


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    max_cell: int = MAX_CELL,
    whole: Collection[int] = (0,),
) -> str:
    """``headers`` and ``rows`` as aligned columns with a rule under the header.

    ``None`` cells print as ``-``; every cell is folded to one line and clipped to
    ``max_cell``, except in the columns ``whole`` (by index; default the first, which holds
    the ids a user copies into the next command).
    """
    cells = [
        [
            _clip("-" if value is None else str(value), None if i in whole else max_cell)
            for i, value in enumerate(row)
        ]
        for row in rows
    ]
    widths = [display_width(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], display_width(cell))
    lines = [
        "  ".join(_pad(h, w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += [
        "  ".join(_pad(c, w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)
