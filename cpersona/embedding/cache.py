"""Single-text query-embedding cache: LRU with a time-to-live.

Defaults: 256 entries (CPERSONA_EMBEDDING_CACHE_SIZE), 300 s (CPERSONA_EMBEDDING_CACHE_TTL).
"""

from __future__ import annotations

import time

import numpy as np

from cpersona.util.lru import LRU


class QueryCache:
    """Maps text → vector. `size` 0 disables caching."""

    def __init__(self, size: int = 256, ttl: float = 300.0) -> None:
        self.size = size
        self.ttl = ttl
        self._items: LRU[str, tuple[float, np.ndarray]] = LRU(size)

    def get(self, text: str) -> np.ndarray | None:
        item = self._items.get(text)
        if item is None:
            return None
        if time.monotonic() - item[0] > self.ttl:
            self._items.pop(text)
            return None
        return item[1]

    def put(self, text: str, vector: np.ndarray) -> None:
        self._items.put(text, (time.monotonic(), vector))

    def clear(self) -> None:
        self._items.clear()
