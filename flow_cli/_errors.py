"""The one error type the commands raise, and the one-line rendering of any error.

A command line tool is judged by its failures: every failure reaches the user as one line,
``flow: error: <what went wrong>``, with a non-zero exit code; tracebacks only with ``--debug``.
"""

from __future__ import annotations


class CliError(Exception):
    """A failure the user can act on; ``exit_code`` is 1 (runtime) or 2 (bad usage)."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        self.exit_code = exit_code
        super().__init__(message)


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` folded into one line (multi-line problem lists joined by ``;``)."""
    text = str(exc).strip() or type(exc).__name__
    parts = [part.strip().removeprefix("- ") for part in text.splitlines() if part.strip()]
    if len(parts) <= 1:
        return parts[0] if parts else text
    head = parts[0] if parts[0].endswith(":") else f"{parts[0]}:"
    return f"{head} {'; '.join(parts[1:])}"
