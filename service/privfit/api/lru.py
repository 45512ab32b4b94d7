"""A thread-safe least-recently-used cache of values computed from public inputs (fit plans, headroom searches).

Its values are computed outside the lock, so two concurrent misses of one key compute the same value and the later
store wins; errors are not cached. ``hits`` and ``misses`` count lookups (the tests read them)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Value = TypeVar("Value")
Key = tuple[Hashable, ...]


class LruCache(Generic[Value]):
    """At most ``size`` entries; the least recently used goes first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Key, Value] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Key, compute: Callable[[], Value]) -> Value:
        """The entry of ``key``, computed by ``compute()`` (outside the lock) on a miss."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry
            self.misses += 1
        entry = compute()
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return entry

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
