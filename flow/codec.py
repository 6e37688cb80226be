"""JSON codec for context values that plain JSON cannot hold.

Snapshots (``FlowContext.to_json``) and the ``vars``/``variables`` columns of ``flow_sqla``
store context data as JSON. Values JSON has no type for are written as one-key *tagged*
objects and read back as the original type:

==============================  ==========================================  ================
Python value                    encoded as                                  decoded as
==============================  ==========================================  ================
``datetime``                    ``{"$datetime": "2026-01-02T03:04:05+00:00"}``  ``datetime``
``date``                        ``{"$date": "2026-01-02"}``                 ``date``
``time``                        ``{"$time": "03:04:05"}``                   ``time``
``Decimal``                     ``{"$decimal": "1.50"}``                    ``Decimal``
``UUID``                        ``{"$uuid": "…"}``                          ``UUID``
``Enum`` member                 its ``.value`` (when representable)         the plain value
``tuple``                       a list                                      ``list``
``None``/bool/int/float/str     themselves                                  themselves
``list``/``dict`` (str keys)    encoded item by item                        ``list``/``dict``
==============================  ==========================================  ================

**User dicts never pass for tags.** A dict with exactly one key that starts with ``$`` (say a
form value ``{"$decimal": "approx. 12 EUR"}``) is written inside an escape object,
``{"$dict": {"$decimal": "approx. 12 EUR"}}``, and read back as the very same dict. Every
one-key ``$`` name is reserved that way, so tags added later cannot capture older data either.
Reading stays lenient for rows written before the escape existed: a tag whose text does not
parse is read as the plain dict it was.

With ``plain_json=True`` dates, times, decimals and UUIDs are written as plain strings instead
(ISO 8601 / the exact decimal text) — readable by services that know no tags, read back as
``str``.

Writing is bounded (:class:`CodecLimits`): nesting depth (which also stops cyclic
structures), digits of an integer and the size of the encoded JSON. Anything else that cannot
be represented — sets, bytes, arbitrary objects, non-string keys, ``NaN``/``inf``, text with
lone surrogates — raises :class:`~flow.errors.ContextValueError` naming the key path of the
offending value, so a caller knows which context entry to fix.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import Enum
from functools import lru_cache
from typing import Any
from uuid import UUID

from flow._text import safe_repr
from flow.errors import ContextValueError, SnapshotError

#: The key of the escape object that wraps a user dict whose only key starts with ``$``.
ESCAPE_KEY = "$dict"

_DECODERS: dict[str, Callable[[str], Any]] = {
    "$datetime": datetime.fromisoformat,
    "$date": date.fromisoformat,
    "$time": time.fromisoformat,
    "$decimal": Decimal,
    "$uuid": UUID,
}

#: Exact types :func:`encode` returns unchanged after (cheap) checks: ``str`` for lone
#: surrogates, ``int`` for its digits. Subclasses such as ``IntEnum`` members take the full path.
PLAIN_TYPES: frozenset[type] = frozenset({str, int, bool, type(None)})


_SURROGATE = re.compile("[\ud800-\udfff]")
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_MAX_DEPTH_CAP = 200


@dataclass(frozen=True, kw_only=True)
class CodecLimits:
    """Bounds on what :func:`encode` writes (see ``docs/limits.md``).

    ``max_depth``: lists/objects nested in one encoded value, tag and escape objects included
    (30 keeps a ``vars`` document within MariaDB's JSON depth of 32, which counts the object
    itself and the scalar leaves as levels; a cyclic structure hits it at once).
    ``max_int_digits``: decimal digits of an integer (Python's own int/str limit).
    ``max_bytes``: UTF-8 size of the compact JSON of one encoded document (a variable set or a
    snapshot). Raises ``ValueError`` for a limit below 1 or a depth above 200 (deeper would
    reach Python's recursion limit).
    """

    max_depth: int = 30
    max_int_digits: int = 4300
    max_bytes: int = 1_048_576

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_int_digits", "max_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(
                    f"CodecLimits.{name} must be a positive int, got {safe_repr(value)}"
                )
        if self.max_depth > _MAX_DEPTH_CAP:
            raise ValueError(f"CodecLimits.max_depth must be at most {_MAX_DEPTH_CAP}")


DEFAULT_LIMITS = CodecLimits()


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a surrogate code point (not valid Unicode, not storable)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


@lru_cache(maxsize=8)
def _int_bound(digits: int) -> int:
    bound: int = 10**digits
    return bound


def too_long_for_text(value: int) -> bool:
    """Whether Python refuses to turn ``value`` into decimal text: more digits than
    ``sys.get_int_max_str_digits()`` (4,300 unless the process changed it; 0: no limit).
    The bit length is the cheap test (3 bits per digit is less than log2(10))."""
    digits = sys.get_int_max_str_digits()
    return digits > 0 and value.bit_length() > 3 * digits and abs(value) >= _int_bound(digits)


def int_text_limit() -> str:
    """Python's limit on the decimal digits of an integer turned into text, as messages say it
    (``"4,300"``): the one :func:`too_long_for_text` applies."""
    return f"{sys.get_int_max_str_digits():,}"


def fast_int_bound(limits: CodecLimits) -> int:
    """A bound whose inside needs no digit count: ``10**min(18, max_int_digits)``."""
    return _int_bound(min(18, limits.max_int_digits))


def json_size(doc: Any) -> int:
    """UTF-8 bytes of the compact JSON text of ``doc`` (an encoded, surrogate-free value)."""
    return len(_COMPACT.encode(doc).encode("utf-8"))


class Encoder:
    """One encoding pass: the walk, plus an upper bound of the output's JSON size.

    The bound lets :meth:`check_size` skip serializing when the document is clearly small.
    """

    __slots__ = ("estimate", "fast_int", "limits", "plain_json")

    def __init__(self, limits: CodecLimits = DEFAULT_LIMITS, *, plain_json: bool = False) -> None:
        self.limits = limits
        self.plain_json = plain_json
        self.estimate = 2
        #: Integers strictly inside ``±fast_int`` are within the digit limit.
        self.fast_int = fast_int_bound(limits)

    def value(self, value: Any, path: str, depth: int = 0) -> Any:
        """The JSON-ready form of ``value`` found at ``path``, ``depth`` containers deep."""
        kind = type(value)
        if kind is str:
            return self._str(value, path)
        if kind is int:
            return self._int(value, path)
        if kind is bool or value is None:
            self.estimate += 6
            return value
        if kind is dict:
            return self._mapping(value, path, depth)
        if kind is list:
            return self._list(value, path, depth)
        if kind is float:
            return self._float(value, path)
        if isinstance(value, Enum):
            return self.value(value.value, path, depth)
        if isinstance(value, bool):
            self.estimate += 6
            return bool(value)
        if isinstance(value, int):
            return self._int(value, path)
        if isinstance(value, str):
            return self._str(value, path)
        if isinstance(value, float):
            return self._float(value, path)
        if isinstance(value, datetime | date | time | Decimal | UUID):
            return self._typed(value, path, depth)
        if isinstance(value, list | tuple):
            return self._list(value, path, depth)
        if isinstance(value, Mapping):
            return self._mapping(value, path, depth)
        raise ContextValueError(f"{path}: value of type {kind.__name__} is not representable")

    def _float(self, value: float, path: str) -> float:
        if not math.isfinite(value):
            raise ContextValueError(f"{path}: non-finite float {value!r} is not JSON")
        self.estimate += 26
        return float(value)

    def _list(self, value: list[Any] | tuple[Any, ...], path: str, depth: int) -> list[Any]:
        self._enter(path, depth)
        self.estimate += 2 + len(value)
        return [self.value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]

    def _str(self, value: str, path: str) -> str:
        if has_lone_surrogate(value):
            raise ContextValueError(f"{path}: text with a lone surrogate is not valid Unicode")
        self.estimate += 6 * len(value) + 3
        return value

    def _int(self, value: int, path: str) -> int:
        if not -self.fast_int < value < self.fast_int:
            digits = self.limits.max_int_digits
            python_limit = sys.get_int_max_str_digits()
            if python_limit:
                digits = min(digits, python_limit)
            if abs(value) >= _int_bound(digits):
                raise ContextValueError(f"{path}: integer with more than {digits} digits")
            self.estimate += digits + 2
        else:
            self.estimate += 21
        return int(value)

    def _typed(self, value: Any, path: str, depth: int) -> Any:
        if isinstance(value, datetime) and _fractional_offset(value):
            # ``fromisoformat`` drops an offset's microseconds: store the same instant in UTC.
            value = value.astimezone(UTC)
        text = value.isoformat() if isinstance(value, datetime | date | time) else str(value)
        self.estimate += len(text) + 3
        if self.plain_json:
            return text
        self._enter(path, depth)
        self.estimate += 14
        tag = (
            "$datetime"
            if isinstance(value, datetime)
            else "$date"
            if isinstance(value, date)
            else "$time"
            if isinstance(value, time)
            else "$decimal"
            if isinstance(value, Decimal)
            else "$uuid"
        )
        return {tag: text}

    def _mapping(self, value: Mapping[Any, Any], path: str, depth: int) -> dict[str, Any]:
        escape = len(value) == 1 and _reserved(next(iter(value)))
        if escape:  # one more level: the escape object around the user's dict
            self._enter(path, depth)
            depth += 1
            self.estimate += 10
        self._enter(path, depth)
        self.estimate += 2
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ContextValueError(f"{path}: key {safe_repr(key)} is not a string")
            if has_lone_surrogate(key):
                raise ContextValueError(f"{path}: key {safe_repr(key)} is not valid Unicode text")
            self.estimate += 6 * len(key) + 4
            out[key] = self.value(item, f"{path}.{key}", depth + 1)
        return {ESCAPE_KEY: out} if escape else out

    def _enter(self, path: str, depth: int) -> None:
        if depth >= self.limits.max_depth:
            raise ContextValueError(
                f"{path}: nested deeper than {self.limits.max_depth} levels (or cyclic)"
            )

    def check_size(self, doc: Any, what: str) -> None:
        """Raise :class:`ContextValueError` when ``doc`` (this pass's output) encodes to more
        than ``max_bytes``; serializes only when the running estimate says it might."""
        limit = self.limits.max_bytes
        if self.estimate > limit and (size := json_size(doc)) > limit:
            raise ContextValueError(f"{what}: {size} bytes of JSON exceed the limit of {limit}")


def _fractional_offset(value: datetime) -> bool:
    offset = value.utcoffset()
    return offset is not None and offset.microseconds != 0


def _reserved(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("$")


def encode(
    value: Any,
    path: str = "$",
    *,
    limits: CodecLimits = DEFAULT_LIMITS,
    plain_json: bool = False,
) -> Any:
    """Return a JSON-ready form of ``value``; raises :class:`ContextValueError` (also a
    ``TypeError``) naming ``path`` when it cannot be represented within ``limits``."""
    encoder = Encoder(limits, plain_json=plain_json)
    out = encoder.value(value, path)
    encoder.check_size(out, path)
    return out


def decode(data: Any) -> Any:
    """Reverse :func:`encode`: tagged objects become their Python values again, escaped dicts
    their plain selves. Raises :class:`SnapshotError` for data nested too deeply to walk."""
    try:
        return _decode(data)
    except RecursionError:
        raise SnapshotError("Stored value is nested too deeply to decode") from None


def decode_variables(data: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`decode` for a stored variables object (``vars``, a history row's
    ``variables``, a snapshot's ``vars``): each value is decoded, the object itself never is.
    Its keys are variable names, written as they are — a variable named ``$decimal`` or
    ``$dict`` is a name, not a tag. Raises :class:`SnapshotError` like :func:`decode`."""
    try:
        return {key: _decode(item) for key, item in data.items()}
    except RecursionError:
        raise SnapshotError("Stored value is nested too deeply to decode") from None


def _decode(data: Any) -> Any:
    if isinstance(data, list):
        return [_decode(item) for item in data]
    if isinstance(data, dict):
        if len(data) == 1:
            ((key, inner),) = data.items()
            if key == ESCAPE_KEY and isinstance(inner, dict):
                return {k: _decode(v) for k, v in inner.items()}
            decoder = _DECODERS.get(key)
            if decoder is not None and isinstance(inner, str):
                try:
                    return decoder(inner)
                except (ValueError, ArithmeticError):
                    return data  # a user dict written before escaping existed
        return {key: _decode(item) for key, item in data.items()}
    return data


def is_representable(value: Any, *, limits: CodecLimits = DEFAULT_LIMITS) -> bool:
    """True when :func:`encode` accepts ``value``."""
    try:
        encode(value, limits=limits)
    except ContextValueError:
        return False
    return True


__all__ = [
    "DEFAULT_LIMITS",
    "ESCAPE_KEY",
    "PLAIN_TYPES",
    "CodecLimits",
    "Encoder",
    "decode",
    "decode_variables",
    "encode",
    "fast_int_bound",
    "has_lone_surrogate",
    "is_representable",
    "json_size",
    "too_long_for_text",
]
