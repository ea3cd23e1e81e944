"""Maintenance writes too long for one transaction, cut into short ones (both backends).

`ChunkedWrites` is mixed into every database class: it needs only the class's `write()`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

#: A chunked maintenance write holds the write lock about this long per transaction; its
#: first transaction does CHUNK_FIRST_SIZE units of work, later ones adapt.
CHUNK_TARGET_S = 0.05
CHUNK_FIRST_SIZE = 200
CHUNK_MAX_SIZE = 20_000


class _Writes(Protocol):
    def write(self) -> AbstractContextManager[Any]: ...


class ChunkedWrites:
    """`write_in_chunks` over the `write()` of the class it is mixed into."""

    def write_in_chunks(self: _Writes, step: Callable[[Any, int], bool]) -> int:
        """Run `step(session, size)` in successive write transactions until it returns True;
        returns the number of transactions. For maintenance writes too long for one
        transaction: a step does at most `size` units of work (e.g. rows), and `size` is
        adapted after every step so a transaction holds the write lock for about
        CHUNK_TARGET_S, whatever a unit costs (a long memory's FTS postings cost far more
        than a short one's).

        Between two steps the lock is left free for as long as the last step held it,
        times a random factor in [0.5, 1.5): about half of the time, at random phases, so a
        waiting writer — a thread of this process, or another process whose SQLite busy
        handler polls the lock every 1 to 100 ms (https://www.sqlite.org/c3ref/busy_timeout.html)
        — gets it within a few polls instead of waiting out its busy timeout. A failing step
        raises; the steps before it stay committed."""
        rounds, size = 0, CHUNK_FIRST_SIZE
        while True:
            rounds += 1
            started = time.monotonic()
            with self.write() as session:
                done = step(session, size)
            if done:
                return rounds
            held = max(time.monotonic() - started, 1e-4)
            size = max(1, min(CHUNK_MAX_SIZE, int(size * CHUNK_TARGET_S / held)))
            time.sleep(held * random.uniform(0.5, 1.5))

