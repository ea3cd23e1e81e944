"""Single-text query-embedding cache: LRU with a time-to-live.

Defaults: 256 entries (CPERSONA_EMBEDDING_CACHE_SIZE), 300 s (CPERSONA_EMBEDDING_CACHE_TTL).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np


class QueryCache:
    """Maps text → vector. `size` 0 disables caching."""

    def __init__(self, size: int = 256, ttl: float = 300.0) -> None:
        self.size = size
        self.ttl = ttl
        self._items: OrderedDict[str, tuple[float, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            item = self._items.get(text)
            if item is None:
                return None
            if time.monotonic() - item[0] > self.ttl:
                del self._items[text]
                return None
            self._items.move_to_end(text)
            return item[1]

    def put(self, text: str, vector: np.ndarray) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[text] = (time.monotonic(), vector)
            self._items.move_to_end(text)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
