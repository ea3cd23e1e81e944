"""`Engine`: the core facade — one database, one embedding backend, the resident vector
indexes and the degraded advisory. The MCP layer, the CLI, tests and benchmarks all call
these methods; nothing here knows about MCP.

Thread-safety: every public method may be called from any thread. Writes serialise on the
database write lock; the vector indexes are guarded by their own lock; network I/O
(embedding) never happens while the write lock is held.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from cpersona.core import listing, manage, validate, writes
from cpersona.core.config import Settings
from cpersona.core.db import Database
from cpersona.core.embedding.advisory import Advisory
from cpersona.core.embedding.base import Embedder, EmbeddingError, EmbeddingNotReady
from cpersona.core.embedding import identity
from cpersona.core.embedding.cache import QueryCache
from cpersona.core.embedding.provider import build_embedder
from cpersona.core.errors import InvalidArgument
from cpersona.core.pause import Pause
from cpersona.core import preview, profiles, recall_context
from cpersona.core.calibration import AgentGate, Calibration, global_beta, label_for, resolve_precision
from cpersona.core.calibration import parse_request as parse_calibration
from cpersona.core.retrieval.confidence import ConfidenceParams, bump as bump_recall_counts
from cpersona.core.retrieval.pipeline import RecallContext, RecallRequest, recall as run_pipeline
from cpersona.core.retrieval.gate import pool_size as gate_pool_size
from cpersona.core.vector_index import VectorIndex
from cpersona.core.vectors import load_index, to_blob
from cpersona.core.manage import Refused
from cpersona.core.operating_context import Gate, OperatingContext
from cpersona.core.task_queue import TaskQueue

log = logging.getLogger(__name__)

_UNSET = object()
#: A failed query embed faster than this is followed by one probe (see _probe_after_failure).
PROBE_MAX_FAILURE_SECS = 1.0
#: While in fault, embedding calls fail fast for this long after the last slow (timed-out) failure.
FAULT_RETRY_SECS = 30.0


class Engine:
    """The memory server's core.

    Args:
        settings: resolved configuration (`Settings.from_env()`).
        embedder: backend to use; default builds one from settings (may be None = mode none).
        start_background: start model loading and the task queue worker now; the MCP
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
        self._commit_order = threading.RLock()
        self._indexes: dict[str, VectorIndex] | None = None
        self._data_version = self.db.data_version()
        self.vector_state: identity.VectorState | None = None
        self._slow_failure = -FAULT_RETRY_SECS
        self._pool_lock = threading.Lock()
        self._pool_cache: dict = {}
        self._pool_stamp: tuple[int, int] | None = None
        self._query_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cpersona-query-embed")
        if self.embedder is None:
            self.advisory.disabled("mode=none / no embedding backend configured")
        self.queue = TaskQueue(self)
        self.operating_context = OperatingContext.from_settings(settings)
        self.calibration = Calibration(self)  # issue 4: restores a fresh sidecar now
        self._started = False
        if start_background:
            self.start_background()

    def start_background(self) -> None:
        """Start loading the embedding model and the task queue worker. Idempotent."""
        if self._started:
            return
        self._started = True
        start = getattr(self.embedder, "start", None)
        if start is not None:
            start()
        if self.settings.task_queue_enabled:
            self.queue.start()
        self.calibration.start()  # issue 4: startup calibration guard, background thread

    # ---------------------------------------------------------------- embedding
    def embedding_ready(self) -> bool:
        return self.embedder is not None and self.embedder.ready()

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
        started = time.monotonic()
        vectors = self.embed_texts([text])
        if vectors is None:
            self._probe_after_failure(time.monotonic() - started)
            return None
        self.cache.put(text, vectors[0])
        return vectors[0]

    def _probe_after_failure(self, failed_after: float) -> None:
        """One quick second try after a failed query embed (spec retrieval.md §13 probe),
        so a backend that is really down is reported as `fault` on the FIRST degraded
        recall, while a single blip stays silent. Skipped when the failure was slow (a
        hung endpoint must not double the wait) or the model is merely loading."""
        if self.advisory.state in ("fault", "loading") or failed_after > PROBE_MAX_FAILURE_SECS:
            return
        self.embed_texts(["health-probe"])

    # ------------------------------------------------------------ vector index
    def refresh_if_changed(self) -> None:
        """Drop the resident indexes when another process committed to the file."""
        version = self.db.data_version()
        if version != self._data_version:
            self._data_version = version
            with self._index_lock:
                self._indexes = None
                if self.vector_state is not None:  # re-read, never re-decide: no flip-flop between processes
                    with self.db.read() as conn:
                        self.vector_state = identity.read_state(conn)

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

    def index_remove(self, table: str, row_id: int) -> None:
        """Forget one row's vector in the resident index (if loaded): deleted or re-embedded."""
        with self._index_lock:
            if self._indexes is not None:
                self._indexes[table].remove(row_id)

    def index_remove_agent(self, agent_id: str) -> None:
        """Forget every vector of `agent_id` in the resident indexes (if loaded)."""
        with self._index_lock:
            if self._indexes is not None:
                for index in self._indexes.values():
                    index.remove_agent(agent_id)

    # ------------------------------------------------------------------ writes
    @contextmanager
    def write(self) -> Iterator[tuple[sqlite3.Connection, list[Callable[[], None]]]]:
        """One write transaction, yielding (connection, after). Callables appended to `after`
        (resident-index changes) run after COMMIT and before the next writer of this process
        commits, so the index sees the writes in commit order — two racing updates of one row
        cannot leave the loser's vector in the index. Nothing in `after` runs on rollback."""
        after: list[Callable[[], None]] = []
        with self._commit_order:
            with self.db.write() as conn:
                yield conn, after
            for change in after:
                change()

    def vector_for_write(self, conn: sqlite3.Connection, vec: np.ndarray | None) -> np.ndarray | None:
        """`vec` when the database (read inside the caller's write transaction) still records
        this backend's model for its vectors, else None: another process switched models after
        `vec` was computed, so the row is written without a vector and queued instead of
        mixing two vector spaces (the process with the recorded model embeds it)."""
        if vec is None or self.embedder is None:
            return vec
        return vec if self._other_model(identity.read_state(conn)) is None else None

    def store(self, agent_id: Any, content: Any, **message: Any) -> dict[str, Any]:
        """Write one memory (spec tools.md §5). Dedup = skip, never upsert.

        Keyword args: msg_id, source (dict), timestamp (ISO-8601), metadata (dict),
        channel, project_id. Returns
        `{ok: true, result: "stored", id, embedded}` |
        `{ok: true, result: "skipped", reason, id?}` |
        `{ok: false, result: "rejected", reason}` (reason names the argument and rule).
        While persistence is paused: the skipped body (`persisted: false`), nothing written.
        """
        if self.pause.active():
            return self.pause.skipped("store", {"ok": True, "result": "skipped", "id": None, "embedded": False})
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
        with self.write() as (conn, after):
            vec = self.vector_for_write(conn, vec)
            dup = writes.find_duplicate(conn, draft)
            inserted = None if dup else writes.insert_memory(conn, draft, to_blob(vec) if vec is not None else None)
            if inserted and vec is None:  # the vector comes later, from the task queue (same transaction)
                self.queue.enqueue_embed(conn, "memories", inserted[0], draft.agent_id, draft.project_id)
            if inserted and vec is not None:
                after.append(lambda: self.index_add("memories", inserted[0], draft.agent_id, draft.project_id,
                                                    draft.channel, inserted[1], vec))
        if dup:
            return {"ok": True, "result": "skipped", "reason": dup[0], "id": dup[1]}
        if inserted is None:
            return {"ok": True, "result": "skipped", "reason": "duplicate (unique index)"}
        row_id = inserted[0]
        if vec is None:
            self.queue.notify()
        return {"ok": True, "result": "stored", "id": row_id, "embedded": vec is not None}

    def archive_episode(self, agent_id: Any, summary: Any, **fields: Any) -> dict[str, Any]:
        """Store a caller-computed session summary (spec tools.md §11); moves the episode
        boundary. Keyword args: keywords, history (list of {timestamp}), resolved,
        channel, project_id. Returns `{ok: true, episode_id, embedded}` or
        `{ok: false, episode_id: null, error}`. Paused: the skipped body."""
        if self.pause.active():
            return self.pause.skipped("archive_episode", {
                "ok": True, "queued": False, "task_id": None, "episode_id": None, "id": None, "embedded": False})
        try:
            draft = writes.prepare_episode(agent_id, summary, max_content=self.settings.max_content_length, **fields)
        except InvalidArgument as err:
            return {"ok": False, "episode_id": None, "error": str(err)}
        vectors = self.embed_texts([draft.summary])
        vec = vectors[0] if vectors is not None else None
        self.refresh_if_changed()
        with self.write() as (conn, after):
            vec = self.vector_for_write(conn, vec)
            row_id, created = writes.insert_episode(conn, draft, to_blob(vec) if vec is not None else None)
            if vec is None:  # the vector comes later, from the task queue (same transaction)
                self.queue.enqueue_embed(conn, "episodes", row_id, draft.agent_id, draft.project_id)
            else:
                after.append(lambda: self.index_add("episodes", row_id, draft.agent_id, draft.project_id,
                                                    draft.channel, created, vec))
        if vec is None:
            self.queue.notify()
        return {"ok": True, "episode_id": row_id, "embedded": vec is not None}

    # ------------------------------------------------------------------- reads
    def recall(self, req: RecallRequest, trace: dict | None = None) -> dict[str, Any]:
        """Hybrid recall (spec retrieval.md). Returns `{messages: [...], advisory?}` with
        messages ordered worst → best (the LAST element is the best match).

        Raises InvalidArgument for a malformed request (limit outside 1..100, …)."""
        self._check_request(req)
        self.refresh_if_changed()
        # The query is embedded in a worker thread while the keyword retrievers run.
        pending = self._query_pool.submit(self.embed_query, req.query) if self.embedder and req.query.strip() else None
        indexes = self.indexes() if pending and self.embedder.dim is not None else None
        agent_gate = self.calibration.gate_for(req.agent_id)
        with self.db.read() as conn:
            ctx = self._recall_context(conn, indexes, None, req.agent_id, override=agent_gate)
            ctx.embed_query = lambda _text: self._await_query_vector(pending, ctx)
            messages = run_pipeline(ctx, req)
        if trace is not None:
            trace.update(ctx.trace)
        response: dict[str, Any] = {"messages": messages}
        self._after_recall(req, ctx, agent_gate, response)
        advisory = self.advisory.payload()
        if advisory:
            response["advisory"] = advisory
        return response

    def pool_size(self, scope) -> int:
        """Memories + episodes in `scope` (the gate's pool), cached until the file changes:
        a COUNT over the agent's rows costs ~6 ms at 100k rows on every recall otherwise."""
        stamp = self.db.change_stamp()
        with self._pool_lock:
            if self._pool_stamp != stamp:
                self._pool_cache, self._pool_stamp = {}, stamp
            cached = self._pool_cache.get(scope)
        if cached is None:
            with self.db.read() as conn:
                cached = gate_pool_size(conn, scope)
            with self._pool_lock:
                if self._pool_stamp == stamp:
                    self._pool_cache[scope] = cached
        return cached

    def _await_query_vector(self, pending, ctx: RecallContext) -> np.ndarray | None:
        """The query vector of a recall (None without one); loads the resident indexes
        into `ctx` when the dimension was unknown before this embed (first HTTP answer)."""
        qvec = pending.result() if pending is not None else None
        if qvec is not None and ctx.memory_index is None:
            indexes = self.indexes()
            if indexes:
                ctx.memory_index, ctx.episode_index = indexes["memories"], indexes["episodes"]
        return qvec

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
            return listing.list_memories(conn, agent_id, limit, project_id, self.settings.recall_preview_chars)

    def list_episodes(self, agent_id: str | None = None, limit: int = 50, project_id: str | None = None) -> dict:
        """Newest first; agent_id None or '' = every agent (spec tools.md §13)."""
        with self.db.read() as conn:
            return listing.list_episodes(conn, agent_id, limit, project_id, self.settings.recall_preview_chars)

    # ------------------------------------------------- quality layer (issue 4)
    # (calibration, precision, confidence, profiles, get_contents, recall_with_context)
    def _recall_context(self, conn, indexes, qvec, agent_id: str, override: AgentGate | None = None,
                        inject_profiles: bool = True) -> RecallContext:
        """RecallContext of one recall (or one calibration query) of `agent_id`: settings,
        the agent's calibrated gate and vector threshold, confidence params."""
        s = self.settings
        g = override if override is not None else self.calibration.gate_for(agent_id)
        return RecallContext(
            conn=conn, mode=s.recall_mode, rrf_k=s.rrf_k, fts_enabled=self.db.fts_enabled,
            window=s.max_memories, vector_threshold=g.vector_threshold,
            memory_index=indexes["memories"] if indexes else None,
            episode_index=indexes["episodes"] if indexes else None,
            embed_query=lambda _text: qvec,
            weights={"vector": s.vector_weight}, cc_alpha=s.cc_alpha,
            episode_penalty=(s.episode_penalty_enabled, s.episode_decay_rate, s.episode_decay_floor),
            autocut=(s.autocut_enabled, s.autocut_min_results, s.autocut_min_gap_ratio),
            gate_enabled=s.gate_enabled, fused_gate=g.fused_gate, gate_signal=g.signal, cosine_min=g.cosine_min,
            confidence=ConfidenceParams.from_settings(s) if s.confidence_enabled else None,
            inject_profiles=inject_profiles, pool_size=self.pool_size,
        )

    def _after_recall(self, req: RecallRequest, ctx: RecallContext, agent_gate: AgentGate, response: dict) -> None:
        """gate_fallback flag, the gate notice, and the recall_count bump (confidence on,
        not deep, not a rescue, not paused)."""
        if ctx.gate_fallback:
            response["gate_fallback"] = True
        if agent_gate.notice and self.settings.gate_enabled:
            response["gate"] = dict(agent_gate.notice)
        ids = [c.id for c in ctx.returned if c.kind == "mem"]
        if self.settings.confidence_enabled and ids and not req.deep and not ctx.gate_fallback and not self.pause.active():
            try:
                with self.db.write() as conn:
                    bump_recall_counts(conn, ids)
            except Exception as err:  # noqa: BLE001 — a missed bump must not fail the recall
                log.warning("recall_count bump failed: %s", err)

    def recall_with_context(self, req: RecallRequest, external_context: Any = None) -> dict[str, Any]:
        """Recall merged with the caller's conversation (spec tools.md §7): every context
        entry's text is excluded from the recall, then user/assistant entries are appended
        and everything is sorted chronologically (timestamp ascending; "" first)."""
        entries = recall_context.parse_context(external_context)
        merged = replace(req, exclude_contents=tuple(req.exclude_contents) + recall_context.exclusions(entries))
        return recall_context.merge(self.recall(merged), entries)

    def get_contents(self, agent_id: Any, refs: Any) -> dict[str, Any]:
        """Full text of preview refs `mem:<id>` / `ep:<id>` owned by `agent_id` (spec tools.md
        §8), within the CONTENTS_BUDGET; refs past the budget come back in `deferred`."""
        agent = validate.identifier("agent_id", agent_id)
        parsed = preview.parse_refs(refs)
        with self.db.read() as conn:
            return preview.get_contents(conn, agent, parsed)

    def get_profile(self, agent_id: Any) -> dict[str, Any]:
        """{profile: text or ""} (spec tools.md §9)."""
        agent = validate.identifier("agent_id", agent_id)
        with self.db.read() as conn:
            return {"profile": profiles.get(conn, agent)}

    def update_profile(self, agent_id: Any, profile: Any) -> dict[str, Any]:
        """Replace the agent's profile with caller-computed text (spec tools.md §10), cut to
        CPERSONA_MAX_PROFILE_LENGTH (`truncated: true`). Paused: the skipped body."""
        agent = validate.identifier("agent_id", agent_id)
        validate.text("profile", profile, max_chars=max(4 * self.settings.max_profile_length, 1_000_000))
        if self.pause.active():
            return self.pause.skipped("update_profile", {"ok": True, "profiles_updated": 0})
        if not profile.strip():
            return {"ok": True, "profiles_updated": 0, "reason": "empty profile"}
        text, cut = profiles.prepare(profile, self.settings.max_profile_length)
        if not text:
            return {"ok": True, "profiles_updated": 0, "reason": "empty after sanitization"}
        with self.db.write() as conn:
            profiles.upsert(conn, agent, text)
        out: dict[str, Any] = {"ok": True, "profiles_updated": 1, "length": len(text)}
        if cut:
            out.update(truncated=True, max_length=self.settings.max_profile_length)
        return out

    def calibrate_threshold(self, agent_id: Any, sample_size: Any = 0, z_factor: Any = 0, method: Any = "",
                            percentile: Any = 0) -> dict[str, Any]:
        """Derive the agent's (or, with agent_id "", the global) vector threshold and fused
        gate from the corpus (spec tools.md §15; cpersona/core/calibration.py).
        Arguments are validated first (InvalidArgument); paused: the skipped body."""
        req = parse_calibration(self.settings, agent_id, sample_size, z_factor, method, percentile)
        if self.pause.active():
            return self.pause.skipped("calibrate_threshold", {
                "ok": True, "sidecar_persisted": False, "scope": "per_agent" if req.agent_id else "global",
                "agent_id": req.agent_id, "sampled_embeddings": 0, "num_pairs": 0, "method": req.method,
                "z_factor": req.z_factor, "percentile": req.percentile, "embedding_dim": None, "distribution": None,
                "null_admit_rate": None, "new_threshold": None})
        return self.calibration.calibrate(req.agent_id, req.sample_size, req.z_factor, req.method, req.percentile)

    def set_recall_precision(self, agent_id: Any, precision: Any = "", beta: Any = 0) -> dict[str, Any]:
        """Move the agent's gate operating point (spec tools.md §16): strict β 2.0, balanced
        1.0, lenient 0.5, or beta > 0; "" and 0 clear the override. Recalibrates the agent at
        once; a failed recalibration rolls the override back."""
        agent = validate.identifier("agent_id", agent_id)
        if agent == "":
            raise InvalidArgument("agent_id", "is required: name the agent whose precision to set")
        value, label = resolve_precision(self.settings, precision, beta)
        shown = value if value is not None else global_beta(self.settings)
        body = {"ok": True, "agent_id": agent, "precision": label, "beta": shown, "cleared": value is None}
        if self.pause.active():
            return self.pause.skipped("set_recall_precision", {**body, "fused_gate": None, "calibrate": None})
        previous = self.calibration.set_beta(agent, value)
        result = self.calibration.calibrate(agent)
        if not result.get("ok"):
            self.calibration.restore_beta(agent, value, previous)
            return {**body, "ok": False, "error": f"recalibration failed, precision unchanged: {result.get('error')}"}
        out = {**body, "fused_gate": result.get("fused_gate"),
               "calibrate": {"ok": True, "scope": result["scope"], "new_threshold": result["new_threshold"],
                             "sidecar_persisted": result.get("sidecar_persisted")}}
        if result.get("fused_gate_error"):
            out["calibrate"]["fused_gate_error"] = result["fused_gate_error"]
        return out

    def get_recall_precision(self, agent_id: Any) -> dict[str, Any]:
        """The agent's precision (spec tools.md §17) plus its calibration state. Never writes."""
        agent = validate.identifier("agent_id", agent_id)
        if agent == "":
            raise InvalidArgument("agent_id", "is required: name the agent")
        beta = self.calibration.beta(agent)
        gb = global_beta(self.settings)
        return {"ok": True, "agent_id": agent, "precision": label_for(beta), "beta": beta,
                "overridden": agent in self.calibration.betas, "global_precision": label_for(gb), "global_beta": gb,
                "calibration": self.calibration.status(agent)}

    # ---------------------------------------------- memory management (issue 5)
    # (update/delete/lock, delete_agent_data, pause tools, task queue, operating context)
    # Write methods check the pause FIRST (before validation, spec tools.md order) and answer
    # with the tool's skipped body. Bad arguments raise InvalidArgument; a refused change
    # (absent, locked, not owned) returns {ok: false, error}. Ownership and lock checks are
    # part of the changing statement (cpersona/core/manage.py), so races cannot bypass them.

    def pause_persistence(self, ttl_seconds: Any = 1800) -> dict[str, Any]:
        """Turn every write tool into a no-op for `ttl_seconds` (1..86400), process-wide.
        A second call replaces the deadline. Returns {paused, expires_at, ttl_seconds, scope}."""
        ttl = validate.limit("ttl_seconds", ttl_seconds, maximum=86400)
        return self.pause.pause(ttl)

    def resume_persistence(self) -> dict[str, Any]:
        """End the pause now. Returns {paused: false, was_active, scope}."""
        out = self.pause.resume()
        self.queue.wake()
        return out

    def persistence_status(self) -> dict[str, Any]:
        """{paused, expires_at, ttl_remaining_seconds, scope} (expiry checked lazily)."""
        return self.pause.status()

    def update_memory(self, memory_id: Any, content: Any, agent_id: Any = None) -> dict[str, Any]:
        """Replace a memory's content (spec tools.md §20); re-embeds it, keeps its id, msg_id,
        source, timestamp, channel and project. agent_id None/'' = no ownership check.
        Returns {ok: true, updated_id, embedded} | {ok: false, error} (not found, locked,
        not owned, same content as another memory of the same agent/project/channel)."""
        if self.pause.active():
            return self.pause.skipped("update_memory", {"ok": True, "updated_id": None})
        mid = manage.row_id("memory_id", memory_id)
        owner = manage.owner_filter(agent_id)
        clean = writes._clean_text("content", content, self.settings.max_content_length)
        try:
            with self.db.read() as conn:
                manage.check_memory_writable(conn, mid, owner)  # answer early, before embedding
            vectors = self.embed_texts([clean])
            vec = vectors[0] if vectors is not None else None
            self.refresh_if_changed()
            with self.write() as (conn, after):
                vec = self.vector_for_write(conn, vec)
                ref = manage.update_memory(conn, mid, owner, clean, to_blob(vec) if vec is not None else None)
                after.append(lambda: self.index_remove("memories", mid))
                if vec is None:
                    self.queue.enqueue_embed(conn, "memories", mid, ref.agent_id, ref.project_id)
                else:
                    self.queue.drop_embed(conn, "memories", mid)
                    after.append(lambda: self.index_add("memories", mid, ref.agent_id, ref.project_id, ref.channel,
                                                        ref.created_at, vec))
        except Refused as err:
            return {"ok": False, "error": str(err)}
        if vec is None:
            self.queue.notify()
        return {"ok": True, "updated_id": mid, "embedded": vec is not None}

    def delete_memory(self, memory_id: Any, agent_id: Any = None) -> dict[str, Any]:
        """Delete an unlocked memory (spec tools.md §18). Returns {ok: true, deleted_id} |
        {ok: false, error} (not found, locked, not owned)."""
        return self._delete_row("delete_memory", "memories", "memory_id", memory_id, agent_id, manage.delete_memory)

    def delete_episode(self, episode_id: Any, agent_id: Any = None) -> dict[str, Any]:
        """Delete an episode (spec tools.md §19; episodes have no lock). Returns
        {ok: true, deleted_id} | {ok: false, error}."""
        return self._delete_row("delete_episode", "episodes", "episode_id", episode_id, agent_id, manage.delete_episode)

    def _delete_row(self, tool: str, table: str, argument: str, raw_id: Any, agent_id: Any, delete) -> dict[str, Any]:
        """Shared body of the two row deletes: pause check, guarded DELETE + its queued
        embed task in one transaction, then the resident index."""
        if self.pause.active():
            return self.pause.skipped(tool, {"ok": True, "deleted_id": None})
        row_id = manage.row_id(argument, raw_id)
        owner = manage.owner_filter(agent_id)
        try:
            with self.write() as (conn, after):
                delete(conn, row_id, owner)
                self.queue.drop_embed(conn, table, row_id)
                after.append(lambda: self.index_remove(table, row_id))
        except Refused as err:
            return {"ok": False, "error": str(err)}
        return {"ok": True, "deleted_id": row_id}

    def lock_memory(self, memory_id: Any, agent_id: Any = None) -> dict[str, Any]:
        """Protect a memory from update_memory, delete_memory and repairs (not a ranking
        boost; delete_agent_data still removes it). Idempotent. {ok: true, locked_id}."""
        return self._set_locked("lock_memory", "locked_id", memory_id, agent_id, True)

    def unlock_memory(self, memory_id: Any, agent_id: Any = None) -> dict[str, Any]:
        """Remove the protection of lock_memory. Idempotent. {ok: true, unlocked_id}."""
        return self._set_locked("unlock_memory", "unlocked_id", memory_id, agent_id, False)

    def _set_locked(self, tool: str, key: str, memory_id: Any, agent_id: Any, locked: bool) -> dict[str, Any]:
        if self.pause.active():
            return self.pause.skipped(tool, {"ok": True, key: None})
        mid = manage.row_id("memory_id", memory_id)
        owner = manage.owner_filter(agent_id)
        try:
            with self.db.write() as conn:
                manage.set_locked(conn, mid, owner, locked)
        except Refused as err:
            return {"ok": False, "error": str(err)}
        return {"ok": True, key: mid}

    def delete_agent_data(self, agent_id: Any) -> dict[str, Any]:
        """Delete everything of one agent (spec tools.md §14): memories (locked ones too),
        episodes, profiles and queued tasks in ONE transaction, then its vectors in the
        resident index and its calibration state. Returns the count of each."""
        if self.pause.active():
            return self.pause.skipped("delete_agent_data", {
                "ok": True, "agent_id": agent_id if isinstance(agent_id, str) else None, "deleted_memories": 0,
                "deleted_profiles": 0, "deleted_episodes": 0, "deleted_pending_tasks": 0, "deleted_calibration": 0})
        agent = validate.identifier("agent_id", agent_id)
        if agent == "":
            raise InvalidArgument("agent_id", "is required: name the agent whose data to delete")
        with self.write() as (conn, after):
            counts = manage.delete_agent_data(conn, agent)
            after.append(lambda: self.index_remove_agent(agent))
        out: dict[str, Any] = {"ok": True, "agent_id": agent, **counts, "deleted_calibration": 0}
        forget = getattr(getattr(self, "calibration", None), "forget_agent", None)
        if forget is not None:
            try:
                dropped = forget(agent)
            except Exception as err:  # noqa: BLE001 — rows are gone; report the leftover, never hide it
                log.exception("forgetting the calibration of agent %r failed", agent)
                out["calibration_warning"] = f"calibration state was not cleared: {type(err).__name__}: {err}"
            else:
                out["deleted_calibration"] = int(dropped) if isinstance(dropped, (int, bool)) else int(bool(dropped))
        return out

    def queue_status(self) -> dict[str, Any]:
        """Body of get_queue_status (see cpersona/core/task_queue.py)."""
        return self.queue.status()

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors for `texts`, raising instead of returning None (the task queue needs the
        reason). Raises EmbeddingNotReady / EmbeddingError; the advisory is updated.

        Fails fast (no request) while the backend is in `fault` and its last SLOW failure
        (a timeout, > PROBE_MAX_FAILURE_SECS) is less than FAULT_RETRY_SECS old — a hung
        endpoint must not cost every call the full timeout, while a refused connection is
        cheap to retry and so recovers at once — and refuses vectors of a model other than the one the database records
        (another process switched models): mixing two vector spaces is never allowed."""
        if self.embedder is None:
            raise EmbeddingError("no embedding backend configured (CPERSONA_EMBEDDING_MODE=none)")
        if self.advisory.state == "fault" and time.monotonic() - self._slow_failure < FAULT_RETRY_SECS:
            raise EmbeddingError(f"backend timing out; next attempt within {FAULT_RETRY_SECS:g} s")
        started = time.monotonic()
        try:
            vectors = self.embedder.embed(texts)
        except EmbeddingNotReady as err:
            self.advisory.loading(f"mode={self.embedder.mode} / {err}")
            raise
        except EmbeddingError as err:
            if time.monotonic() - started > PROBE_MAX_FAILURE_SECS:
                self._slow_failure = time.monotonic()
            self.advisory.observe_failure(f"mode={self.embedder.mode} / {err}")
            raise
        if self.vector_state is None:
            self.reconcile_identity()
        self._check_same_model()
        recovered = self.advisory.failing
        self.advisory.observe_ok()
        if recovered:
            self.queue.wake()  # rows queued while the backend was away can be embedded now
        return vectors

    def _check_same_model(self) -> None:
        message = self._other_model(self.vector_state)
        if message is not None:
            raise EmbeddingError(message + " — use one embedding model per database, or run `cpersona reembed` "
                                 "with the model you keep")

    def _other_model(self, state: identity.VectorState | None) -> str | None:
        """None when `state` records no model or this backend's; else the mismatch, reported
        to the advisory at once (two observations: a fault, not a one-off blip)."""
        if state is None or state.model is None or (state.model, state.dim) == (self.embedder.model_id, self.embedder.dim):
            return None
        message = (f"the database's vectors belong to {state.model} ({state.dim}-d), recorded by another process; "
                   f"this server embeds with {self.embedder.model_id} ({self.embedder.dim}-d)")
        self.advisory.observe_failure(message)
        self.advisory.observe_failure(message)
        return message

    def get_operating_context(self, section: Any = "") -> dict[str, Any]:
        """Body of get_operating_context: the sidecar preview, or one doctrine section."""
        validate.text("section", section, max_chars=validate.MAX_ID_CHARS)
        return self.operating_context.describe(section)

    def project_gate(self, agent_id: Any, project_id: Any, write: bool) -> Gate:
        """Operating-context gate of the six project_id tools: resolves "@auto", checks
        the registry (see cpersona/core/operating_context.py)."""
        return self.operating_context.gate(agent_id, project_id, write)

    def close(self) -> None:
        """Stop background work and close the database and backend. Idempotent."""
        self.queue.stop()
        stop = getattr(self.calibration, "stop", None)  # tests may swap in a stand-in
        if stop is not None:
            stop()
        self._query_pool.shutdown(wait=True)
        if self.embedder is not None:
            self.embedder.close()
        self.db.close()
