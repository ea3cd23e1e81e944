"""Ranking: everything a recall does before its quality gate, shared with calibration.

One question is one pass (`ask`): its `Channels` (read through the fetcher) → fusion (rrf, rsf,
cc; cascade for a blank query or mode cascade) → the recency prior → word coverage → the episode
boundary penalty → neighbour turns (cc) — returned as `Fused`. `rank` asks the question, and in
cc each alternative it names (retrieval/alternatives.py: another pass of the same function with
another question) merges the lists, puts the session the question asks about first, adds the
profile rows and scores confidence (when enabled) — returned as `Ranked`.

Stage values are frozen; the candidates they hold gain their scores as they pass through the
stages of their pass (each pass reads its own candidates).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cpersona.retrieval import alternatives as alts
from cpersona.retrieval import (
    confidence,
    fusion,
    gate,
    lexical,
    profiles,
    recency,
    retrievers,
    scoring,
    separation,
    sessions,
)
from cpersona.retrieval import neighbours as turns
from cpersona.retrieval.candidate import Candidate
from cpersona.retrieval.fetch import Channels, Fetcher, VectorHits
from cpersona.retrieval.plan import Question, RecallPlan
from cpersona.retrieval.unlisted import fill as fill_unlisted


@dataclass(frozen=True)
class Fused:
    """One pass: the rows of one question, scored and sorted (best first)."""

    rows: list[Candidate]
    channels: Channels
    #: cc's weight of the vector evidence this pass used (None: not cc)
    alpha: float | None = None
    #: the bar a neighbour turn's lender cleared (not deep, nothing pinned; None: no turns lent)
    lender: gate.Gate | None = None
    #: the share of a neighbour's score a row could take (None: no turns lent)
    neighbour_weight: float | None = None

    @property
    def trace(self) -> dict[str, Any]:
        out = self.channels.trace
        if self.alpha is not None:
            out["cc_alpha"] = self.alpha
        if self.neighbour_weight is not None:
            out["neighbour_weight"] = self.neighbour_weight
        return out


@dataclass(frozen=True)
class Ranked:
    """The rows a recall puts before its gate (best first), with the whole question's pass."""

    rows: list[Candidate]
    whole: Fused
    #: rows the question itself names (the session it asks about); the gate keeps them
    pinned: frozenset[tuple[str, int]] = frozenset()
    #: how many alternatives the question named and was asked once each for
    alternatives: int = 0

    @property
    def trace(self) -> dict[str, Any]:
        out = self.whole.trace
        if self.alternatives:
            out["alternatives"] = self.alternatives
        return out


def rank(fetcher: Fetcher, plan: RecallPlan, question: Question) -> Ranked:
    """Everything before the gate: `ask` → [the same for each alternative the question names,
    merged: retrieval/alternatives.py] → the asked-for session first → profiles → confidence."""
    whole = ask(fetcher, plan, question)
    rows = whole.rows
    subs = alts.split(question.query) if plan.mode == "cc" and plan.alternatives else []
    if subs:
        lists = [rows] + [ask(fetcher, plan, replace(question, query=sub)).rows for sub in subs]
        rows = alts.merge(lists, whole.channels.words)
    rows, pinned = pin_session(fetcher, plan, question, rows, whole.channels)
    rows = add_profiles(fetcher, plan, question, rows)
    rows = score_confidence(fetcher, plan, question, rows, whole.channels.vectors)
    return Ranked(rows, whole, pinned, len(subs))


def ask(fetcher: Fetcher, plan: RecallPlan, question: Question) -> Fused:
    """One pass: channels → fuse → recency prior → word coverage → penalise → neighbour turns (cc)."""
    channels = fetcher.channels(plan, question)
    rows, alpha = fuse(fetcher, plan, question, channels)
    if not plan.cascaded(question):
        rows = recency.apply(rows, question.query, plan.recency_weight)
    if channels.words is not None:
        lexical.cover(rows, channels.words)
    rows = penalise(fetcher, plan, question, rows)
    return spread(fetcher, plan, question, Fused(rows, channels, alpha))


def fuse(fetcher: Fetcher, plan: RecallPlan, question: Question,
         channels: Channels) -> tuple[list[Candidate], float | None]:
    """One ranked list and cc's α (None outside cc). Cascade places the profile rows after
    episodes, before keyword rows (they count toward `limit`); fusion modes append them after
    penalties (`add_profiles`)."""
    found, fused = channels.found, not question.blank
    if plan.mode == "rrf" and fused:
        return fusion.rrf(found, plan.rrf_k, plan.weights), None
    if plan.mode == "rsf" and fused:
        return fusion.rsf(found, plan.weights), None
    if plan.mode == "cc" and fused:
        hits = channels.vectors
        backfill(hits, [c for name in ("episodes", "keyword") for c in found.get(name, [])])
        if channels.words is not None:
            lexical.score_episodes(found.get("episodes", []), channels.words)
            if plan.keyword_ceiling:
                fill_unlisted(found.get("vector", []), found.get("keyword", []), channels.unlisted, channels.words)
        alpha = plan.cc_alpha
        if alpha is None:
            index = hits.indexes.memories if hits is not None else None
            alpha = separation.cc_alpha(index, question.agent_id, separation.FALLBACK_ALPHA)
        return fusion.cc(found, alpha, channels.background, question.query if hits else None), alpha
    ordered = {k: v for k, v in found.items() if k != "keyword"}
    # Profile rows take keyword slots only when the gate will let them through (pool ≥ 50);
    # otherwise a blank-query recall would come back a row short.
    if plan.inject_profiles and fetcher.pool(question.scope) >= gate.PROFILE_MIN_POOL:
        ordered["profiles"] = profiles.injection(fetcher.session, question.agent_id)
    ordered["keyword"] = found.get("keyword", [])
    return fusion.cascade(ordered, question.limit), None


