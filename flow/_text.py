"""Text from graphs and databases shown to people, and checked before it is kept.

Titles, ids and conditions come from files and tables other people write. Two things about
such text matter wherever it goes: it must be valid Unicode (a lone surrogate cannot be
written to UTF-8 — not to JSON, a database or a terminal), and a control character in it must
never reach a terminal raw, where an escape sequence clears the screen, retitles the window or
repaints what the output says. The renderers and the CLI share :func:`escape_controls`.
"""

from __future__ import annotations

import unicodedata

#: Characters that reorder the text around them on screen (bidirectional embeddings,
#: overrides and isolates): escaped like the control characters.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def is_unicode(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8: it holds no lone surrogate (``"\\ud800"``)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escape_controls(text: str) -> str:
    """``text`` with every control (C0, DEL, C1 — tab and newline among them), line-separating
    or bidi character written as its Python escape (``\\x1b``, ``\\t``, ``\\u202e``);
    everything else, the plain space included, kept."""
    if text.isprintable():
        return text
    return "".join(_escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    if ch in BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
        return ascii(ch)[1:-1]
    return ch


#: How many characters of a caller's value an error message quotes.
SHOWN_CHARS = 200


def safe_repr(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message about a caller's value: at most ``limit``
    characters (then ``...``), and ``<typename>`` when ``repr`` itself fails.

    The value is often the problem being reported — an integer past Python's digit limit
    (whose ``repr`` raises ``ValueError``), an object whose ``__repr__`` raises, a 10 MB
    string — and building the error must never raise in its place nor copy megabytes.
    """
    if type(value) is str and len(value) > limit:
        return f"{value[:limit]!r}..."
    try:
        text = repr(value)
    except Exception:  # whatever a caller's __repr__ raises: the error is about the value
        return f"<{_type_name(value)}>"
    return text if len(text) <= limit else f"{text[:limit]}..."


def _type_name(value: object) -> str:
    """The name of ``value``'s type; ``object`` if even that is unreadable (a metaclass of
    the caller's may define ``__name__``)."""
    try:
        name = type(value).__name__
    except Exception:
        return "object"
    return name if type(name) is str else "object"
