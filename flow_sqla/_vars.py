"""Which context variables are stored, and how they are encoded into a JSON column.

Shared by the state repository (``vars``) and the history recorder (``variables``), so both
columns hold the same shape. Three kinds of entries:

* **left out, always**: ``instanceId``, ``context``, ``WorkflowIntent``, the identity keys
  (``actor``, ``auditor``, ``creator`` by default, configurable), ``None`` values, instances of
  :class:`flow.context.NonSerializable` and *opaque objects* — values that are not plain data
  (services, sessions, callables, class instances). They are left out like
  ``FlowContext.to_json`` leaves them out.
* **stored through** :mod:`flow.codec`: JSON scalars, lists, tuples, string-keyed dicts,
  ``datetime``/``date``/``time``, ``Decimal``, ``UUID`` and enum members (stored as their value).
* **rejected**: data the codec cannot represent — ``bytes``, sets, ``timedelta``, numbers
  other than ``int``/``float``/``Decimal`` (``complex``, ``Fraction``), ``NaN``/``inf``, dicts with
  non-string keys, text with lone surrogates, containers holding anything unrepresentable —
  and data past the codec's limits (nesting depth and cycles, integer digits, document size).
  Such a value raises :class:`~flow.errors.ContextValueError` (a ``SnapshotError``) naming the
  instance and the key *before* anything is written; it is never silently stringified or
  dropped.
"""

from __future__ import annotations

import enum
import numbers
import re
from collections.abc import Iterable, Mapping
from datetime import date, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from flow import codec
from flow._text import safe_repr
from flow.context import NonSerializable
from flow.errors import ContextValueError, SnapshotError
from flow_sqla import _options as options
from flow_sqla._rows import parse_vars

#: Keys that are never stored whatever the configuration: the id, the context itself and the
#: executor's per-call intent.
ALWAYS_EXCLUDED: frozenset[str] = frozenset({"instanceId", "context", "WorkflowIntent"})

#: Identity keys left out by default (the ``vars_filter`` default): who acts is a property of
#: the request, not of the instance, and must not flow back into the next actor's context.
DEFAULT_IDENTITY_KEYS: frozenset[str] = frozenset({"actor", "auditor", "creator"})

_DATA_TYPES: tuple[type, ...] = (
    bool,
    int,
    float,
    str,
    bytes,
    bytearray,
    memoryview,
    list,
    tuple,
    set,
    frozenset,
    Mapping,
    date,
    time,
    Decimal,
    UUID,
    enum.Enum,
    # Values of business data the codec has no form for: refused like bytes or sets, never
    # left out as an opaque object would be (a stored ``waited = decided - submitted`` read
    # back as null and routed the next request another way).
    timedelta,
    numbers.Number,  # complex, Fraction, other numeric types
)


