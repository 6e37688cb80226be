"""JSON codec for context values that plain JSON cannot hold.

Snapshots (``FlowContext.to_json``) and the ``vars`` column of ``flow_sqla`` store context data
as JSON. Values JSON has no type for are written as one-key tagged objects and read back as the
original type:

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

Anything else (sets, bytes, arbitrary objects, non-string keys) raises ``TypeError`` naming the
key path of the offending value, so a caller knows which context entry to fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

_DECODERS: dict[str, Callable[[str], Any]] = {
    "$datetime": datetime.fromisoformat,
    "$date": date.fromisoformat,
    "$time": time.fromisoformat,
    "$decimal": Decimal,
    "$uuid": UUID,
}


#: Exact types :func:`encode` returns unchanged without further checks (subclasses such as
#: ``IntEnum`` members are not among them and take the full path).
PLAIN_TYPES: frozenset[type] = frozenset({str, int, bool, type(None)})


def encode(value: Any, path: str = "$") -> Any:
    """Return a JSON-ready form of ``value``; raises ``TypeError`` naming ``path`` otherwise."""
    if type(value) in PLAIN_TYPES:
        return value
    if isinstance(value, Enum):
        return encode(value.value, path)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise TypeError(f"{path}: non-finite float {value!r} is not representable in JSON")
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, time):
        return {"$time": value.isoformat()}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, UUID):
        return {"$uuid": str(value)}
    if isinstance(value, list | tuple):
        return [encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        return _encode_mapping(value, path)
    raise TypeError(f"{path}: value of type {type(value).__name__} is not representable in JSON")


def _encode_mapping(value: Mapping[Any, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"{path}: key {key!r} is not a string")
        out[key] = encode(item, f"{path}.{key}")
    return out


def decode(data: Any) -> Any:
    """Reverse :func:`encode`: tagged objects become their Python values again.

    Raises ``ValueError`` when a tagged object holds text that its type cannot parse.
    """
    if isinstance(data, list):
        return [decode(item) for item in data]
    if isinstance(data, dict):
        if len(data) == 1:
            ((key, text),) = data.items()
            decoder = _DECODERS.get(key)
            if decoder is not None and isinstance(text, str):
                try:
                    return decoder(text)
                except (ValueError, ArithmeticError) as exc:
                    raise ValueError(f"bad {key} value {text!r}") from exc
        return {key: decode(item) for key, item in data.items()}
    return data


def is_representable(value: Any) -> bool:
    """True when :func:`encode` accepts ``value``."""
    try:
        encode(value)
    except TypeError:
        return False
    return True


__all__ = ["PLAIN_TYPES", "decode", "encode", "is_representable"]
