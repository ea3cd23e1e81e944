"""`Engine`: the core facade — one database, one embedding backend, the resident vector
indexes and the degraded advisory. The MCP layer, the CLI, tests and benchmarks all call
these methods; nothing here knows about MCP.

Thread-safety: every public method may be called from any thread. Writes serialise on the
database write lock; the vector indexes are guarded by their own lock; network I/O
(embedding) never happens while the write lock is held.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from cpersona.core import listing, validate, writes
from cpersona.core.config import Settings
from cpersona.core.db import Database
from cpersona.core.embedding.advisory import Advisory
from cpersona.core.embedding.base import Embedder, EmbeddingError, EmbeddingNotReady
from cpersona.core.embedding import identity
from cpersona.core.embedding.cache import QueryCache
from cpersona.core.embedding.provider import build_embedder
from cpersona.core.errors import InvalidArgument
from cpersona.core.pause import Pause
from cpersona.core.retrieval.pipeline import RecallContext, RecallRequest, recall as run_pipeline
from cpersona.core.vector_index import VectorIndex
from cpersona.core.vectors import load_index, to_blob
from cpersona.core.backfill import Backfill

log = logging.getLogger(__name__)

_UNSET = object()


class Engine:
    """The memory server's core.

    Args:
        settings: resolved configuration (`Settings.from_env()`).
        embedder: backend to use; default builds one from settings (may be None = mode none).
        start_background: start model loading and the embedding backfill now; the MCP
            server passes False and calls `start_background()` once `initialize` is answered,
            so loading a model never delays the handshake.

    Raises:
        ConfigError: the configured embedding backend cannot be built.
        SchemaTooNew: the DB file was written by a newer cpersona.
    """

    def __init__(
        self, settings: Settings, embedder: Embedder | None | object = _UNSET, start_background: bool = True
    ) -> None:
        self.settings = settings
        self.embedder: Embedder | None = build_embedder(settings) if embedder is _UNSET else embedder
        self.db = Database(settings.db_path, settings.fts_enabled)
        self.advisory = Advisory(settings.degraded_advisory)
        self.pause = Pause()
        self.cache = QueryCache(settings.embedding_cache_size, settings.embedding_cache_ttl)
        self._index_lock = threading.RLock()
        self._indexes: dict[str, VectorIndex] | None = None
        self._data_version = self.db.data_version()
        self.vector_state: identity.VectorState | None = None
        if self.embedder is None:
            self.advisory.disabled("mode=none / no embedding backend configured")
        self.backfill = Backfill(self)
        self._started = False
        if start_background:
            self.start_background()

    def start_background(self) -> None:
        """Start loading the embedding model and the backfill worker. Idempotent."""
        if self._started or self.embedder is None:
            return
        self._started = True
        start = getattr(self.embedder, "start", None)
        if start is not None:
            start()
        self.backfill.start()

    # ---------------------------------------------------------------- embedding
    def embedding_ready(self) -> bool:
        return self.embedder is not None and self.embedder.ready()

    def embed_texts(self, texts: list[str]) -> np.ndarray | None:
        """Vectors for `texts`, or None when no backend can answer now (advisory updated)."""
        if self.embedder is None:
            return None
        try:
            vectors = self.embedder.embed(texts)
        except EmbeddingNotReady as err:
            self.advisory.loading(f"mode={self.embedder.mode} / {err}")
            return None
        except EmbeddingError as err:
            log.warning("embedding failed: %s", err)
            self.advisory.observe_failure(f"mode={self.embedder.mode} / {err}")
            return None
        self.advisory.observe_ok()
        if self.vector_state is None:
            self.reconcile_identity()
        return vectors

    def reconcile_identity(self) -> identity.VectorState | None:
        """Compare the backend's (model, dim) with the one recorded for the stored vectors;
        on a change, mark old rows stale (kept out of cosine ranking) and tell the user."""
        if self.embedder is None or self.embedder.dim is None:
            return None
        with self.db.write() as conn:
            state = identity.reconcile(conn, self.embedder.model_id, self.embedder.dim)
            stale = identity.stale_count(conn, state) if state.pending else 0
        if state.changed_now:
            log.warning(
                "embedding model changed from %s (%s-d) to %s (%s-d): %d stored rows are left out of vector "
                "search until `cpersona reembed` runs", state.pending["from_model"], state.pending["from_dim"],
                state.model, state.dim, stale,
            )
        self.advisory.set_notice(
            f"{stale} rows embedded by {state.pending['from_model']} await `cpersona reembed` (active model "
            f"{state.model})" if state.pending and stale else None
        )
        with self._index_lock:
            self.vector_state = state
            self._indexes = None
        return state

    def embed_query(self, text: str) -> np.ndarray | None:
        """Query vector (cached, CPERSONA_EMBEDDING_CACHE_SIZE / _TTL) or None."""
        cached = self.cache.get(text)
        if cached is not None:
            self.advisory.observe_ok()
            return cached
        vectors = self.embed_texts([text])
        if vectors is None:
            return None
        self.cache.put(text, vectors[0])
        return vectors[0]

    # ------------------------------------------------------------ vector index
    def refresh_if_changed(self) -> None:
        """Drop the resident indexes when another process committed to the file."""
        version = self.db.data_version()
        if version != self._data_version:
            self._data_version = version
            with self._index_lock:
                self._indexes = None
                self.vector_state = None

    def indexes(self) -> dict[str, VectorIndex] | None:
        """Resident indexes for the backend's dimension, loaded on first use; None when
        the dimension is not known yet (no backend, or HTTP before its first answer)."""
        dim = self.embedder.dim if self.embedder is not None else None
        if dim is None:
            return None
        if self.vector_state is None and self.reconcile_identity() is None:
            return None
        with self._index_lock:
            state = self.vector_state
            if self._indexes is None or self._indexes["memories"].dim != dim:
                with self.db.read() as conn:
                    self._indexes = {t: load_index(conn, t, dim, state.stale_range(t)) for t in identity.TABLES}
            return self._indexes

    def index_add(self, table: str, row_id: int, agent: str, project: str, channel: str, created: str, vec) -> None:
        """Put one freshly written vector into the resident index (if loaded)."""
        with self._index_lock:
            if self._indexes is not None:
                self._indexes[table].add(row_id, agent, project, channel, created, vec)

    # ------------------------------------------------------------------ writes
    def store(self, agent_id: Any, content: Any, **message: Any) -> dict[str, Any]:
        """Write one memory (spec tools.md §5). Dedup = skip, never upsert.

        Keyword args: msg_id, source (dict), timestamp (ISO-8601), metadata (dict),
        channel, project_id. Returns
        `{ok: true, result: "stored", id, embedded}` |
        `{ok: true, result: "skipped", reason, id?}` |
        `{ok: false, result: "rejected", reason}` (reason names the argument and rule).
        """
        try:
            draft = writes.prepare_memory(
                agent_id, content, max_content=self.settings.max_content_length,
                max_metadata=self.settings.max_metadata_length, **message,
            )
        except InvalidArgument as err:
            return {"ok": False, "result": "rejected", "reason": str(err)}
        with self.db.read() as conn:
            dup = writes.find_duplicate(conn, draft)
        if dup:
            return {"ok": True, "result": "skipped", "reason": dup[0], "id": dup[1]}
        vectors = self.embed_texts([draft.content])
        vec = vectors[0] if vectors is not None else None
        self.refresh_if_changed()
        with self.db.write() as conn:
            dup = writes.find_duplicate(conn, draft)
            inserted = None if dup else writes.insert_memory(conn, draft, to_blob(vec) if vec is not None else None)
        if dup:
            return {"ok": True, "result": "skipped", "reason": dup[0], "id": dup[1]}
        if inserted is None:
            return {"ok": True, "result": "skipped", "reason": "duplicate (unique index)"}
        row_id, created = inserted
        if vec is not None:
            self.index_add("memories", row_id, draft.agent_id, draft.project_id, draft.channel, created, vec)
        else:
            self.backfill.wake()
        return {"ok": True, "result": "stored", "id": row_id, "embedded": vec is not None}

    def archive_episode(self, agent_id: Any, summary: Any, **fields: Any) -> dict[str, Any]:
        """Store a caller-computed session summary (spec tools.md §11); moves the episode
        boundary. Keyword args: keywords, history (list of {timestamp}), resolved,
        channel, project_id. Returns `{ok: true, episode_id, embedded}` or
        `{ok: false, episode_id: null, error}`."""
        try:
            draft = writes.prepare_episode(agent_id, summary, max_content=self.settings.max_content_length, **fields)
        except InvalidArgument as err:
            return {"ok": False, "episode_id": None, "error": str(err)}
        vectors = self.embed_texts([draft.summary])
        vec = vectors[0] if vectors is not None else None
        self.refresh_if_changed()
        with self.db.write() as conn:
            row_id, created = writes.insert_episode(conn, draft, to_blob(vec) if vec is not None else None)
        if vec is not None:
            self.index_add("episodes", row_id, draft.agent_id, draft.project_id, draft.channel, created, vec)
        else:
            self.backfill.wake()
        return {"ok": True, "episode_id": row_id, "embedded": vec is not None}

    # ------------------------------------------------------------------- reads
    def recall(self, req: RecallRequest, trace: dict | None = None) -> dict[str, Any]:
        """Hybrid recall (spec retrieval.md). Returns `{messages: [...], advisory?}` with
        messages ordered worst → best (the LAST element is the best match).

        Raises InvalidArgument for a malformed request (limit outside 1..100, …)."""
        self._check_request(req)
        self.refresh_if_changed()
        qvec = self.embed_query(req.query) if self.embedder is not None and req.query.strip() else None
        indexes = self.indexes() if qvec is not None else None
        s = self.settings
        with self.db.read() as conn:
            ctx = RecallContext(
                conn=conn, mode=s.recall_mode, rrf_k=s.rrf_k, fts_enabled=self.db.fts_enabled,
                window=s.max_memories, vector_threshold=s.vector_min_similarity,
                memory_index=indexes["memories"] if indexes else None,
                episode_index=indexes["episodes"] if indexes else None,
                embed_query=lambda _text: qvec,
                weights={"vector": s.vector_weight}, cc_alpha=s.cc_alpha,
                episode_penalty=(s.episode_penalty_enabled, s.episode_decay_rate, s.episode_decay_floor),
                autocut=(s.autocut_enabled, s.autocut_min_results, s.autocut_min_gap_ratio),
            )
            with self._index_lock:
                messages = run_pipeline(ctx, req)
        if trace is not None:
            trace.update(ctx.trace)
        response: dict[str, Any] = {"messages": messages}
        advisory = self.advisory.payload()
        if advisory:
            response["advisory"] = advisory
        return response

    @staticmethod
    def _check_request(req: RecallRequest) -> None:
        validate.identifier("agent_id", req.agent_id)
        validate.text("query", req.query, max_chars=validate.MAX_QUERY_CHARS)
        validate.limit("limit", req.limit)
        validate.identifier("channel", req.channel)
        validate.identifier("project_id", req.project_id, allow_none=True)
        validate.identifier("source_id", req.source_id)
        validate.string_list("exclude_contents", req.exclude_contents, max_items=200, max_chars=100_000)
        validate.boolean("deep", req.deep)

    def list_memories(self, agent_id: str | None = None, limit: int = 100, project_id: str | None = None) -> dict:
        """Newest first; agent_id None or '' = every agent (spec tools.md §12)."""
        with self.db.read() as conn:
            return listing.list_memories(conn, agent_id, limit, project_id)

    def list_episodes(self, agent_id: str | None = None, limit: int = 50, project_id: str | None = None) -> dict:
        """Newest first; agent_id None or '' = every agent (spec tools.md §13)."""
        with self.db.read() as conn:
            return listing.list_episodes(conn, agent_id, limit, project_id)

    # ------------------------------------------------- quality layer (issue 4)
    # (calibration, precision, confidence, profiles, get_contents, recall_with_context)

    # ---------------------------------------------- memory management (issue 5)
    # (update/delete/lock, delete_agent_data, pause tools, task queue, operating context)

    def close(self) -> None:
        """Stop background work and close the database and backend. Idempotent."""
        self.backfill.stop()
        if self.embedder is not None:
            self.embedder.close()
        self.db.close()
