"""The evaluation context: variables, control flags, trace and the caller's unit of work."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from flow import codec
from flow.errors import ContextValueError, InvalidArgumentTypeError, SnapshotError
from flow.node_type import NodeType
from flow.trace import FlowTrace, NodeRecord

if TYPE_CHECKING:
    from flow.exchanger import FlowExchanger

_SELF_KEY = "context"
_ID_KEY = "instanceId"
_RESERVED_KEYS = frozenset({_SELF_KEY, _ID_KEY})


class NonSerializable:
    """Marker base: context values of a subclass are never written into a snapshot."""


class FlowContext:
    """Variables of one flow instance plus the control surface tasks use (``stop``/``interrupt``).

    ``data`` is a plain ``dict`` (other threads may read it) pre-filled with ``"instanceId"`` and
    ``"context"`` (this object) so that expressions can refer to both.
    """

    __slots__ = ("_stopped", "connection", "data", "exchanger", "instance_id", "trace")

    def __init__(
        self,
        instance_id: str | None = None,
        data: Mapping[str, Any] | None = None,
        *,
        connection: Any = None,
    ) -> None:
        self.instance_id: str = instance_id or ""
        self.data: dict[str, Any] = {_ID_KEY: self.instance_id, _SELF_KEY: self}
        self.trace: FlowTrace = FlowTrace()
        self.connection: Any = connection
        #: The exchanger of the evaluation currently running on this context (``None`` outside).
        self.exchanger: FlowExchanger | None = None
        self._stopped = False
        if data is not None and type(data) is not dict and not isinstance(data, Mapping):
            # A list of pairs or a JSON array failed in put_all with a bare AttributeError.
            raise InvalidArgumentTypeError(
                "data",
                data,
                "a mapping of variable names to values, or None",
                instance_id=instance_id,
            )
        if data:
            self.put_all(data)

    @classmethod
    def of(
        cls,
        instance_id: str | None = None,
        data: Mapping[str, Any] | None = None,
        *,
        connection: Any = None,
    ) -> FlowContext:
        return cls(instance_id, data, connection=connection)

    # -- data --------------------------------------------------------------------------
    # A key that cannot be hashed (a list, a dict) raises InvalidArgumentTypeError naming the
    # instance, not the dict's bare TypeError; the ``try`` costs nothing on the common path.
    def put(self, key: str, value: Any) -> FlowContext:
        """Set ``key``; a ``None`` value is ignored (as in the reference), and so are the
        reserved keys ``"context"`` and ``"instanceId"``: they always hold this context and
        its instance id, which conditions read (a form field named ``context`` must not
        answer ``context.instance_id``) — as :meth:`from_json` drops them."""
        try:
            if value is not None and key not in _RESERVED_KEYS:
                self.data[key] = value
        except TypeError:
            raise self._bad_key(key) from None
        return self

    def put_if_absent(self, key: str, value: Any) -> FlowContext:
        try:
            if value is not None and key not in self.data:
                self.data[key] = value
        except TypeError:
            raise self._bad_key(key) from None
        return self

    def put_all(self, mapping: Mapping[str, Any]) -> FlowContext:
        """Set every entry of ``mapping`` as :meth:`put` does. Raises
        :class:`InvalidArgumentTypeError` for anything but a mapping (a list of pairs)."""
        if type(mapping) is not dict and not isinstance(mapping, Mapping):
            raise InvalidArgumentTypeError(
                "mapping",
                mapping,
                "a mapping of variable names to values",
                instance_id=self.instance_id,
            )
        for key, value in mapping.items():
            self.put(key, value)
        return self

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self.data.get(key, default)
        except TypeError:
            raise self._bad_key(key) from None

    def remove(self, key: str) -> Any:
        """Remove ``key`` and return its value (``None`` when absent)."""
        try:
            return self.data.pop(key, None)
        except TypeError:
            raise self._bad_key(key) from None

    def __contains__(self, key: object) -> bool:
        try:
            return key in self.data
        except TypeError:
            raise self._bad_key(key) from None

    def scoped(self, key: str, value: Any) -> AbstractContextManager[FlowContext]:
        """Set ``key`` for the ``with`` block, then restore the old value (or remove the key),
        also when the block raises."""
        return _Scoped(self, key, value)

    def _bad_key(self, key: object) -> InvalidArgumentTypeError:
        return InvalidArgumentTypeError(
            "key", key, "a variable name (a string)", instance_id=self.instance_id
        )

    # -- control -----------------------------------------------------------------------
    def stop(self) -> None:
        """End the whole running evaluation (parents and sub-graphs too); no-op outside one."""
        if self.exchanger is not None:
            self.exchanger.stop()

    def interrupt(self) -> None:
        """End the current branch of the running evaluation; no-op outside one."""
        if self.exchanger is not None:
            self.exchanger.interrupt()

    @property
    def is_stopped(self) -> bool:
        """True after ``stop()`` (or an exhausted step budget) until the next eval starts."""
        return self._stopped

    def _set_stopped(self, stopped: bool) -> None:
        self._stopped = stopped

    # -- trace -------------------------------------------------------------------------
    @property
    def last_record(self) -> NodeRecord | None:
        """The last record of the root graph (the first graph recorded since the last clear)."""
        return self.trace.last_record()

    @property
    def last_node_id(self) -> str | None:
        return self.trace.last_node_id()

    # -- snapshots ---------------------------------------------------------------------
    def ser_data(self, *, limits: codec.CodecLimits = codec.DEFAULT_LIMITS) -> dict[str, Any]:
        """The entries a history record keeps: not ``"context"``, not :class:`NonSerializable`
        instances, only string keys and values :mod:`flow.codec` can represent within
        ``limits``. Plain ``str``/``int``/``bool``/``None`` values are kept as they are (this
        runs at every submit): their text and digits are checked by whoever encodes them —
        ``flow_sqla`` refuses the write, :meth:`to_json` leaves them out."""
        plain = codec.PLAIN_TYPES
        return {
            key: value
            for key, value in self.data.items()
            if key != _SELF_KEY
            and isinstance(key, str)
            and (
                type(value) in plain
                or (
                    not isinstance(value, NonSerializable)
                    and codec.is_representable(value, limits=limits)
                )
            )
        }

    def _encoded_data(self, encoder: codec.Encoder) -> dict[str, Any]:
        """The encoded form of every entry a snapshot keeps (plain scalars skip the walk).

        ``instanceId`` is always the context's own id: a value put under that key (form data,
        a script) must not make the snapshot restore as another instance."""
        out: dict[str, Any] = {_ID_KEY: self.instance_id}
        fast_int = encoder.fast_int
        for key, value in self.data.items():
            if key in (_SELF_KEY, _ID_KEY) or not isinstance(key, str):
                continue
            if codec.has_lone_surrogate(key):
                continue
            kind = type(value)
            if kind is str:
                if not codec.has_lone_surrogate(value):
                    out[key] = value
                continue
            if kind is bool or value is None or (kind is int and -fast_int < value < fast_int):
                out[key] = value
                continue
            if isinstance(value, NonSerializable):
                continue
            try:
                out[key] = encoder.value(value, key)
            except ContextValueError:
                continue  # left out of the snapshot, as the API promises
        return out

    def to_json(
        self, *, plain_json: bool = False, limits: codec.CodecLimits = codec.DEFAULT_LIMITS
    ) -> str:
        """The snapshot in the Go port's shape, ``{"stopped", "vars", "trace": {"rootGraphId",
        "last"}}`` (:meth:`from_json` also reads the Java 4.x ``data``/``lastRecords``).

        Values the codec cannot represent within ``limits`` are left out; ``plain_json``
        writes dates, decimals and UUIDs as plain strings. Raises :class:`SnapshotError` when
        the snapshot exceeds ``limits.max_bytes``.
        """
        self._check_snapshot_texts()
        records = {
            gid: {
                "graphId": r.graph_id,
                "id": r.id,
                "title": r.title,
                "type": r.type.name,
                "timestamp": r.timestamp,
            }
            for gid, r in self.trace.records.items()
        }
        encoder = codec.Encoder(limits, plain_json=plain_json)
        doc = {
            "stopped": self._stopped,
            "vars": self._encoded_data(encoder),
            "trace": {"rootGraphId": self.trace.root_graph_id, "last": records},
        }
        text = json.dumps(doc, ensure_ascii=False)
        if len(text) * 4 > limits.max_bytes and (size := len(text.encode())) > limits.max_bytes:
            raise SnapshotError(
                f"Context snapshot of {size} bytes exceeds the limit of {limits.max_bytes}",
                instance_id=self.instance_id,
            )
        return text

    def _check_snapshot_texts(self) -> None:
        """Refuse an instance id or trace text holding a lone surrogate: not valid Unicode,
        so no snapshot may carry it (variables holding one are left out instead)."""
        if self.instance_id is not None and not isinstance(self.instance_id, str):
            raise SnapshotError(
                f"Context snapshot instance id must be a string, not "
                f"{type(self.instance_id).__name__}"
            )
        trace = self.trace
        texts: list[tuple[str, str | None]] = [
            ("instance id", self.instance_id),
            ("trace root graph id", trace.root_graph_id),
        ]
        for record in trace.records.values():
            texts += [
                ("trace graph id", record.graph_id),
                ("trace node id", record.id),
                ("trace node title", record.title),
            ]
        for what, text in texts:
            if isinstance(text, str) and codec.has_lone_surrogate(text):
                shown = text if len(text) <= 80 else f"{text[:77]}..."
                raise SnapshotError(
                    f"Context snapshot {what} {shown!r} holds a lone surrogate (not valid Unicode)",
                    instance_id=self.instance_id if what != "instance id" else None,
                )

    @classmethod
    def from_json(cls, text: str | bytes, *, connection: Any = None) -> FlowContext:
        """Rebuild a context from :meth:`to_json` output, the Java 4.x shape (``data`` /
        ``trace.lastRecords``) or the Go port's (``vars`` / ``trace.last``). Raises
        :class:`SnapshotError` on anything else, including JSON nested too deeply to read."""
        try:
            doc = json.loads(text)
        except (ValueError, TypeError, RecursionError) as exc:
            raise SnapshotError(f"Context snapshot is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise SnapshotError("Context snapshot must be a JSON object")
        data = (doc["vars"] if "vars" in doc else doc.get("data")) or {}
        if not isinstance(data, dict):
            raise SnapshotError("Context snapshot 'vars' must be an object")
        values = codec.decode_variables(data)
        instance_id = values.pop(_ID_KEY, None)
        values.pop(_SELF_KEY, None)
        ctx = cls(instance_id if isinstance(instance_id, str) else None, connection=connection)
        ctx.data.update({k: v for k, v in values.items() if v is not None})
        ctx._stopped = bool(doc.get("stopped", False))
        _load_trace(ctx.trace, doc.get("trace"))
        ctx._check_snapshot_texts()
        return ctx

    def __repr__(self) -> str:
        return f"FlowContext(instance_id={self.instance_id!r}, keys={list(self.data)!r})"


class _Scoped:
    """The ``with`` block of :meth:`FlowContext.scoped` (a class: it runs for every walk)."""

    __slots__ = ("_ctx", "_key", "_missing", "_old", "_value")

    def __init__(self, ctx: FlowContext, key: str, value: Any) -> None:
        self._ctx = ctx
        self._key = key
        self._value = value
        self._missing = True
        self._old: Any = None

    def __enter__(self) -> FlowContext:
        data = self._ctx.data
        try:
            self._missing = self._key not in data
        except TypeError:
            raise self._ctx._bad_key(self._key) from None
        self._old = data.get(self._key)
        self._ctx.put(self._key, self._value)
        return self._ctx

    def __exit__(self, *exc_info: object) -> None:
        data = self._ctx.data
        if self._missing:
            data.pop(self._key, None)
        else:
            data[self._key] = self._old


def _load_trace(trace: FlowTrace, doc: Any) -> None:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise SnapshotError("Context snapshot 'trace' must be an object")
    root = doc.get("rootGraphId")
    if root is not None and not isinstance(root, str):
        raise SnapshotError("Context snapshot 'trace.rootGraphId' must be a string")
    records = (doc["last"] if "last" in doc else doc.get("lastRecords")) or {}
    if not isinstance(records, dict):
        raise SnapshotError("Context snapshot 'trace.last' must be an object")
    for graph_id, item in records.items():
        trace.put_record(_record(graph_id, item))
    trace.root_graph_id = root


def _record(graph_id: str, item: Any) -> NodeRecord:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise SnapshotError(f"Context snapshot trace record of graph {graph_id!r} is malformed")
    kind = item.get("type")
    if isinstance(kind, int) and not isinstance(kind, bool):
        node_type = NodeType(kind) if kind in NodeType._value2member_map_ else NodeType.UNKNOWN
    else:
        node_type = NodeType.of(str(kind) if kind is not None else None, NodeType.UNKNOWN)
    title = item.get("title")
    timestamp = item.get("timestamp", 0)
    return NodeRecord(
        graph_id=str(item.get("graphId") or graph_id),
        id=item["id"],
        title=title if isinstance(title, str) else None,
        type=node_type,
        timestamp=timestamp if isinstance(timestamp, int) else 0,
    )


__all__ = ["FlowContext", "NonSerializable"]
