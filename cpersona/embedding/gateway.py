"""`EmbeddingGateway`: the one way the server gets vectors.

It wraps the configured backend (or none) with what every caller needs:
* the degraded advisory (`embedding.advisory`) updated on every call;
* a query-vector cache (CPERSONA_EMBEDDING_CACHE_SIZE / _TTL);
* fault back-off: while the backend is in `fault` and its last SLOW failure (a timeout,
  > PROBE_MAX_FAILURE_SECS) is less than FAULT_RETRY_SECS old, calls fail fast without a
  request — a hung endpoint must not cost every call the full timeout, while a refused
  connection is cheap to retry and so recovers at once;
* one model per database: vectors of a model other than the one the database records
  (another process switched models) are refused, never mixed into one vector space.

Thread-safe; network I/O never happens while a database write lock is held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from cpersona.embedding import identity
from cpersona.embedding.advisory import Advisory
from cpersona.embedding.base import Embedder
from cpersona.embedding.cache import QueryCache
from cpersona.errors import EmbeddingError, EmbeddingNotReady
from cpersona.storage import Database, Session
from cpersona.storage.meta import VectorState

log = logging.getLogger(__name__)

#: A failed query embed faster than this is followed by one probe (see `embed_query`).
PROBE_MAX_FAILURE_SECS = 1.0
#: While in fault, calls fail fast for this long after the last slow (timed-out) failure.
FAULT_RETRY_SECS = 30.0
PROBE_TEXT = "health-probe"


class EmbeddingGateway:
    """Vectors for texts, with advisory, cache, back-off and the same-model rule.

    Args:
        embedder: the backend, or None (mode none: every call answers None / raises).
        db: the database whose recorded model the vectors must match.
        advisory: the degraded-search advisory to keep up to date.
        cache: the query-vector cache.
    """

    def __init__(self, embedder: Embedder | None, db: Database, advisory: Advisory, cache: QueryCache) -> None:
        self.embedder = embedder
        self.db = db
        self.advisory = advisory
        self.cache = cache
        self.state: VectorState | None = None
        self._state_lock = threading.Lock()
        self._slow_failure = -FAULT_RETRY_SECS
        #: Called after the first success following failures (the task queue wakes up).
        self.on_recovered: Callable[[], None] = lambda: None
        #: Called when the recorded identity was (re)decided (the resident indexes reload).
        self.on_identity: Callable[[], None] = lambda: None
        if embedder is None:
            advisory.disabled("mode=none / no embedding backend configured")

    @property
    def model_id(self) -> str | None:
        """The backend's model identity (None without a backend)."""
        return self.embedder.model_id if self.embedder is not None else None

    @property
    def dim(self) -> int | None:
        """The backend's dimension (None without a backend, or HTTP before its first answer)."""
        return self.embedder.dim if self.embedder is not None else None

    # ------------------------------------------------------------- identity
    def reconcile(self) -> VectorState | None:
        """Compare the backend's (model, dim) with the database's record; on a change, mark
        old rows stale (kept out of cosine ranking) and tell the user."""
        if self.embedder is None or self.embedder.dim is None:
            return None
        with self.db.write() as s:
            state = identity.reconcile(s, self.embedder.model_id, self.embedder.dim)
            stale = identity.stale_count(s, state) if state.pending else 0
        if state.changed_now and state.pending:
            log.warning(
                "embedding model changed from %s (%s-d) to %s (%s-d): %d stored rows are left out of vector "
                "search until `cpersona reembed` runs", state.pending["from_model"], state.pending["from_dim"],
                state.model, state.dim, stale,
            )
        self.advisory.set_notice(
            f"{stale} rows embedded by {state.pending['from_model']} await `cpersona reembed` (active model "
            f"{state.model})" if state.pending and stale else None
        )
        with self._state_lock:
            self.state = state
        self.on_identity()
        return state

    def reread_state(self) -> None:
        """Another process changed the file: re-read (never re-decide) the recorded identity,
        so two processes never flip the database's model back and forth."""
        if self.state is not None:
            with self.db.read() as s:
                fresh = s.meta.vector_state()
            with self._state_lock:
                self.state = fresh

    def current_state(self) -> VectorState | None:
        """The identity decided by this process (None before the first embed)."""
        return self.state

    def vector_for_write(self, session: Session, vec: np.ndarray | None) -> np.ndarray | None:
        """`vec` when the database (read inside the caller's write transaction) still records
        this backend's model, else None: another process switched models after `vec` was
        computed, so the row is written without a vector and queued instead."""
        if vec is None or self.embedder is None:
            return vec
        return vec if self._other_model(session.meta.vector_state()) is None else None

    def _other_model(self, state: VectorState | None) -> str | None:
        """None when `state` records no model or this backend's; else the mismatch, reported
        to the advisory at once (two observations: a fault, not a one-off blip)."""
        emb = self.embedder
        if emb is None or state is None or state.model is None or (state.model, state.dim) == (emb.model_id, emb.dim):
            return None
        message = (f"the database's vectors belong to {state.model} ({state.dim}-d), recorded by another process; "
                   f"this server embeds with {emb.model_id} ({emb.dim}-d)")
        self.advisory.observe_failure(message)
        self.advisory.observe_failure(message)
        return message

    def wait_for_backend(self, seconds: float) -> bool:
        """Wait up to `seconds` for a backend that is still loading (the bundled model at
        process start) so the first calls of a session get vectors. Returns True when the
        backend can embed now; returns at once without a backend, for a backend that cannot
        be waited for (HTTP), or after a failed load."""
        emb = self.embedder
        wait = getattr(emb, "wait_ready", None)
        if emb is None or wait is None:
            return emb is not None
        if emb.ready() or seconds <= 0:
            return emb.ready()
        return bool(wait(seconds))

    # ------------------------------------------------------------- vectors
    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, L2-normalised. Raises EmbeddingNotReady / EmbeddingError
        (no backend, back-off, backend failure, another model recorded); advisory updated."""
        emb = self.embedder
        if emb is None:
            raise EmbeddingError("no embedding backend configured (CPERSONA_EMBEDDING_MODE=none)")
        if self.advisory.state == "fault" and time.monotonic() - self._slow_failure < FAULT_RETRY_SECS:
            raise EmbeddingError(f"backend timing out; next attempt within {FAULT_RETRY_SECS:g} s")
        started = time.monotonic()
        try:
            vectors = emb.embed(texts)
        except EmbeddingNotReady as err:
            self.advisory.loading(f"mode={emb.mode} / {err}")
            raise
        except EmbeddingError as err:
            if time.monotonic() - started > PROBE_MAX_FAILURE_SECS:
                self._slow_failure = time.monotonic()
            self.advisory.observe_failure(f"mode={emb.mode} / {err}")
            raise
        if self.state is None:
            self.reconcile()
        mismatch = self._other_model(self.state)
        if mismatch is not None:
            raise EmbeddingError(mismatch + " — use one embedding model per database, or run `cpersona reembed` "
                                 "with the model you keep")
        recovered = self.advisory.failing
        self.advisory.observe_ok()
        if recovered:
            self.on_recovered()
        return vectors

    def embed_texts(self, texts: list[str]) -> np.ndarray | None:
        """Vectors for `texts`, or None when no backend can answer now (advisory updated)."""
        if self.embedder is None:
            return None
        try:
            return self.embed_batch(texts)
        except EmbeddingNotReady:
            return None
        except EmbeddingError as err:
            log.warning("embedding failed: %s", err)
            return None

    def embed_one(self, text: str) -> np.ndarray | None:
        """The vector of one text to store, or None (it is then queued)."""
        vectors = self.embed_texts([text])
        return vectors[0] if vectors is not None else None

    def embed_query(self, text: str) -> np.ndarray | None:
        """Query vector (cached) or None. After a quick failure one probe follows, so a
        backend that is really down is reported as `fault` on the FIRST degraded recall
        while a single blip stays silent; a slow failure (a hung endpoint) or a loading
        model is not probed."""
        cached = self.cache.get(text)
        if cached is not None:
            self.advisory.observe_ok()
            return cached
        started = time.monotonic()
        vectors = self.embed_texts([text])
        if vectors is None:
            failed_after = time.monotonic() - started
            if self.advisory.state not in ("fault", "loading") and failed_after <= PROBE_MAX_FAILURE_SECS:
                self.embed_texts([PROBE_TEXT])
            return None
        self.cache.put(text, vectors[0])
        return vectors[0]

    def close(self) -> None:
        if self.embedder is not None:
            self.embedder.close()
