"""Query vectors started before their recall is dispatched.

A transport has a whole request in hand before the MCP SDK parses, validates and dispatches it
to the tool: ~0.5 ms on stdio (benchmarks/README.md, round 13), and a stateless HTTP request
also gets a session of its own first. The query's embedding is the long pole of a recall (its
keyword channel ends ~1 ms before the vector arrives), so the transport hands the query over as
soon as it has read the request (`QueryPrefetch.start`, called through
`RecallService.prefetch_query_vector`) and the recall takes the embedding already running
(`take`) instead of starting its own. The vector is the same either way: one `embed_query` call
of the same text.

A prefetch that no recall takes (the request then failed its argument checks) has only cost
one embedding; its vector stays in the query-vector cache. At most `MAX_PENDING` are held,
the oldest dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future

#: Prefetched embeddings held for their recall (more concurrent recalls than this is unusual).
MAX_PENDING = 16


class QueryPrefetch:
    """Embeddings of recall queries started by a transport, by query text. Thread-safe."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._pending: OrderedDict[str, Future] = OrderedDict()
        self._max = max_pending
        self._lock = threading.Lock()

    def start(self, text: str, submit: Callable[[str], Future]) -> bool:
        """Start `submit(text)` unless an embedding of `text` is already held. Returns True
        when one was started. Raises what `submit` raises (RuntimeError after shutdown)."""
        with self._lock:
            if text in self._pending:
                return False
            self._pending[text] = submit(text)
            while len(self._pending) > self._max:
                self._pending.popitem(last=False)
        return True

    def take(self, text: str) -> Future | None:
        """The embedding started for `text`, handed out once; None when there is none."""
        with self._lock:
            return self._pending.pop(text, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)
