"""Query vectors started before their recall is dispatched: the recall service's head start.

A transport has a whole request in hand before the MCP SDK parses, validates and dispatches it
to the tool, and a stateless HTTP request also gets a session of its own first. The query's
embedding is the long pole of a recall (its keyword channels end before the vector arrives), so
the transport hands the query over as soon as it has read the request — through `HeadStart`,
the part of the recall service's public API a transport uses
(`RecallService.prefetch_query_vector`, which starts `QueryPrefetch.start`) — and the recall
takes the embedding already running (`take`) instead of starting its own. The vector is the
same either way: one `embed_query` call of the same text.

A prefetch no recall takes (its request failed its argument checks, was refused, or asked for
no rows) costs an embedding, so they are bounded: at most `MAX_PENDING` are held at once and
only one runs at a time — a request read meanwhile starts nothing —, one not taken within
`TTL_S` is dropped (cancelled when it has not started), and the service starts none while the
backend is busy. A flood of refused requests (found by break-it testers: an ACL-denied client
sending 20 a second) therefore costs at most `MAX_PENDING` embeddings of at most `MAX_CHARS`
characters per `TTL_S`, and a recall's own embedding waits behind at most one of them.
An embedding that has already failed (None, or raised) is not handed out: the recall embeds
its query itself, so its answer says whether the backend answers now.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

#: Prefetched embeddings held for their recall at once (one of them running at a time).
MAX_PENDING = 2
#: Seconds a prefetched embedding waits for its recall (the SDK dispatches a request in ~1 ms).
TTL_S = 1.0
#: Longer queries are not prefetched: their embedding takes far longer than the head start saves
#: (the SDK's parsing and dispatch of the request), and refused ones would hold the model
#: (measured: benchmarks/rounds/2026-12-03-moved-from-code.md).
MAX_CHARS = 256


class HeadStart(Protocol):
    """A recall's head start, as a transport gives it (service/recall.py module doc)."""

    def prefetch_query_vector(self, query: object) -> bool:
        """Start embedding `query` (a recall's argument as read, unchecked); True when started."""
        ...


class QueryPrefetch:
    """Embeddings of recall queries started by a transport, by query text. Thread-safe."""

    def __init__(self, max_pending: int = MAX_PENDING, ttl_s: float = TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._pending: OrderedDict[str, tuple[float, Future]] = OrderedDict()
        self._max = max_pending
        self._ttl = ttl_s
        self._clock = clock
        self._lock = threading.Lock()

    def start(self, text: str, submit: Callable[[str], Future]) -> bool:
        """Start `submit(text)` unless an embedding of `text` is already held, `max_pending`
        are, or one of them is still running. Returns True when one was started. Raises what
        `submit` raises (RuntimeError after shutdown)."""
        with self._lock:
            self._expire()
            busy = any(not future.done() for _, future in self._pending.values())
            if busy or text in self._pending or len(self._pending) >= self._max:
                return False
            self._pending[text] = (self._clock(), submit(text))
        return True

    def take(self, text: str) -> Future | None:
        """The embedding started for `text`, handed out once; None when there is none, or it
        has already failed (it then is dropped)."""
        with self._lock:
            self._expire()
            held = self._pending.pop(text, None)
        if held is None:
            return None
        future = held[1]
        if future.done() and (future.cancelled() or future.exception() is not None or future.result() is None):
            return None
        return future

    def _expire(self) -> None:
        """Drop what waited longer than the TTL (oldest first), cancelling what has not started."""
        oldest = self._clock() - self._ttl
        while self._pending:
            text, (started, future) = next(iter(self._pending.items()))
            if started > oldest:
                return
            del self._pending[text]
            future.cancel()

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)
