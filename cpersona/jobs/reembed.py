"""Re-embed stored rows with the active model after a model change.

Two drivers share one batch step (`_next_batch` → embed → `_write_batch`):
* `reembed()` — `cpersona reembed`, in the foreground with a progress bar;
* `BackgroundReembed.step()` — the server's task queue, one batch per pass of its single
  `reembed` task (queued when the server's start decides on a migration), so the
  re-embedding starts by itself, shows in get_queue_status and never blocks a recall.
Each batch's vectors and the advanced watermark are committed in ONE transaction, so an
interrupted run loses at most the batch in flight and the next run — of either driver —
resumes after the last committed id. `everything=True` first marks the whole corpus stale
(for a same-dimension model swap the server cannot detect). `reembed()` then embeds the rows
stored with no vector at all (imported, or written in mode none) and drops their queued
embed tasks, so one plain `cpersona reembed` leaves no row keyword-only.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from cpersona.embedding import identity
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.errors import EmbeddingError, EmbeddingNotReady
from cpersona.jobs.queued import Task
from cpersona.storage import Database, Session
from cpersona.storage.codec import to_blob
from cpersona.storage.meta import VectorState
from cpersona.storage.records import RowRef

log = logging.getLogger(__name__)

#: Seconds to wait for the bundled model to load.
LOAD_TIMEOUT = 600
#: Seconds the queue waits before retrying while the model loads.
LOADING_POLL = 0.2
#: Attempts at one batch of `cpersona reembed` whose model keeps restarting (a worker killed).
FOREGROUND_TRIES = 5
#: Text embedded to tell "the backend is down" from "the backend refuses this text".
PROBE_TEXT = "cpersona reembed probe"

#: (id, text, agent_id, project_id, channel, created_at) of one stale row.
Row = tuple[int, str, str, str, str, str]


@dataclass
class ReembedReport:
    """The active model, how many stale rows were re-embedded out of the stale total, and
    how many rows without a vector were embedded out of those found (`missing`)."""

    model: str
    dim: int
    rows: int
    total: int
    embedded: int = 0
    missing: int = 0


def _next_batch(db: Database, state: VectorState, batch: int) -> tuple[str, list[Row], int] | None:
    """(table, rows, watermark after them) of the next stale rows; None when none is left."""
    for table in identity.TABLES:
        lo, hi = state.stale_range(table)
        if lo < hi:
            with db.read() as s:
                rows = s.vectors.rows_in_range(table, lo, hi, batch)
            return table, rows, (rows[-1][0] if rows else hi)
    return None


def _write_batch(s: Session, table: str, rows: list[Row], vectors: np.ndarray | list,
                 upto: int, index_add: Callable[[str, RowRef, np.ndarray], None] | None) -> VectorState:
    """Write the batch's vectors (a row whose text changed meanwhile keeps its own) and
    advance the watermark, in the caller's transaction. Returns the new state."""
    for (row_id, text, *axes), vec in zip(rows, vectors):
        if vec is None:  # the backend refused this text: no stale vector stays, the queue retries it
            s.vectors.clear(table, row_id)
            s.tasks.enqueue_embed(table, row_id, axes[0], axes[1])
        elif s.vectors.set_if_text(table, row_id, text, to_blob(vec), only_if_missing=False) and index_add:
            s.after(functools.partial(index_add, table, RowRef(row_id, *axes), vec))
    return identity.advance(s, table, upto)


def _ready(gateway: EmbeddingGateway) -> None:
    emb = gateway.embedder
    if emb is None:
        raise EmbeddingError("no embedding backend configured (CPERSONA_EMBEDDING_MODE=none)")
    wait = getattr(emb, "wait_ready", None)
    if wait is not None and not wait(LOAD_TIMEOUT):
        raise EmbeddingError(f"embedding model did not load: {getattr(emb, 'load_error', '')}")
    if emb.dim is None:
        gateway.embed_texts(["warm-up"])


def _embed_foreground(gateway: EmbeddingGateway, texts: list[str]) -> np.ndarray:
    """Vectors for `texts` in `cpersona reembed`: a model that is loading again (its worker
    died and a new one starts) is waited for, then the batch is retried; the embedder
    itself gives up after repeated deaths (EmbeddingError), this run after FOREGROUND_TRIES
    attempts at one batch (EmbeddingNotReady; the rows done are kept)."""
    assert gateway.embedder is not None
    for attempt in range(1, FOREGROUND_TRIES + 1):
        try:
            return gateway.embedder.embed(texts)
        except EmbeddingNotReady as err:
            if attempt == FOREGROUND_TRIES:
                raise
            log.warning("%s; waiting for it, then retrying the batch", err)
            _ready(gateway)
    raise AssertionError("unreachable")


