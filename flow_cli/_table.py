"""Aligned plain-text tables for terminal output (wide CJK characters count double)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

MAX_CELL = 48


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: East Asian wide/full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())  # one line per row, whatever the cell holds
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
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, max_cell: int = MAX_CELL
) -> str:
    """``headers`` and ``rows`` as aligned columns with a rule under the header.

    ``None`` cells print as ``-``; every cell is folded to one line and clipped to ``max_cell``.
    """
    cells = [
        [_clip("-" if value is None else str(value), max_cell) for value in row] for row in rows
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
