"""Reading memories back: recall, recall_with_context, get_contents.

A recall embeds its query in a worker thread, started first, while the keyword retrievers run
(on a SQLite file the vector retriever runs on that thread right after the embedding and the
word index's MATCH on a read worker — queued behind the embedding too on a machine with two
CPUs — beside the trigram MATCH: retrieval/side_jobs.py), builds the
agent's calibrated gate, runs the pipeline (cpersona/retrieval/pipeline.py: where rows are
ranked) and adds what the caller must know: the degraded-search `advisory`, the `gate`
notice when calibration is missing, `gate_fallback`. The gate's pool count is cached until
the file changes (a COUNT over an agent's rows costs ~6 ms at 100k rows).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any

import numpy as np

from cpersona.errors import InvalidArgument, StorageUnavailable
from cpersona.policy import validate
from cpersona.retrieval import context as conversation
from cpersona.retrieval import preview
from cpersona.retrieval.gate import AgentGate
from cpersona.retrieval.pipeline import RecallContext, RecallRequest, make_context
from cpersona.retrieval.pipeline import recall as run_pipeline
from cpersona.service import prefetch
from cpersona.service.base import ServiceBase
from cpersona.service.outcomes import RecallResult
from cpersona.service.shaping import compact_recall
from cpersona.storage import Database, Session
from cpersona.storage.scope import Scope
from cpersona.util.threads import CPUS
from cpersona.util.words import visible

log = logging.getLogger(__name__)

#: CPUs this process may run on: with fewer than three, a recall's word MATCH queues behind its
#: query's embedding instead of taking a third thread (paired over 600 queries at 10k rows with
#: the bundled model: p50 −0.5 ms; on two CPUs a third runnable thread only slows the others).


class PoolCounts:
    """The gate's pool count per scope, cached until the file's change stamp moves (a
    COUNT over an agent's rows costs ~6 ms at 100k rows on every recall otherwise)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[Scope, int] = {}
        self._stamp: tuple[int, int] | None = None

    def get(self, db: Database, scope: Scope) -> int:
        stamp = db.change_stamp(wait=False)  # never wait for this process's writer (a long import)
        if stamp is None:
            with db.read() as s:
                return s.search.pool_size(scope)
        with self._lock:
            if self._stamp != stamp:
                self._cache, self._stamp = {}, stamp
            cached = self._cache.get(scope)
        if cached is None:
            with db.read() as s:
                cached = s.search.pool_size(scope)
            with self._lock:
                if self._stamp == stamp:
                    self._cache[scope] = cached
        return cached


#: The note of a recall whose query held only invisible (format) characters.
INVISIBLE_NOTE = "the query holds only invisible characters (such as U+200B): answered as a blank query, newest first"
#: The note of an empty answer with nothing withheld: not one row was a candidate.
NO_MATCH_NOTE = "no stored row in this scope shares a word with the query or is near enough to its meaning"
#: ... when the recall had no query vector (no backend, or it failed): meaning was not searched.
NO_WORD_MATCH_NOTE = ("no stored row in this scope shares a word with the query; without a query vector "
                      "nothing was searched by meaning")
#: Why a recall answered no row although some rows matched (retrieval/gate.py: per-row gate, answer bar).
WITHHELD_WHY = "rows matched, but none holds enough of the query's words or is near enough to its meaning"


class RecallService(ServiceBase):
    """The read tools; mixed into `Engine` (which sets `_query_pool`, `_prefetch` and `_pool_counts`)."""

    _query_pool: ThreadPoolExecutor
    _prefetch: prefetch.QueryPrefetch
    _read_pool: ThreadPoolExecutor
    _pool_counts: PoolCounts

    def recall(self, req: RecallRequest, trace: dict | None = None, preview_rows: bool = False,
               full_content: bool = False, verbose: bool | None = None) -> RecallResult:
        """Hybrid recall. Returns `{messages: [...], advisory?, gate?, gate_fallback?, withheld?}` with
        messages ordered worst → best (the LAST element is the best match). With
        `preview_rows` (the MCP tool) long rows are previews unless `full_content`
        (retrieval/preview.py). `verbose` False (the tools' default) rounds scores to 4
        decimals and cuts `match_reason` to `{signal, score}` unless CPERSONA_RECALL_VERBOSE;
        True keeps every channel's score, rounded; None (library callers) returns the
        pipeline's rows unchanged (service/shaping.py).
        limit 0 answers no rows; a NUL in the query separates words. The operating context's
        project rules apply to project_id.

        Raises InvalidArgument for a malformed request (limit outside 0..100, …)."""
        def run(project: str | None) -> RecallResult:
            out = self._recall(replace(req, project_id=project), trace)
            return self._shaped(out, preview_rows, full_content, verbose)

        return self.gated("recall", req.agent_id, req.project_id, False, run)

    def _shaped(self, out: Any, preview_rows: bool, full_content: bool, verbose: bool | None) -> Any:
        if verbose is not None:
            out = compact_recall(out, verbose or self.settings.recall_verbose)
        return preview.shape_recall(out, self.settings.recall_preview_chars, full_content) if preview_rows else out

    def _recall(self, req: RecallRequest, trace: dict | None = None) -> RecallResult:
        req = replace(req, query=validate.query(req.query))
        _check_request(req)
        if req.limit == 0:
            return {"messages": []}
        invisible = req.query.strip() != "" and not visible(req.query)
        if invisible:  # only format characters (U+200B…): store refuses such text as empty
            req = replace(req, query="")
        self.refresh_if_changed()
        self.gateway.wait_for_backend(self.settings.model_wait_seconds)
        # The query is embedded in a worker thread while the keyword retrievers run.
        late: list[str] = []  # why this recall went on without its query vector
        use_vectors = self.gateway.embedder is not None and bool(req.query.strip()) and not self._stalled(late)
        pending = self._query_vector(req.query) if use_vectors else None
        indexes = self.indexes() if pending and self.gateway.dim is not None else None
        agent_gate = self.calibration.gate_for(req.agent_id)
        with self.db.read() as s:
            ctx = make_context(self.settings, s, indexes, agent_gate, lambda _text: None, self.pool_size)
            ctx.embed_query = lambda _text: self._await_query_vector(pending, ctx, late)
            if self.db.parallel_reads:
                ctx.parallel = lambda fn: self._read_pool.submit(self._in_reader, fn)
                if pending is not None:
                    ctx.after_embedding = lambda fn: self._after(pending, fn)
                    ctx.word_half = _word_half(self.gateway.embedder)
            messages = run_pipeline(ctx, req)
        if trace is not None:
            trace.update(ctx.trace)
        response: RecallResult = {"messages": messages}
        if not messages and self.pool_size(req.scope) == 0:
            response["note"] = f"agent {req.agent_id!r} has no memories or episodes in this scope"
        elif invisible:
            response["note"] = INVISIBLE_NOTE
        elif not messages and req.query.strip() and not ctx.withheld and not req.exclude_contents:
            # (with exclusions a row may have matched and been left out on request)
            response["note"] = NO_MATCH_NOTE if ctx.vectors else NO_WORD_MATCH_NOTE
        if ctx.withheld:
            why = f"none of the matched rows mentions {', '.join(ctx.unmentioned)}" if ctx.unmentioned else WITHHELD_WHY
            response["withheld"] = {"rows": ctx.withheld, "why": why}
            if not req.deep:
                response["withheld"]["fix"] = "recall(deep=true) halves the bar"
        self._after_recall(req, ctx, agent_gate, response)
        advisory = self.gateway.advisory.payload(late[0] if late else None)
        if advisory:
            response["advisory"] = advisory
        notice = self.updates.recall_notice()
        if notice:
            response["update_notice"] = notice
        return response

    def prefetch_query_vector(self, query: object) -> bool:
        """Start embedding a recall's query before its request is dispatched (service/prefetch.py):
        the recall of that query then takes the running embedding. `query` is the argument as
        the transport read it. Returns True when an embedding was started; a query the recall
        would refuse or not embed (not a string, too long, blank or invisible), a query longer
        than `prefetch.MAX_CHARS`, no backend, a model still loading or busy start nothing, and
        the recall then runs as without a prefetch."""
        try:
            text = validate.query(query)
        except InvalidArgument:
            return False  # the recall itself answers the error
        backend = self.gateway.embedder
        if len(text) > prefetch.MAX_CHARS or not visible(text) or backend is None \
                or not getattr(backend, "ready", lambda: True)():
            return False
        if getattr(backend, "in_flight", lambda: None)() is not None:
            return False  # busy (a store's batch, another query): a head start would only queue
        try:
            return self._prefetch.start(text, lambda t: self._query_pool.submit(self.gateway.embed_query, t))
        except RuntimeError:  # the engine is closing: its pools take no more work
            return False

    def _query_vector(self, text: str) -> Future:
        """The embedding of a recall's query: the one a transport started (`prefetch_query_vector`), or a new one."""
        return self._prefetch.take(text) or self._query_pool.submit(self.gateway.embed_query, text)

    def _stalled(self, late: list[str]) -> bool:
        """Whether the backend is known not to answer (a batch in flight past
        CPERSONA_EMBED_WAIT_SECS): the recall then answers from keywords at once, and `late`
        says why, instead of waiting that long again."""
        busy = self.gateway.not_answering(self.settings.embed_wait_secs)
        if busy is not None:
            late.append(f"the embedding backend has not answered for {busy[0]:.0f} s "
                        f"(CPERSONA_EMBED_WAIT_SECS {self.settings.embed_wait_secs:g} s)")
        return busy is not None

    def _in_reader(self, fn: Callable[[Session], Any]) -> Any:
        """fn(session) on the calling (worker) thread's own read connection."""
        with self.db.read() as s:
            return fn(s)

    def _after(self, pending: Future, fn: Callable[[Session], Any]) -> Future:
        """fn(session) run by the thread that embeds the query, as soon as it has embedded it
        (on that thread's read connection: no hand-off to another thread); by a read worker
        when the vector was already there. The returned Future can be cancelled until then."""
        job: Future = Future()
        caller = threading.get_ident()

        def start() -> None:
            if job.set_running_or_notify_cancel():
                try:
                    job.set_result(self._in_reader(fn))
                except BaseException as err:  # noqa: BLE001 — handed to the waiting recall
                    job.set_exception(err)

        def embedded(_vector: Future) -> None:
            if threading.get_ident() == caller:  # already embedded (a cached vector): not on the recall's thread
                self._read_pool.submit(start)
            else:
                start()

        pending.add_done_callback(embedded)
        return job

    def pool_size(self, scope: Scope) -> int:
        """Memories + episodes in `scope` (the gate's pool), cached until the file changes."""
        return self._pool_counts.get(self.db, scope)

    def _await_query_vector(self, pending: Future | None, ctx: RecallContext, late: list[str]) -> np.ndarray | None:
        """The query vector of a recall (None without one); loads the resident indexes
        into `ctx` when the dimension was unknown before this embed (first HTTP answer).
        Waits at most CPERSONA_EMBED_WAIT_SECS: a backend busy or stalled (a worker
        stopped mid-batch) costs a recall that long, not the watchdog's deadline; the recall
        then answers from keywords and `late` says why (the embed finishes in the background
        and fills the query cache)."""
        wait = self.settings.embed_wait_secs
        if late:  # waited once already: the later stages go on without it at once
            return None
        try:
            qvec = pending.result(timeout=wait) if pending is not None else None
        except FutureTimeout:
            mode = self.gateway.embedder.mode if self.gateway.embedder else "none"
            late.append(f"mode={mode} / no query vector within {wait:g} s (CPERSONA_EMBED_WAIT_SECS)")
            log.info("recall went on without its query vector: %s", late[0])
            return None
        if qvec is not None and ctx.memory_index is None:
            indexes = self.indexes()
            if indexes:
                ctx.memory_index, ctx.episode_index = indexes["memories"], indexes["episodes"]
        return qvec

    def _after_recall(self, req: RecallRequest, ctx: RecallContext, agent_gate: AgentGate, response: Any) -> None:
        """gate_fallback flag, the gate notice, and the recall_count bump (confidence on,
        not deep, not a rescue, not paused)."""
        if ctx.gate_fallback:
            response["gate_fallback"] = True
        if agent_gate.notice and self.settings.gate_enabled:
            response["gate"] = dict(agent_gate.notice)
        ids = [c.id for c in ctx.returned if c.kind == "mem"]
        if self.settings.confidence_enabled and ids and not req.deep and not ctx.gate_fallback \
                and not self.pause.active():
            try:
                with self.db.write() as s:
                    s.memories.bump_recalled(ids)
            except StorageUnavailable:
                pass  # a missed bump must not fail the recall; storage/ logs the condition once
            except Exception as err:  # noqa: BLE001 — a missed bump must not fail the recall; it is logged
                log.warning("recall_count bump failed: %s", err)

    def recall_with_context(self, req: RecallRequest, external_context: Any = None, preview_rows: bool = False,
                            full_content: bool = False, verbose: bool | None = None) -> dict[str, Any]:
        """Recall merged with the caller's conversation: every context entry's text is
        excluded from the recall, then user/assistant entries are appended and everything is
        sorted chronologically (timestamp ascending; "" first) — retrieval/context.py."""
        entries = conversation.parse_context(external_context)

        def run(project: str | None) -> dict[str, Any]:
            merged = replace(req, project_id=project,
                             exclude_contents=tuple(req.exclude_contents) + conversation.exclusions(entries))
            out = conversation.merge(self._recall(merged), entries)
            return self._shaped(out, preview_rows, full_content, verbose)

        return self.gated("recall_with_context", req.agent_id, req.project_id, False, run)

    def get_contents(self, agent_id: Any, refs: Any) -> dict[str, Any]:
        """Full text of preview refs `mem:<id>` / `ep:<id>` owned by `agent_id`, within
        preview.CONTENTS_BUDGET; refs past the budget come back in `deferred`."""
        agent = validate.identifier("agent_id", agent_id)
        parsed = preview.parse_refs(refs)
        with self.db.read() as s:
            return preview.get_contents(s, agent or "", parsed)


def _word_half(embedder: Any) -> str:
    """Where a recall runs the word half of its keyword channel (RecallContext.word_half):
    beside the trigram MATCH when CPUs are to spare; on the recall's thread when the query
    is embedded in another process, whose waiting thread would otherwise only hold the word
    half back (measured over MCP at 10k rows: p50 −1.9 ms); else queued behind the
    embedding."""
    if CPUS >= 3:
        return "parallel"
    return "inline" if getattr(embedder, "worker_pid", None) else "after_embedding"


def _check_request(req: RecallRequest) -> None:
    validate.identifier("agent_id", req.agent_id)
    validate.limit("limit", req.limit, minimum=0)
    validate.identifier("channel", req.channel)
    validate.identifier("project_id", req.project_id, allow_none=True)
    validate.identifier("source_id", req.source_id)
    validate.string_list("exclude_contents", req.exclude_contents, max_items=200, max_chars=100_000)
    validate.boolean("deep", req.deep)
