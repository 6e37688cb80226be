"""Per-instance locks for one process: operations on one instance run one at a time, operations
on different instances run in parallel, and a lock lives only while someone holds or waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from contextlib import AbstractContextManager


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

    def hold(self, key: Hashable) -> AbstractContextManager[None]:
        """Hold the lock of ``key`` for the ``with`` block."""
        return _Held(self, key)

    def _acquire_entry(self, key: Hashable) -> _Entry:
        with self._mutex:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            entry.refs += 1
        return entry

    def _release_entry(self, key: Hashable, entry: _Entry) -> None:
        with self._mutex:
            entry.refs -= 1
            if entry.refs == 0:
                del self._entries[key]

    def __len__(self) -> int:
        """How many locks currently exist (held or waited for)."""
        with self._mutex:
            return len(self._entries)


class _Held:
    """The ``with`` block of :meth:`InstanceLocks.hold` (a class: it runs for every operation)."""

    __slots__ = ("_entry", "_key", "_locks")

    def __init__(self, locks: InstanceLocks, key: Hashable) -> None:
        self._locks = locks
        self._key = key
        self._entry: _Entry | None = None

    def __enter__(self) -> None:
        entry = self._entry = self._locks._acquire_entry(self._key)
        try:
            entry.lock.acquire()
        except BaseException:
            self._locks._release_entry(self._key, entry)
            raise

    def __exit__(self, *exc_info: object) -> None:
        entry = self._entry
        assert entry is not None, "released before it was held"
        try:
            entry.lock.release()
        finally:
            self._locks._release_entry(self._key, entry)


#: Shared by every executor of the process, keyed by (repository identity, instance id), so two
#: executors over the same repository also serialize on the same instance.
INSTANCE_LOCKS = InstanceLocks()

__all__ = ["INSTANCE_LOCKS", "InstanceLocks"]
