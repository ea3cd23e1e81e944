"""A thread-safe least-recently-used map of bounded size."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """The `size` most recently used entries (read or written); `size` 0 keeps nothing."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value of `key` (now the most recently used), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep `value` under `key`, dropping the least recently used entries beyond `size`."""
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def missing(self, keys: Iterable[K]) -> list[K]:
        """The keys of `keys` not held (their order kept)."""
        with self._lock:
            return [k for k in keys if k not in self._items]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
