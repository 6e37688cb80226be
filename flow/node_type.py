"""Node types with the reference codes (solon-flow ``NodeType``)."""

from __future__ import annotations

from enum import IntEnum


class NodeType(IntEnum):
    """The kind of a node; the integer codes are the reference's and are shared with Java/Go."""

    UNKNOWN = 0
    START = 1
    END = 2
    ACTIVITY = 11
    EXCLUSIVE = 21
    INCLUSIVE = 31
    PARALLEL = 32
    LOOP = 33

    @property
    def is_gateway(self) -> bool:
        """Gateways (exclusive, inclusive, parallel, loop) have codes above ACTIVITY."""
        return self in _GATEWAYS

    @classmethod
    def of(cls, name: str | None, default: NodeType | None = None) -> NodeType:
        """Look a type up by name, case-insensitively; ``"iterator"`` is the old name of LOOP.

        Unknown, empty or missing names give ``default`` (ACTIVITY), as in the reference.
        """
        fallback = cls.ACTIVITY if default is None else default
        if not name:
            return fallback
        key = str(name).strip().upper()
        if key == "ITERATOR":
            return cls.LOOP
        member = cls.__members__.get(key)
        return fallback if member is None else member

    @classmethod
    def is_known_name(cls, name: str) -> bool:
        """True when ``name`` is a type name the loader understands (used by validation)."""
        key = name.strip().upper()
        return key == "ITERATOR" or (key in cls.__members__ and key != "UNKNOWN")


#: Looked up on every node a workflow walk passes (a set lookup, not an enum ``value`` access).
_GATEWAYS: frozenset[NodeType] = frozenset(t for t in NodeType if t > NodeType.ACTIVITY)