def backfill(hits: VectorHits | None, rows: list[Candidate]) -> int:
    """Cosine for the rows the vector retriever did not return (from the resident index)."""
    if hits is None:
        return 0
    return retrievers.backfill_cosine(rows, hits.qvec, hits.indexes.memories, hits.indexes.episodes)


def penalise(fetcher: Fetcher, plan: RecallPlan, question: Question, rows: list[Candidate]) -> list[Candidate]:
    """The episode boundary penalty, then a re-sort on the fused score (profile rows, present
    only in cascade lists, keep their place: cascade lists are never re-sorted)."""
    enabled, rate, floor = plan.episode_penalty
    if not enabled or not rows:
        return rows
    boundary = fetcher.session.episodes.latest_created(question.scope)
    if scoring.episode_penalty(rows, boundary, rate, floor) and not plan.cascaded(question):
        return scoring.resort_after_penalty(rows)
    return rows


def spread(fetcher: Fetcher, plan: RecallPlan, question: Question, fused: Fused) -> Fused:
    """cc rows with the neighbour turns of the best `limit` (retrieval/neighbours.py); needs
    the vector channel (rows without a vector neither lend nor borrow). Runs after the
    episode boundary penalty, so a row borrows w × its neighbour's penalised score and never
    outranks the row it borrowed from; fetched neighbours get the penalty and coverage first."""
    alpha, hits = fused.alpha, fused.channels.vectors
    if alpha is None or hits is None:
        return fused
    w = turns.weight(plan.neighbour_weight, alpha)
    if w <= 0:
        return fused
    evidence = fusion.vector_evidence(hits.background)
    # lenders: rows whose words or cosine could answer on their own (a conversation's turns rarely
    # hold the names a question asks about: the names rule of the answer bar is not applied here)
    bar = plan.gate(replace(question, deep=False), fetcher.pool(question.scope), hits.background)
    session = fetcher.session

    def settle(added: list[Candidate]) -> None:  # what the candidates got before the neighbours came
        if fused.channels.words is not None:
            lexical.cover(added, fused.channels.words)
        enabled, rate, floor = plan.episode_penalty
        if enabled:
            scoring.episode_penalty(added, session.episodes.latest_created(question.scope), rate, floor)

    rows = turns.spread(fused.rows, w, question.limit, session, hits.indexes.memories, hits.qvec, question.scope,
                        question.source_id, lambda cos: alpha * evidence(cos),
                        lambda c: not question.excludes(c.content), plan.session_gap_s, settle,
                        lambda c: bar.exact(c) or bar.evident(c, names=False))
    return replace(fused, rows=rows, lender=bar, neighbour_weight=w)


def pin_session(fetcher: Fetcher, plan: RecallPlan, question: Question, rows: list[Candidate],
                channels: Channels) -> tuple[list[Candidate], frozenset[tuple[str, int]]]:
    """A question about the last (or first) session gets that episode first
    (retrieval/sessions.py); returns the rows and the pinned row's key."""
    sign = 0 if plan.cascaded(question) else sessions.direction(question.query)
    if not sign or not retrievers.Query(question.query, question.scope, question.limit,
                                        question.source_id).episodes_allowed:
        return rows, frozenset()
    row = sessions.episode(fetcher.session, question.scope, sign)
    if row is None:
        return rows, frozenset()
    cand = retrievers.episode_candidate(row)
    if channels.words is not None:
        lexical.cover([cand], channels.words)
    return sessions.pin(rows, cand, plan.mode), frozenset({cand.key})


def add_profiles(fetcher: Fetcher, plan: RecallPlan, question: Question, rows: list[Candidate]) -> list[Candidate]:
    """Fusion modes: profile rows (no score) go after every scored row."""
    if not plan.inject_profiles or plan.cascaded(question):
        return rows
    return rows + profiles.injection(fetcher.session, question.agent_id)


def score_confidence(fetcher: Fetcher, plan: RecallPlan, question: Question, rows: list[Candidate],
                     hits: VectorHits | None) -> list[Candidate]:
    """Confidence scoring (only when enabled): cosine backfill for keyword-only rows, then
    every row scored and sorted by confidence."""
    if plan.confidence is None or not rows:
        return rows
    if not question.blank:
        backfill(hits, rows)
    return confidence.apply(fetcher.session, rows, plan.confidence, question.scope, question.deep)
