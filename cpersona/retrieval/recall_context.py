"""What one recall is asked (`RecallRequest`) and what the pipeline needs to answer it
(`RecallContext`, built from the settings by `make_context`); retrieval/pipeline.py runs it."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cpersona.config import Settings
from cpersona.index.vector_index import VectorIndex, WindowStats
from cpersona.retrieval import confidence, gate, lexical, recency
from cpersona.retrieval.candidate import Candidate
from cpersona.retrieval.unlisted import Unlisted
from cpersona.storage import Session
from cpersona.storage.scope import Scope


@dataclass(frozen=True)
class RecallRequest:
    """Arguments of one recall (validated by the caller).

    limit is the per-retriever depth AND the response cap (1..100).
    """

    agent_id: str
    query: str
    limit: int = 10
    deep: bool = False
    channel: str = ""
    project_id: str | None = None
    source_id: str = ""
    exclude_contents: tuple[str, ...] = ()

    @property
    def scope(self) -> Scope:
        return Scope(self.agent_id, self.project_id, self.channel or None)


@dataclass
class RecallContext:
    """What the pipeline needs for one recall (build it with `make_context`)."""

    session: Session
    mode: str
    rrf_k: int
    window: int
    #: the configured CPERSONA_VECTOR_MIN_SIMILARITY: the vector retriever's floor (× ½ outside
    #: cascade) and the answer bar's cosine unit (gate.answer_bar); calibration moves `cosine_min`
    vector_threshold: float
    memory_index: VectorIndex | None
    episode_index: VectorIndex | None
    embed_query: Callable[[str], np.ndarray | None]
    weights: dict[str, float] = field(default_factory=dict)
    #: cc's weight of the vector evidence; None = per agent from its vectors (retrieval/separation.py)
    cc_alpha: float | None = None
    recency_weight: float = recency.WEIGHT
    #: cc: share of its best time-neighbouring row's score a row can take; None = 1 − 2α (retrieval/neighbours.py)
    neighbour_weight: float | None = None
    #: the longest gap between two rows of one session, seconds (CPERSONA_CALIBRATE_TEMPORAL_WINDOW_MIN)
    session_gap_s: float = 1800.0
    #: Rows the gate governs in a scope; the recall service passes a cached count.
    pool_size: Callable[[Scope], int] | None = None
    episode_penalty: tuple[bool, float, float] = (True, 0.01, 0.5)
    autocut: tuple[bool, int, float] = (True, 3, 0.15)
    trace: dict[str, Any] = field(default_factory=dict)
    # the agent's calibrated gate, confidence scoring, profiles
    gate_enabled: bool = True
    fused_gate: float | None = None
    gate_signal: str | None = None
    cosine_min: float | None = None
    beta: float = 1.0
    #: calibrated: the agent's separation point in standard deviations of its unrelated pairs
    #: (gate.AgentGate.cosine_z); the per-row cosine cut is placed as far into THIS query's cosines
    cosine_z: float | None = None
    confidence: confidence.ConfidenceParams | None = None
    inject_profiles: bool = True
    # outcome of the last `recall`: rescue flag and the rows returned (best first)
    gate_fallback: bool = False
    returned: list[Candidate] = field(default_factory=list)
    #: rows that matched but were all held back by the gate (0 when any row is returned)
    withheld: int = 0
    #: the query's identifiers and names that none of those withheld rows mentions
    unmentioned: list[str] = field(default_factory=list)
    #: runs fn(session) on another read connection in a worker thread (None = no second
    #: connection: every stage runs on `session`, one after the other)
    parallel: Callable[[Callable[[Session], Any]], Future] | None = None
    #: runs fn(session) on the thread that embeds the query, right after the vector is there
    #: (None: the vector retriever is started with `parallel`, where it waits for the vector)
    after_embedding: Callable[[Callable[[Session], Any]], Future] | None = None
    #: where the word index's half of the keyword channel runs: "parallel" (a read worker,
    #: beside the trigram MATCH), "after_embedding" (queued behind the query's embedding on
    #: its thread: with two CPUs busy with the embedding and the trigram MATCH, a third thread
    #: only slows both down) or "inline" (after the trigram MATCH on the recall's own thread:
    #: the embedding runs in a worker process and its thread only waits)
    word_half: str = "parallel"
    #: the query's word terms and idf, set by `retrieve` (None: FTS off or blank query)
    words: lexical.WordQuery | None = None
    #: whether the vector channel ran (a query vector and a resident index), set by `retrieve`
    vectors: bool = False
    #: the query's cosines over the memory scan window (count, mean, std), set by `retrieve`
    background: WindowStats | None = None
    #: cc: vector hits the keyword channel cut off get its ceiling (retrieval/unlisted.py); what it knows of them
    keyword_ceiling: bool = False
    unlisted: Unlisted = field(default_factory=Unlisted)
    #: cc's weight of the vector evidence used by this recall, set by `fuse` (None: not cc)
    alpha: float | None = None
    #: the gates built for this recall by (query, deep, scope) — `pipeline.make_gate`; emptied by
    #: `retrieve`, which sets what a gate reads (the vector background, whether vectors ran)
    gates: dict[tuple[str, bool, Scope, frozenset], gate.Gate] = field(default_factory=dict)
    #: rows the question itself names (the session it asks about: retrieval/sessions.py); the gate keeps them
    pinned: set[tuple[str, int]] = field(default_factory=set)
    #: cc: a question naming alternatives is also asked once per alternative (retrieval/alternatives.py)
    alternatives: bool = True


def make_context(settings: Settings, session: Session, indexes: dict[str, VectorIndex] | None,
                 agent_gate: gate.AgentGate, embed_query: Callable[[str], np.ndarray | None],
                 pool_size: Callable[[Scope], int] | None = None, inject_profiles: bool = True) -> RecallContext:
    """The RecallContext of one recall (or one calibration query) from the settings, the
    agent's gate and the resident indexes (None = no vector channel)."""
    s = settings
    return RecallContext(
        session=session, mode=s.recall_mode, rrf_k=s.rrf_k,
        window=s.max_memories, vector_threshold=s.vector_min_similarity,
        memory_index=indexes["memories"] if indexes else None,
        episode_index=indexes["episodes"] if indexes else None,
        embed_query=embed_query, weights={"vector": s.vector_weight}, cc_alpha=s.cc_alpha,
        recency_weight=s.recency_weight, neighbour_weight=s.neighbour_weight, keyword_ceiling=s.keyword_ceiling,
        alternatives=s.split_alternatives,
        session_gap_s=60.0 * s.calibrate_temporal_window_min,
        episode_penalty=(s.episode_penalty_enabled, s.episode_decay_rate, s.episode_decay_floor),
        autocut=(s.autocut_enabled, s.autocut_min_results, s.autocut_min_gap_ratio),
        gate_enabled=s.gate_enabled, fused_gate=agent_gate.fused_gate, gate_signal=agent_gate.signal,
        cosine_min=agent_gate.cosine_min, cosine_z=agent_gate.cosine_z, beta=agent_gate.beta,
        confidence=confidence.ConfidenceParams.from_settings(s) if s.confidence_enabled else None,
        inject_profiles=inject_profiles, pool_size=pool_size,
    )