class VarsPolicy:
    """The set of keys never stored, plus the encode/decode of one ``vars`` document.

    ``limits`` bound what is written (:class:`flow.codec.CodecLimits`); ``plain_json`` writes
    dates, times, decimals and UUIDs as plain strings (they read back as ``str``).
    """

    __slots__ = ("_fast_int", "excluded", "limits", "plain_json")

    def __init__(
        self,
        identity_keys: Iterable[str] | None = None,
        *,
        limits: codec.CodecLimits | None = None,
        plain_json: bool = False,
    ) -> None:
        keys = options.context_keys("vars_filter", identity_keys)
        self.excluded: frozenset[str] = ALWAYS_EXCLUDED | (
            DEFAULT_IDENTITY_KEYS if keys is None else keys
        )
        self.limits: codec.CodecLimits = (
            options.optional("limits", limits, codec.CodecLimits) or codec.DEFAULT_LIMITS
        )
        self.plain_json = options.flag("plain_json", plain_json)
        self._fast_int = codec.fast_int_bound(self.limits)

    def encode(self, instance_id: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON-ready form of the storable entries of ``data``.

        Raises :class:`ContextValueError` naming ``instance_id`` and the key when a data value
        cannot be represented within the limits, or the whole document is too large.
        """
        out: dict[str, Any] = {}
        excluded = self.excluded
        encoder: codec.Encoder | None = None
        chars = 0  # characters of the plain text values, for the size bound
        fast_int = self._fast_int
        for key, value in data.items():
            if value is None or key in excluded:
                continue
            kind = type(value)
            if type(key) is str:  # the common cases, stored as they are
                if kind is str:
                    if value.isascii() or _SURROGATE.search(value) is None:
                        out[key] = value
                        chars += len(value)
                        continue
                elif kind is bool or (kind is int and -fast_int < value < fast_int):
                    out[key] = value
                    continue
            if not _is_data(value):
                continue
            if encoder is None:
                encoder = codec.Encoder(self.limits, plain_json=self.plain_json)
            out[key] = self._entry(encoder, instance_id, key, value)
        if not all(map(str.isascii, out)):  # keys of the common cases, checked at once
            for key in out:
                self._check_key(instance_id, key)
        self._check_size(instance_id, out, chars, encoder)
        return out

    def _check_size(
        self, instance_id: str, out: dict[str, Any], chars: int, encoder: codec.Encoder | None
    ) -> None:
        """Raise when ``out`` takes more than ``max_bytes`` of JSON; serializes only when an
        upper bound (6 bytes a character, 30 an entry besides its key) says it might."""
        limit = self.limits.max_bytes
        bound = 6 * (chars + sum(map(len, out))) + 30 * len(out) + 2
        if encoder is not None:
            bound += encoder.estimate
        if bound > limit and (exact := codec.json_size(out)) > limit:
            raise ContextValueError(
                f"The stored variables take {exact} bytes of JSON, over the limit of {limit}",
                instance_id=instance_id,
            )

    @staticmethod
    def _check_key(instance_id: str, key: Any) -> None:
        if not isinstance(key, str) or codec.has_lone_surrogate(key):
            raise ContextValueError(
                f"Context variable {safe_repr(key)} cannot be stored: keys must be strings of valid"
                " Unicode text",
                instance_id=instance_id,
            )

    def _entry(self, encoder: codec.Encoder, instance_id: str, key: Any, value: Any) -> Any:
        """One variable's encoded value; the key must be valid text."""
        self._check_key(instance_id, key)
        try:
            return encoder.value(value, key)
        except ContextValueError as exc:
            raise ContextValueError(
                f"Context variable {safe_repr(key)} cannot be stored: {exc}",
                instance_id=instance_id,
            ) from None

    def check(self, instance_id: str, data: Mapping[str, Any]) -> None:
        """Raise :class:`ContextValueError` as :meth:`encode` would, without building its
        result.

        Runs at every state change (so a bad value is rejected before anything is written),
        hence the shortcut: a context whose values are all plain scalars or opaque objects
        needs no per-entry look here. What can still be wrong with those — text with lone
        surrogates, integers past the digit limit, keys that are not valid text — and the size
        of the whole document are checked by :meth:`encode`, which the repository and the
        history recorder both run before their statement."""
        if _NEVER_REJECTED.issuperset(map(type, data.values())):
            return
        if not all(_never_rejected(kind) for kind in set(map(type, data.values()))):
            self.encode(instance_id, data)

    def decode(self, instance_id: str, raw: Any) -> dict[str, Any]:
        """The Python values of a stored ``vars`` document (``None`` reads as empty).

        Identity keys written by other implementations are dropped so they never overwrite the
        current actor. Raises :class:`SnapshotError` when ``raw`` is not an object or is nested
        too deeply to walk.
        """
        try:
            values = codec.decode_variables(parse_vars(instance_id, raw))
        except SnapshotError as exc:
            if exc.instance_id is not None:
                raise
            raise SnapshotError(str(exc), instance_id=instance_id) from None
        excluded = self.excluded
        return {k: v for k, v in values.items() if k not in excluded and v is not None}


_SURROGATE = re.compile("[\ud800-\udfff]")

#: Value types :meth:`VarsPolicy.check` leaves to :meth:`VarsPolicy.encode` (grows as it
#: learns): the plain scalars, whose few failure modes ``encode`` checks before any write,
#: and opaque objects, which are never stored.
_NEVER_REJECTED: set[type] = set(codec.PLAIN_TYPES)


def _never_rejected(kind: type) -> bool:
    """True for a type whose values need no walk at a state change: the plain scalars and
    opaque objects (remembered); false for floats (NaN), containers and every other type the
    codec looks into."""
    if kind in _NEVER_REJECTED:
        return True
    if issubclass(kind, NonSerializable) or not issubclass(kind, _DATA_TYPES):
        _NEVER_REJECTED.add(kind)
        return True
    return False


def _is_data(value: Any) -> bool:
    """Plain data (stored or rejected) as opposed to an opaque object (left out)."""
    if isinstance(value, NonSerializable):
        return False
    return isinstance(value, _DATA_TYPES)


__all__ = [
    "ALWAYS_EXCLUDED",
    "DEFAULT_IDENTITY_KEYS",
    "VarsPolicy",
]
