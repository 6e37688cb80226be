"""Translation of the solon-flow (SnEL) operators into Python, done on tokens.

Graph text written for the Java engine uses ``&&``, ``||``, ``!``, ``AND``/``OR``/``NOT`` and
``null``/``true``/``false``. Rewriting them on :mod:`tokenize` tokens rather than with text
substitution leaves string literals and attribute names (``x.null``) untouched.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

from flow.errors import ExpressionError

_NAME_WORDS = {
    "AND": " and ",
    "OR": " or ",
    "NOT": " not ",
    "null": "None",
    "true": "True",
    "false": "False",
}
_DOUBLED = {"&": " and ", "|": " or "}
_CANDIDATE = re.compile(r"[&|!~]|\b(?:AND|OR|NOT|null|true|false)\b")
# Python 3.12+ tokenizes an f-string's parts (3.11: one STRING token, never translated).
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def translate(text: str, *, original: str | None = None) -> str:
    """Rewrite ``&&  ||  !x  AND OR NOT  null true false`` into Python; strings are untouched.

    ``!`` becomes ``~`` (same precedence as Java's ``!``) and the compiler reads ``~`` as logical
    not, which is why a ``~`` written by the user is rejected. Raises :class:`ExpressionError`
    naming ``original`` (default ``text``).
    """
    original = text if original is None else original
    if _CANDIDATE.search(text) is None:
        return text  # nothing to translate: skip the (slow) tokenizer
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ExpressionError(f"Incomplete expression: {exc}", expression=original) from None
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    previous: tokenize.TokenInfo | None = None
    in_fstring = 0
    for index, token in enumerate(tokens):
        if token.type == _FSTRING_START:
            in_fstring += 1
        elif token.type == _FSTRING_END:
            in_fstring -= 1
        # Inside an f-string nothing is translated, on every Python (its `!r` stays).
        edit = None if in_fstring else _replacement(tokens, index, previous, original)
        if edit is not None:
            edits.append((token.start, *edit))
        if token.type not in (tokenize.ERRORTOKEN, tokenize.NL, tokenize.COMMENT):
            previous = token
    return _apply(text, edits)


def _replacement(
    tokens: Sequence[tokenize.TokenInfo],
    index: int,
    previous: tokenize.TokenInfo | None,
    text: str,
) -> tuple[tuple[int, int], str] | None:
    """The end of the replaced span and its new text, for a token that needs translating."""
    token = tokens[index]
    string = token.string
    if token.type == tokenize.NAME:
        after_dot = previous is not None and previous.string == "."
        word = None if after_dot else _NAME_WORDS.get(string)
        return None if word is None else (token.end, word)
    if string == "!" and token.type in (tokenize.ERRORTOKEN, tokenize.OP):
        # Python 3.11's tokenizer has no "!" operator (ERRORTOKEN); 3.12's has (OP).
        return token.end, "~"
    if token.type == tokenize.OP and string == "~":
        raise ExpressionError("Operator '~' is not supported (use '!' or 'not')", expression=text)
    if token.type == tokenize.OP and string in _DOUBLED:
        follower = tokens[index + 1]
        if follower.string == string and follower.start == token.end:
            return follower.end, _DOUBLED[string]
    return None


def _apply(text: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    """Apply non-overlapping edits (each within one line) in one pass: linear in the text."""
    lines = text.splitlines(keepends=True)
    skip_until: tuple[int, int] = (0, 0)
    pieces: list[str] = []
    row_done, column_done = 1, 0
    for (row, start), end, replacement in edits:
        if (row, start) < skip_until:
            continue
        skip_until = end
        while row_done < row:
            pieces.append(lines[row_done - 1][column_done:])
            row_done, column_done = row_done + 1, 0
        pieces.append(lines[row - 1][column_done:start])
        pieces.append(replacement)
        column_done = end[1]
    while row_done <= len(lines):
        pieces.append(lines[row_done - 1][column_done:])
        row_done, column_done = row_done + 1, 0
    return "".join(pieces)
