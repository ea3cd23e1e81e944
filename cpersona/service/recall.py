"""Reading memories back: recall, recall_with_context, get_contents, and a transport's head start.

A recall is validated (service/requests.py → the pipeline's `Question`), planned once
(`RecallPlan.of`: the settings and the agent's calibrated gate), run by the pipeline
(retrieval/pipeline.py; rows are ranked in retrieval/ranking.py) through the recall's fetcher
(service/fetcher.py: the query embedding and the side jobs on other read connections), and
answered by service/answers.py (the wire rows, previews, notes); this module adds what the
caller must know besides: the `gate` notice when calibration is missing, the degraded-search
`advisory`, the update notice. The gate's pool count is cached until the file changes.

Public API, besides the tools: `prefetch_query_vector(query)` — the head start a transport may
give a recall. A transport that has read a `recall` request before the MCP SDK has parsed,
validated and dispatched it (mcp/hints.py: stdio's reader, HTTP's request hints) hands over the
query as sent; the embedding starts at once (service/prefetch.py bounds what it may cost) and
the recall of that query takes it instead of starting its own. It never blocks the caller (an
event loop) and never answers anything: the recall itself still checks and answers the request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from cpersona.calibration.runner import Calibration
from cpersona.config import Settings
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.errors import InvalidArgument, StorageUnavailable
from cpersona.policy import validate
from cpersona.policy.pause import Pause
from cpersona.retrieval import contents
from cpersona.retrieval.fetch import Indexes
from cpersona.retrieval.pipeline import Answer
from cpersona.retrieval.pipeline import recall as run_pipeline
from cpersona.retrieval.plan import RecallPlan
from cpersona.service import answers, conversation, prefetch
from cpersona.service.fetcher import QueryVector, ReadThreads, RecallFetch, word_lane
from cpersona.service.outcomes import RecallResult
from cpersona.service.requests import RecallRequest
from cpersona.service.steps import Steps
from cpersona.storage import Database
from cpersona.storage.scope import Scope
from cpersona.updates.checker import UpdateCheck
from cpersona.util.words import visible

log = logging.getLogger(__name__)

#: A recall's answer before its previews: `RecallResult`, or recall_with_context's merged one.
Shaped = TypeVar("Shaped", bound=Mapping[str, Any])


class PoolCounts:
    """The gate's pool count per scope, cached until the file's change stamp moves (a COUNT
    over an agent's rows on every recall otherwise; benchmarks/rounds/2026-12-03-moved-from-code.md)."""

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


@dataclass(frozen=True, eq=False)
class RecallService:
    """The read tools over the engine's collaborators. Thread-safe: every method may be called
    from any thread (the pools and caches below are shared by every recall of the process)."""

    settings: Settings
    db: Database
    gateway: EmbeddingGateway
    calibration: Calibration
    pause: Pause
    updates: UpdateCheck
    steps: Steps
    #: the process-wide pool that embeds queries (owned by `Engine`; apart from the writes' pool,
    #: so a query never queues behind a burst of stores)
    query_pool: ThreadPoolExecutor
    #: a recall's other read connections (the word index's MATCH and the vector retriever beside
    #: the trigram MATCH), two per recall (owned by `Engine`)
    read_pool: ThreadPoolExecutor
    #: the query embeddings a transport started ahead of their recall (`prefetch_query_vector`)
    prefetch: prefetch.QueryPrefetch
    #: the gate's pool count per scope, cached until the file changes
    pool_counts: PoolCounts

    def recall(self, req: RecallRequest, trace: dict | None = None, preview_rows: bool = False,
               full_content: bool = False, verbose: bool | None = None) -> RecallResult:
        """Hybrid recall. Returns `{messages: [...], note?, withheld?, gate_fallback?, gate?, advisory?}`
        with messages ordered worst → best (the LAST element is the best match). With
        `preview_rows` (the MCP tool) long rows are previews unless `full_content`. `verbose`
        False (the tools' default) rounds scores and cuts `match_reason` to `{signal, score}`
        unless CPERSONA_RECALL_VERBOSE; True keeps every channel's score, rounded; None (library
        callers) keeps every score unrounded (service/answers.py). `trace`, when given,
        receives what each stage measured. limit 0 answers no rows; a NUL in the query
        separates words. The operating context's project rules apply to project_id.

        Raises InvalidArgument for a malformed request (limit outside 0..100, …)."""
        def run(project: object) -> RecallResult:
            out = self._recall(replace(req, project_id=_project(project)), trace, self._verbose(verbose))
            return self._previews(out, preview_rows, full_content)

        return self.steps.gated("recall", req.agent_id, req.project_id, False, run)

    def _verbose(self, verbose: bool | None) -> bool | None:
        return None if verbose is None else verbose or self.settings.recall_verbose

    def _previews(self, out: Shaped, preview_rows: bool, full_content: bool) -> Shaped:
        """`out` with the preview tier applied when `preview_rows` (service/answers.py)."""
        if not preview_rows:
            return out
        return cast(Shaped, answers.previews(dict(out), self.settings.recall_preview_chars, full_content))

    def _recall(self, req: RecallRequest, trace: dict | None = None, verbose: bool | None = None) -> RecallResult:
        req = replace(req, query=validate.query(req.query))
        _check_request(req)
        if req.limit == 0:
            return {"messages": []}
        invisible = req.query.strip() != "" and not visible(req.query)
        if invisible:  # only format characters (U+200B…): store refuses such text as empty
            req = replace(req, query="")
        self.steps.refresh_if_changed()
        self.gateway.wait_for_backend(self.settings.model_wait_seconds)
        vector = self._query_vector(req.query)
        # the resident indexes first: loading them may find a new model, which makes the agent's gate stale
        vectors = vector.pending is not None and self.gateway.dim is not None
        indexes = Indexes.of(self.steps.indexes()) if vectors else None
        agent_gate = self.calibration.gate_for(req.agent_id)
        answer = self._answer(req, vector, indexes, RecallPlan.of(self.settings, agent_gate))
        if trace is not None:
            trace.update(answer.trace)
        response = answers.body(answer, req, verbose, invisible,
                                empty_scope=not answer.rows and self.pool_size(req.scope) == 0)
        if agent_gate.notice and self.settings.gate_enabled:
            response["gate"] = dict(agent_gate.notice)
        self._count_recalled(req, answer)
        advisory = self.gateway.advisory.payload(vector.late)
        if advisory:
            response["advisory"] = advisory
        notice = self.updates.recall_notice()
        if notice:
            response["update_notice"] = notice
        return response

    def _query_vector(self, text: str) -> QueryVector:
        """The embedding of a recall's query, started now — or the one a transport started
        (`prefetch_query_vector`) — unless the query is blank, there is no backend, or the
        backend is known not to answer (a batch in flight past CPERSONA_EMBED_WAIT_SECS: the
        recall then answers from keywords at once and says why instead of waiting that long
        again)."""
        wait = self.settings.embed_wait_secs
        backend = self.gateway.embedder
        mode = backend.mode if backend is not None else "none"
        if backend is None or not text.strip():
            return QueryVector(None, wait, mode)
        busy = self.gateway.not_answering(wait)
        if busy is not None:
            late = f"the embedding backend has not answered for {busy[0]:.0f} s (CPERSONA_EMBED_WAIT_SECS {wait:g} s)"
            return QueryVector(None, wait, mode, late)
        pending = self.prefetch.take(text) or self.query_pool.submit(self.gateway.embed_query, text)
        return QueryVector(pending, wait, mode)

    def _answer(self, req: RecallRequest, vector: QueryVector, indexes: Indexes | None, plan: RecallPlan) -> Answer:
        """The pipeline's answer, read through this recall's fetcher (service/fetcher.py)."""
        pending = vector.pending
        threads = ReadThreads(self.db, self.read_pool) if self.db.parallel_reads else None
        lane = word_lane(pending is not None, bool(getattr(self.gateway.embedder, "worker_pid", None)))
        with self.db.read() as s:
            fetcher = RecallFetch(s, vector, indexes, self._current_indexes, self.pool_size, threads, lane)
            return run_pipeline(fetcher, plan, req.question())

    def _current_indexes(self) -> Indexes | None:
        """The resident indexes as the fetcher reads them, loaded now if need be (None: none yet)."""
        return Indexes.of(self.steps.indexes())

    def prefetch_query_vector(self, query: object) -> bool:
        """The head start a transport gives a recall (module doc): start embedding `query` (the
        argument as the transport read it) before its request is dispatched. Returns True when
        an embedding was started; a query the recall would refuse or not embed (not a string,
        too long, blank or invisible), a query longer than `prefetch.MAX_CHARS`, no backend, a
        model still loading or busy start nothing, and the recall then runs as without it."""
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
            return self.prefetch.start(text, lambda t: self.query_pool.submit(self.gateway.embed_query, t))
        except RuntimeError:  # the engine is closing: its pools take no more work
            return False

    def pool_size(self, scope: Scope) -> int:
        """Memories + episodes in `scope` (the gate's pool), cached until the file changes."""
        return self.pool_counts.get(self.db, scope)

    def _count_recalled(self, req: RecallRequest, answer: Answer) -> None:
        """The recall_count bump of the returned memories (confidence on, not deep, not a
        rescue, not paused); a failed bump is logged, never the recall's failure."""
        ids = [c.id for c in answer.rows if c.kind == "mem"]
        if not self.settings.confidence_enabled or not ids or req.deep or answer.fallback or self.pause.active():
            return
        try:
            with self.db.write() as s:
                s.memories.bump_recalled(ids)
        except StorageUnavailable:
            pass  # storage/ logs the condition once
        except Exception as err:  # noqa: BLE001 — a missed bump must not fail the recall; it is logged
            log.warning("recall_count bump failed: %s", err)

    def recall_with_context(self, req: RecallRequest, external_context: object = None, preview_rows: bool = False,
                            full_content: bool = False, verbose: bool | None = None) -> dict[str, Any]:
        """Recall merged with the caller's conversation: every context entry's text is
        excluded from the recall, then user/assistant entries are appended and everything is
        sorted chronologically (timestamp ascending; "" first) — service/conversation.py."""
        entries = conversation.parse_context(external_context)

        def run(project: object) -> dict[str, Any]:
            merged = replace(req, project_id=_project(project),
                             exclude_contents=tuple(req.exclude_contents) + conversation.exclusions(entries))
            out = conversation.merge(self._recall(merged, verbose=self._verbose(verbose)), entries)
            return self._previews(out, preview_rows, full_content)

        return self.steps.gated("recall_with_context", req.agent_id, req.project_id, False, run)

    def get_contents(self, agent_id: object, refs: object) -> dict[str, Any]:
        """Full text of preview refs `mem:<id>` / `ep:<id>` owned by `agent_id`, within
        contents.CONTENTS_BUDGET; refs past the budget come back in `deferred`."""
        agent = validate.identifier("agent_id", agent_id)
        parsed = contents.parse_refs(refs)
        with self.db.read() as s:
            return contents.get_contents(s, agent or "", parsed)


def _project(project: object) -> str | None:
    """The project the operating context resolved, or the caller's argument unchanged: checked
    with the rest of the request (`_check_request`), after the query."""
    return cast("str | None", project)


def _check_request(req: RecallRequest) -> None:
    validate.identifier("agent_id", req.agent_id)
    validate.limit("limit", req.limit, minimum=0)
    validate.identifier("channel", req.channel)
    validate.identifier("project_id", req.project_id, allow_none=True)
    validate.identifier("source_id", req.source_id)
    validate.string_list("exclude_contents", req.exclude_contents, max_items=200, max_chars=100_000)
    validate.boolean("deep", req.deep)
