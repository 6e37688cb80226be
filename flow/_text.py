"""Text from graphs and databases shown to people, and checked before it is kept.

Titles, ids and conditions come from files and tables other people write. Two things about
such text matter wherever it goes: it must be valid Unicode (a lone surrogate cannot be
written to UTF-8 — not to JSON, a database or a terminal), and a control character in it must
never reach a terminal raw, where an escape sequence clears the screen, retitles the window or
repaints what the output says.
"""

from __future__ import annotations


def is_unicode(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8: it holds no lone surrogate (``"\\ud800"``)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