def reembed(
    gateway: EmbeddingGateway,
    db: Database,
    batch: int = 32,
    everything: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedReport:
    """Re-embed every stale row (`cpersona reembed`); returns counts. `progress(done, total)`
    after each batch. The gateway must be an authority (it may switch the record).

    Raises:
        EmbeddingError: no backend configured, or it failed (progress so far is kept).
    """
    _ready(gateway)
    if gateway.reconcile() is None or gateway.embedder is None:
        raise EmbeddingError("embedding backend did not answer")
    with db.write() as s:
        state = s.meta.vector_state()
        if everything and state.model is not None and state.dim is not None:
            state = identity.start_migration(s, state, state.model, state.dim)
        total = identity.stale_count(s, state)
        missing = s.vectors.count_without_vector()
    done = 0
    tick = (lambda n: progress(n, total + missing)) if progress else (lambda n: None)
    while (step := _next_batch(db, state, batch)) is not None:
        table, rows, upto = step
        vectors: np.ndarray | list = _embed_foreground(gateway, [r[1] for r in rows]) if rows else []
        with db.write() as s:
            state = _write_batch(s, table, rows, vectors, upto, None)
        done += len(rows)
        tick(done)
    _embed_missing(gateway, db, batch, lambda n: tick(done + n))
    with db.read() as s:  # counted after the run: a server's task queue on the same file may have embedded some
        embedded = max(0, missing - s.vectors.count_without_vector())
    final = gateway.reconcile()
    if final is None or final.model is None or final.dim is None:
        raise EmbeddingError("embedding backend stopped answering at the end of the run (the rows done are kept)")
    return ReembedReport(final.model, final.dim, done, total, embedded, missing)


def _embed_missing(gateway: EmbeddingGateway, db: Database, batch: int, tick: Callable[[int], None]) -> int:
    """Embed every row that has no vector, in id order, each batch's vectors written and
    its rows' queued embed tasks dropped in one transaction. A row whose text the backend
    refuses keeps its queued task. Returns how many rows this call gave a vector."""
    assert gateway.embedder is not None
    done = 0
    for table in identity.TABLES:
        after = 0
        while True:
            with db.read() as s:
                rows = s.vectors.rows_without_vector(table, after, batch)
            if not rows:
                break
            vectors = _embed_foreground(gateway, [r[1] for r in rows])
            with db.write() as s:
                if gateway.vector_for_write(s, vectors[0]) is None:
                    raise EmbeddingError("the database now records another embedding model (rows done are kept)")
                for (row_id, text, *_), vec in zip(rows, vectors):
                    if s.vectors.set_if_text(table, row_id, text, to_blob(vec), only_if_missing=True):
                        s.tasks.drop_embed(table, row_id)
                        done += 1
            after = rows[-1][0]
            tick(done)
    return done


class Vectors(Protocol):
    """What the background re-embedding needs of the embedding side (the gateway)."""

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors, or raise EmbeddingNotReady / EmbeddingError."""

    def vector_for_write(self, session: Session, vec: np.ndarray | None) -> np.ndarray | None:
        """`vec` if the database still records this backend's model, else None."""

    def adopt(self, state: VectorState) -> None:
        """Make `state` the process's view of the record."""

    def refresh_notice(self, state: VectorState, stale: int) -> None:
        """Update the advisory's standing notice."""


class BackgroundReembed:
    """One batch of the re-embedding per pass of the task queue's `reembed` task.

    Args:
        db: the database; vectors: the gateway; index_add: puts a new vector into the
        resident index after COMMIT; write: the queue's write transaction (it refuses to
        write while persistence is paused); batch: rows per pass.
    """

    def __init__(self, db: Database, vectors: Vectors, index_add: Callable[[str, RowRef, np.ndarray], None],
                 write: Callable[[], AbstractContextManager[Session]], batch: int, retry_delay: float) -> None:
        self.db = db
        self.vectors = vectors
        self.index_add = index_add
        self.write = write
        self.batch = batch
        self.retry_delay = retry_delay
        self.waiting: str | None = None

    def step(self, task: Task) -> float | None:
        """Re-embed the next batch. Returns None when the pass may go on (the task is
        deleted when nothing is left), else seconds to wait (backend loading or down,
        another process records another model)."""
        with self.db.read() as s:
            state = s.meta.vector_state()
        nxt = _next_batch(self.db, state, self.batch)
        if nxt is None:
            with self.write() as s:
                s.tasks.delete(task.id)
            self.vectors.adopt(state)
            self.vectors.refresh_notice(state, 0)
            return None
        table, rows, upto = nxt
        vectors = self._embed([r[1] for r in rows])
        if isinstance(vectors, float):
            return vectors
        with self.write() as s:
            first = next((v for v in vectors if v is not None), None)
            if first is not None and self.vectors.vector_for_write(s, first) is None:
                self.waiting = "the database records another embedding model; re-embedding left to its process"
                return self.retry_delay
            state = _write_batch(s, table, rows, vectors, upto, self.index_add)
            stale = identity.stale_count(s, state)
            if state.pending is None:
                s.tasks.delete(task.id)
        self.waiting = None
        self.vectors.adopt(state)
        self.vectors.refresh_notice(state, stale)
        if state.pending is None:
            log.info("re-embedding finished: every row now carries a vector of %s (%s-d)", state.model, state.dim)
        return None

    def _embed(self, texts: list[str]) -> list[np.ndarray | None] | float:
        """A vector per text (None for a text the backend refuses), or seconds to wait
        when the backend itself is unavailable."""
        if not texts:
            return []
        try:
            return list(self.vectors.embed_batch(texts))
        except EmbeddingNotReady as err:
            self.waiting = str(err)
            return LOADING_POLL
        except EmbeddingError as err:
            try:
                self.vectors.embed_batch([PROBE_TEXT])
            except EmbeddingError:
                self.waiting = f"embedding backend unavailable: {err}"
                return self.retry_delay
        return [self._one(text) for text in texts]  # the backend answers: find the texts it refuses

    def _one(self, text: str) -> np.ndarray | None:
        try:
            return self.vectors.embed_batch([text])[0]
        except EmbeddingError as err:
            log.warning("re-embedding: the backend refuses one text (%s); it is queued on its own", err)
            return None
