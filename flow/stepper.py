"""Range texts for loop nodes (``$in: "1...5"`` or ``"0:10:2"``), as the reference's ``Stepper``."""

from __future__ import annotations


def parse_range(text: str) -> range:
    """Parse ``"a...b"`` (step 1) or ``"a:b:step"`` into a ``range`` with the end excluded.

    ``"5...1"`` is empty. Raises ``ValueError`` when the text has another shape, a bound is not
    an integer, or the step is not positive.
    """
    source = text.strip()
    if "..." in source:
        head, _, tail = source.partition("...")
        if not head.strip():
            raise ValueError(f"range {text!r}: missing start before '...'")
        start, end, step = _int(text, head), _int(text, tail), 1
    else:
        parts = source.split(":")
        if len(parts) != 3:
            raise ValueError(f"range {text!r}: expected 'start...end' or 'start:end:step'")
        start, end, step = (_int(text, part) for part in parts)
    if step <= 0:
        raise ValueError(f"range {text!r}: step must be > 0, got {step}")
    return range(start, end, step)


def _int(text: str, part: str) -> int:
    try:
        return int(part.strip())
    except ValueError:
        raise ValueError(f"range {text!r}: {part.strip()!r} is not an integer") from None


__all__ = ["parse_range"]
