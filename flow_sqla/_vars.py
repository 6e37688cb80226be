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
* **rejected**: data the codec cannot represent — ``bytes``, sets, ``NaN``/``inf``, dicts with
  non-string keys, containers holding anything unrepresentable. Such a value raises
  :class:`~flow.errors.SnapshotError` naming the instance and the key *before* anything is
  written; it is never silently stringified or dropped.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import date, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from flow import codec
from flow.context import FlowContext, NonSerializable
from flow.errors import SnapshotError
from flow_sqla._rows import parse_vars

#: Keys that are never stored whatever the configuration: the id, the context itself and the
#: executor's per-call intent.
ALWAYS_EXCLUDED: frozenset[str] = frozenset({"instanceId", "context", "WorkflowIntent"})

#: Identity keys left out by default (the ``vars_filter`` default): who acts is a property of
#: the request, not of the instance, and must not flow back into the next actor's context.
DEFAULT_IDENTITY_KEYS: frozenset[str] = frozenset({"actor", "auditor", "creator"})

#: Where the default auditor looks, in order, for who writes (``creator``/``updater`` columns).
AUDIT_KEYS: tuple[str, ...] = ("auditor", "creator", "actor")


def default_auditor(ctx: FlowContext) -> str | None:
    """Who writes: the context's ``auditor``, else ``creator``, else ``actor`` (as the Go
    plugin does), as text; ``None`` when the context names nobody."""
    data = ctx.data
    for key in AUDIT_KEYS:
        value = data.get(key)
        if value is not None:
            return str(value)
    return None


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
)


class VarsPolicy:
    """The set of keys never stored, plus the encode/decode of one ``vars`` document."""

    __slots__ = ("excluded",)

    def __init__(self, identity_keys: Iterable[str] | None = None) -> None:
        keys = DEFAULT_IDENTITY_KEYS if identity_keys is None else frozenset(identity_keys)
        self.excluded: frozenset[str] = ALWAYS_EXCLUDED | keys

    def encode(self, instance_id: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON-ready form of the storable entries of ``data``.

        Raises :class:`SnapshotError` naming ``instance_id`` and the key when a data value
        cannot be represented.
        """
        out: dict[str, Any] = {}
        excluded = self.excluded
        for key, value in data.items():
            if value is None or key in excluded:
                continue
            if type(value) in codec.PLAIN_TYPES and type(key) is str:
                out[key] = value  # the common case, stored as it is
                continue
            if not _is_data(value):
                continue
            if not isinstance(key, str):
                raise SnapshotError(
                    f"Context variable {key!r} cannot be stored: keys must be strings",
                    instance_id=instance_id,
                )
            try:
                out[key] = codec.encode(value, key)
            except TypeError as exc:
                raise SnapshotError(
                    f"Context variable {key!r} cannot be stored: {exc}", instance_id=instance_id
                ) from exc
        return out

    def check(self, instance_id: str, data: Mapping[str, Any]) -> None:
        """Raise :class:`SnapshotError` as :meth:`encode` would, without building its result.

        Runs at every state change (so a bad value is rejected before anything is written),
        hence the shortcut: a context whose values are all of types that can never be
        rejected (plain scalars, opaque objects) needs no per-entry look."""
        if _NEVER_REJECTED.issuperset(map(type, data.values())):
            return
        if not all(_never_rejected(kind) for kind in set(map(type, data.values()))):
            self.encode(instance_id, data)

    def decode(self, instance_id: str, raw: Any) -> dict[str, Any]:
        """The Python values of a stored ``vars`` document (``None`` reads as empty).

        Identity keys written by other implementations are dropped so they never overwrite the
        current actor. Raises :class:`SnapshotError` when ``raw`` is not an object or a tagged
        value does not parse.
        """
        try:
            values: dict[str, Any] = codec.decode(parse_vars(instance_id, raw))
        except ValueError as exc:
            raise SnapshotError(
                f"Stored vars cannot be decoded: {exc}", instance_id=instance_id
            ) from exc
        excluded = self.excluded
        return {k: v for k, v in values.items() if k not in excluded and v is not None}


#: Value types :meth:`VarsPolicy.check` has found can never be rejected (grows as it learns).
_NEVER_REJECTED: set[type] = set(codec.PLAIN_TYPES)


def _never_rejected(kind: type) -> bool:
    """True for a type whose values are stored as they are or left out, never rejected:
    the plain scalars and opaque objects (remembered); false for floats (NaN), containers
    and every other type the codec looks into."""
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
    "AUDIT_KEYS",
    "DEFAULT_IDENTITY_KEYS",
    "VarsPolicy",
    "default_auditor",
]
