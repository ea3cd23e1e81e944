"""What one recall asks (`Question`) and how it is answered (`RecallPlan`): frozen values that
every stage of the pipeline reads and none changes.

The plan is built once per recall (and once per calibration query) from the settings and the
agent's calibrated gate (`RecallPlan.of`); the question from the request the service has
validated. The quality gate of one recall is a function of both and of what the channels
found (`RecallPlan.gate`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from cpersona.config import Settings
from cpersona.index.vector_index import WindowStats
from cpersona.policy.validate import MAX_LIMIT
from cpersona.retrieval import confidence, gate
from cpersona.retrieval.anchors import Anchors
from cpersona.storage.scope import Scope

#: Exclusion entries shorter than this exclude only exact equals.
EXCLUDE_PREFIX_MIN = 32
#: `cc` reads the memory keyword channel this many times deeper than `limit` (capped at 100)
#: and reranks it with the cosine: the answer is often a keyword hit just below the top `limit`
#: (measured: benchmarks/rounds/2026-12-03-moved-from-code.md).
CC_KEYWORD_DEPTH_FACTOR = 2
#: The modes whose rows carry a fused score (any other mode, or a blank query, cascades).
FUSED_MODES = ("rrf", "rsf", "cc")


def exclusions(texts: Iterable[str]) -> tuple[str, ...]:
    """The texts a recall leaves out, as `Question.excludes` compares them (stripped, lower
    case; blank entries dropped)."""
    return tuple(t.strip().lower() for t in texts if t.strip())


@dataclass(frozen=True)
class Question:
    """What one recall asks, validated: the query in a scope, the depth (`limit`: the
    per-retriever depth and the answer's cap), `deep` (halved thresholds), the source filter
    and the texts to leave out (`exclusions`)."""

    scope: Scope
    query: str
    limit: int = 10
    deep: bool = False
    source_id: str = ""
    exclusions: tuple[str, ...] = ()

    @property
    def agent_id(self) -> str:
        return self.scope.agent_id or ""

    @property
    def blank(self) -> bool:
        return not self.query.strip()

    def excludes(self, content: str) -> bool:
        """Whether `content` is one the caller already has: equal to a short exclusion, or a
        prefix of a long one or prefixed by it (≥ `EXCLUDE_PREFIX_MIN` characters)."""
        text = content.strip().lower()
        if not text:
            return False
        for entry in self.exclusions:
            if len(entry) < EXCLUDE_PREFIX_MIN:
                if text == entry:
                    return True
            elif text.startswith(entry) or entry.startswith(text):
                return True
        return False

    @cached_property
    def anchors(self) -> Anchors:
        return Anchors.of(self.query)


class EpisodePenalty(NamedTuple):
    """The episode boundary penalty (retrieval/scoring.py): on or off, rate per day, floor."""

    enabled: bool
    rate: float
    floor: float


class Autocut(NamedTuple):
    """The cut at the largest score gap (gate.autocut): on or off, rows kept at least, gap ratio."""

    enabled: bool
    min_results: int
    min_gap_ratio: float


@dataclass(frozen=True)
class RecallPlan:
    """How one recall is ranked and gated: the CPERSONA_* settings of the same names and the
    agent's calibrated gate (`of`)."""

    mode: str
    rrf_k: int
    #: the scan window of the vector retriever (CPERSONA_MAX_MEMORIES)
    window: int
    #: the configured CPERSONA_VECTOR_MIN_SIMILARITY: the vector retriever's floor (× ½ outside
    #: cascade) and the answer bar's cosine unit (gate.answer_bar); calibration moves `agent.cosine_min`
    vector_threshold: float
    agent: gate.AgentGate
    vector_weight: float
    #: cc's weight of the vector evidence; None = per agent from its vectors (retrieval/separation.py)
    cc_alpha: float | None
    recency_weight: float
    #: cc: share of its best time-neighbouring row's score a row can take; None = 1 − 2α (retrieval/neighbours.py)
    neighbour_weight: float | None
    #: the longest gap between two rows of one session, seconds (CPERSONA_CALIBRATE_TEMPORAL_WINDOW_MIN)
    session_gap_s: float
    episode_penalty: EpisodePenalty
    autocut: Autocut
    gate_enabled: bool
    confidence: confidence.ConfidenceParams | None
    inject_profiles: bool
    #: cc: vector hits the keyword channel cut off get its ceiling (retrieval/unlisted.py)
    keyword_ceiling: bool
    #: cc: a question naming alternatives is also asked once per alternative (retrieval/alternatives.py)
    alternatives: bool

    @classmethod
    def of(cls, settings: Settings, agent: gate.AgentGate, inject_profiles: bool = True) -> RecallPlan:
        """The plan of one recall from the settings and the agent's gate (calibration)."""
        s = settings
        return cls(
            mode=s.recall_mode, rrf_k=s.rrf_k, window=s.max_memories, vector_threshold=s.vector_min_similarity,
            agent=agent, vector_weight=s.vector_weight, cc_alpha=s.cc_alpha, recency_weight=s.recency_weight,
            neighbour_weight=s.neighbour_weight, session_gap_s=60.0 * s.calibrate_temporal_window_min,
            episode_penalty=EpisodePenalty(s.episode_penalty_enabled, s.episode_decay_rate, s.episode_decay_floor),
            autocut=Autocut(s.autocut_enabled, s.autocut_min_results, s.autocut_min_gap_ratio),
            gate_enabled=s.gate_enabled,
            confidence=confidence.ConfidenceParams.from_settings(s) if s.confidence_enabled else None,
            inject_profiles=inject_profiles, keyword_ceiling=s.keyword_ceiling, alternatives=s.split_alternatives,
        )

    @property
    def weights(self) -> dict[str, float]:
        """The channel weights of rrf and rsf."""
        return {"vector": self.vector_weight}

    def cascaded(self, question: Question) -> bool:
        """Whether the rows of `question` are a cascade list (no fused score, never re-sorted)."""
        return self.mode not in FUSED_MODES or question.blank

    def keyword_depth(self, question: Question) -> int:
        """How deep the memory keyword channel reads for `question` (`CC_KEYWORD_DEPTH_FACTOR`)."""
        if self.mode == "cc" and not question.blank:
            return min(MAX_LIMIT, CC_KEYWORD_DEPTH_FACTOR * question.limit)
        return question.limit

    def gate(self, question: Question, pool: int, background: WindowStats | None,
             pinned: frozenset[tuple[str, int]] = frozenset()) -> gate.Gate:
        """The thresholds of this recall: the pool heuristic, or the agent's calibrated gate.
        The calibration decides which rows may be returned (`Gate.passes`:
        `gate.query_cosine_cut`), not whether the recall answers at all: that bar keeps the
        configured unit (`vector_threshold`, see gate.answer_bar). `background` is the query's
        cosines over the scan window (None: the vector channel did not run); `pinned` the rows
        the question names."""
        half = 0.5 if question.deep else 1.0
        agent, bg = self.agent, background
        cut = gate.query_cosine_cut(agent.cosine_min, agent.cosine_z, bg)
        cosine_min = None if cut is None else max(cut, gate.min_score(pool))  # never below the heuristic's cut
        window, chance_max = ((bg.n, bg.std), gate.chance_maximum(bg.n, bg.mean, bg.std)) if bg else (None, None)
        return gate.Gate(
            pool, gate.min_score(pool, question.deep), self.rrf_k, question.blank,
            tuple(gate.exact_needles(question.query)),
            fused_gate=None if agent.fused_gate is None else agent.fused_gate * half, gate_signal=agent.signal,
            cosine_min=None if cosine_min is None else cosine_min * half, enabled=self.gate_enabled,
            answer=None if question.deep else gate.answer_bar(self.vector_threshold, agent.beta, bg is not None,
                                                              window),
            whole=question.query.strip().lower(), chance_max=chance_max, anchors=question.anchors, pinned=pinned,
        )
