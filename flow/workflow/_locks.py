"""Per-instance locks for one process: operations on one instance run one at a time, operations
on different instances run in parallel, and a lock lives only while someone holds or waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager


class _Entry:
    __slots__ = ("lock", "refs")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.refs = 0


class InstanceLocks:
    """A refcounted map of re-entrant locks (re-entrant: a task may call the executor back on
    the same instance from inside a submit without dead-locking itself)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}

    @contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        """Hold the lock of ``key`` for the ``with`` block."""
        with self._mutex:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            entry.refs += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._mutex:
                entry.refs -= 1
                if entry.refs == 0:
                    del self._entries[key]

    def __len__(self) -> int:
        """How many locks currently exist (held or waited for)."""
        with self._mutex:
            return len(self._entries)


#: Shared by every executor of the process, keyed by (repository identity, instance id), so two
#: executors over the same repository also serialize on the same instance.
INSTANCE_LOCKS = InstanceLocks()

__all__ = ["INSTANCE_LOCKS", "InstanceLocks"]
