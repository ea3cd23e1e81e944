"""`EmbeddingGateway`: the one way the server gets vectors.

It wraps the configured backend (or none) with what every caller needs:
* the degraded advisory (`embedding.advisory`) updated on every call;
* a query-vector cache (CPERSONA_EMBEDDING_CACHE_SIZE / _TTL);
* fault back-off: while the backend is in `fault` and its last SLOW failure (a timeout,
  > PROBE_MAX_FAILURE_SECS) is less than FAULT_RETRY_SECS old, calls fail fast without a
  request — a hung endpoint must not cost every call the full timeout, while a refused
  connection is cheap to retry and so recovers at once;
* one model per database: vectors of a model other than the one the database records
  (another process switched models, or a command run with other embedding settings than
  the server's) are refused, never mixed into one vector space; only an authority (the
  server, `cpersona reembed`) changes the record (`embedding.identity`).

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
from cpersona.storage.codec import from_blob
from cpersona.storage.meta import VectorState

log = logging.getLogger(__name__)

#: A failed query embed faster than this is followed by one probe (see `embed_query`).
PROBE_MAX_FAILURE_SECS = 1.0
#: While in fault, calls fail fast for this long after the last slow (timed-out) failure.
FAULT_RETRY_SECS = 30.0
PROBE_TEXT = "health-probe"
#: How to end a model mismatch, appended to its error.
FIX = ("use the embedding settings (CPERSONA_EMBEDDING_*) the server uses, or switch the database to this "
       "model with `cpersona reembed`")


class EmbeddingGateway:
    """Vectors for texts, with advisory, cache, back-off and the same-model rule.

    Args:
        embedder: the backend, or None (mode none: every call answers None / raises).
        db: the database whose recorded model the vectors must match.
        advisory: the degraded-search advisory to keep up to date.
        cache: the query-vector cache.
        authority: this process may change the database's recorded model (the server,
            `cpersona reembed`); other commands only report a mismatch (`identity`).
    """

    def __init__(self, embedder: Embedder | None, db: Database, advisory: Advisory, cache: QueryCache,
                 authority: bool = True) -> None:
        self.embedder = embedder
        self.db = db
        self.advisory = advisory
        self.cache = cache
        self.authority = authority
        self.state: VectorState | None = None
        #: Why this process may not use its vectors on this database (None = it may).
        self.refusal: str | None = None
        self._state_lock = threading.Lock()
        self._slow_failure = -FAULT_RETRY_SECS
        self._last_failure = ""  # the last failure logged by embed_texts
        #: Called after the first success following failures (the task queue wakes up).
        self.on_recovered: Callable[[], None] = lambda: None
        #: Called with the state when the recorded identity was (re)decided (the resident
        #: indexes reload; the server queues the re-embedding of a migration).
        self.on_identity: Callable[[VectorState], None] = lambda state: None
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
        """Compare the backend's (model, dim) with the database's record and act on it
        (`identity.decide`): record a first model, adopt verified unrecorded vectors, start a
        re-embedding (authority only), or refuse — then tell the user. None while the
        backend's identity is unknown or the verification sample could not be embedded."""
        emb = self.embedder
        if emb is None or emb.dim is None:
            return None
        try:
            legacy = self._legacy()
        except EmbeddingError as err:
            log.info("vectors without a recorded model could not be verified yet: %s", err)
            return None
        with self.db.read() as s:
            state = s.meta.vector_state()
        if identity.decide(state, emb.model_id, emb.dim, self.authority, legacy) in ("record", "migrate"):
            with self.db.write() as s:
                state, _ = identity.apply(s, emb.model_id, emb.dim, self.authority, legacy)
        self._publish(state, legacy)
        return state

    def _legacy(self) -> identity.Legacy | None:
        """Vectors stored without a recorded model, verified against the active model on a
        sample (network I/O, no lock held); None when a model is recorded or none is stored."""
        emb = self.embedder
        assert emb is not None and emb.dim is not None
        with self.db.read() as s:
            if s.meta.vector_state().model is not None:
                return None
            census, labels = s.vectors.census(), s.vectors.model_labels()
            sample = s.vectors.spread_sample(identity.VERIFY_SAMPLE) if list(census) == [emb.dim] else []
        if not census:
            return None
        label = next(iter(labels)) if len(labels) == 1 else identity.UNRECORDED
        same = False
        stored = [vec for _, blob in sample if (vec := from_blob(blob)) is not None]
        if stored and len(stored) == len(sample):
            fresh = emb.embed([text for text, _ in sample])
            same = bool(np.min(np.sum(fresh * np.stack(stored), axis=1)) >= identity.SAME_MODEL_COSINE)
        dims = list(census)
        return identity.Legacy(sum(census.values()), dims[0] if len(dims) == 1 else None, label, same)

    def _publish(self, state: VectorState, legacy: identity.Legacy | None) -> None:
        """Log a change, set the standing notices and the refusal, adopt the state."""
        emb = self.embedder
        assert emb is not None
        with self.db.read() as s:
            stale = identity.stale_count(s, state) if state.pending else 0
        if state.changed_now and state.pending:
            log.warning(
                "embedding model changed from %s (%s-d) to %s (%s-d): %d stored rows are left out of vector "
                "search until they are re-embedded (in the background, or now with `cpersona reembed`)",
                state.pending["from_model"], state.pending["from_dim"], state.model, state.dim, stale)
        self.refusal = None
        if state.model is None and legacy is not None and not legacy.same:
            self.refusal = (f"the database holds {legacy.describe()}; this command embeds with {emb.model_id} "
                            f"({emb.dim}-d) and does not re-decide the database's model")
        elif state.model is not None and (state.model, state.dim) != (emb.model_id, emb.dim):
            self.refusal = (f"the database's vectors belong to {state.model} ({state.dim}-d); this command embeds "
                            f"with {emb.model_id} ({emb.dim}-d) and does not re-decide the database's model")
        self.refresh_notice(state, stale)
        self.adopt(state)
        self.on_identity(state)

    def refresh_notice(self, state: VectorState, stale: int) -> None:
        """The standing advisory notice of a re-embedding in progress (None clears it)."""
        self.advisory.set_notice(
            f"{stale} rows still hold vectors of {state.pending['from_model']} ({state.pending['from_dim']}-d) and "
            f"are keyword-only until re-embedded with {state.model} ({state.dim}-d)" if state.pending and stale
            else None)

    def adopt(self, state: VectorState) -> None:
        """Make `state` this process's view of the record (after it decided or advanced it)."""
        with self._state_lock:
            self.state = state

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
        """None when this process may use its vectors against `state`; else why not,
        reported to the advisory at once (with the fix)."""
        emb = self.embedder
        if emb is None or state is None:
            return None
        if state.model is None:
            message = self.refusal  # unrecorded vectors this process may not adopt
        elif (state.model, state.dim) == (emb.model_id, emb.dim):
            return None
        elif self.authority:
            message = (f"the database's vectors belong to {state.model} ({state.dim}-d), recorded by another process; "
                       f"this server embeds with {emb.model_id} ({emb.dim}-d)")
        else:
            message = (f"the database's vectors belong to {state.model} ({state.dim}-d); this command embeds with "
                       f"{emb.model_id} ({emb.dim}-d) and does not re-decide the database's model")
        if message:
            self.advisory.mismatch(message)
        return message

    def not_answering(self, limit_s: float) -> tuple[float, float] | None:
        """(seconds waited, seconds allowed) of the backend's batch in flight when it has waited
        longer than `limit_s` — a bundled model's worker process stopped or hung, before its
        watchdog replaces it —, else None (idle, answering, or a backend that cannot tell)."""
        probe = getattr(self.embedder, "in_flight", None)
        busy = probe() if callable(probe) else None
        return busy if busy is not None and busy[0] > limit_s else None

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
            raise EmbeddingError(mismatch + " — " + FIX)
        recovered = self.advisory.failing
        self.advisory.observe_ok()
        self._last_failure = ""
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
            if str(err) != self._last_failure:  # a lasting condition is logged once, not per call
                self._last_failure = str(err)
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
            if self.advisory.state not in ("fault", "loading", "mismatch") and failed_after <= PROBE_MAX_FAILURE_SECS:
                self.embed_texts([PROBE_TEXT])
            return None
        self.cache.put(text, vectors[0])
        return vectors[0]

    def close(self) -> None:
        if self.embedder is not None:
            self.embedder.close()
