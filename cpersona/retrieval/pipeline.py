"""One recall, stage by stage, each stage a function returning a value:

    RecallPlan + Question ──fetcher──▶ Channels ──▶ Fused ──▶ Ranked ──▶ Gated ──▶ Answer

`fetch.py` reads the channels through the injected fetcher, `ranking.py` fuses and ranks them
(`rank`, shared with calibration), this module gates the ranked rows (`apply_gate`: the answer
bar, the per-row gate, the gate_fallback rescue, autocut) and cuts them to the limit (`recall`).
The answer holds the rows best first; service/answers.py writes them worst → best, because an
LLM attends most to the end of its context (the design's "final reversal").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cpersona.retrieval import gate
from cpersona.retrieval.candidate import PROFILE, Candidate
from cpersona.retrieval.fetch import Fetcher
from cpersona.retrieval.plan import Question, RecallPlan
from cpersona.retrieval.ranking import Ranked, rank

#: A recall runs (retrievers, neighbour turns, the gate's answer bar) at least this deep — the
#: `recall` tool's default limit — and then returns its first `limit` rows: a smaller limit
#: gives the first rows of the default answer, never other rows and never nothing where the
#: default answers (judging only the first 3 rows, say, made a recall empty at limit 3 that
#: answered at 10).
JUDGED_DEPTH = 10


@dataclass(frozen=True)
class Gated:
    """The rows the gate let through (best first) and what it held back."""

    rows: list[Candidate]
    gate: gate.Gate
    #: rows that matched but were all held back by the gate (0 when any row passes)
    withheld: int
    #: the query's identifiers and names that none of those withheld rows mentions
    unmentioned: list[str]
    #: the rescue (confidence on): nothing but profiles passed, the back-filled rows are returned
    fallback: bool
    #: rows ranked before the gate, and the rows that passed it (before the rescue and autocut)
    before: int
    passed: int

    @property
    def trace(self) -> dict[str, Any]:
        g = self.gate
        return {"pool": g.pool, "min_score": g.min_score, "fused_gate": g.fused_gate, "gate_signal": g.gate_signal,
                "before_gate": self.before, "after_gate": self.passed}


@dataclass(frozen=True)
class Answer:
    """What a recall found: its rows best first (at most `limit`), what the gate held back, the
    rescue flag, whether the vector channel ran, and the trace of every stage."""

    rows: list[Candidate]
    withheld: int
    unmentioned: list[str]
    fallback: bool
    vectors: bool
    trace: dict[str, Any]


def recall(fetcher: Fetcher, plan: RecallPlan, question: Question) -> Answer:
    """The whole pipeline at depth max(limit, `JUDGED_DEPTH`), cut to the first `limit` rows."""
    deep = replace(question, limit=max(question.limit, JUDGED_DEPTH))
    ranked = rank(fetcher, plan, deep)
    gated = apply_gate(fetcher, plan, deep, ranked)
    return Answer(gated.rows[: question.limit], min(gated.withheld, question.limit), gated.unmentioned,
                  gated.fallback, ranked.whole.channels.vectors is not None, {**ranked.trace, **gated.trace})


def make_gate(fetcher: Fetcher, plan: RecallPlan, question: Question, ranked: Ranked) -> gate.Gate:
    """The gate of this recall; the neighbour turns' lender bar when that is the same gate (a
    recall that is not deep and names no row)."""
    lender = ranked.whole.lender
    if lender is not None and not question.deep and not ranked.pinned:
        return lender
    return plan.gate(question, fetcher.pool(question.scope), ranked.whole.channels.background, ranked.pinned)


def apply_gate(fetcher: Fetcher, plan: RecallPlan, question: Question, ranked: Ranked) -> Gated:
    """The quality gate; the gate_fallback rescue (confidence on: nothing but profiles
    survived, yet some row has a back-filled cosine ⇒ return those rows, flagged); else
    autocut on similarity-scale lists (exact matches survive it)."""
    g = make_gate(fetcher, plan, question, ranked)
    rows = ranked.rows
    kept = g.apply(rows, question.limit)
    answered = any(c.kind != PROFILE for c in kept)
    withheld = 0 if answered else sum(c.kind != PROFILE for c in rows[: question.limit])
    unmentioned = g.missing(rows[: question.limit]) if withheld else []

    def gated(out: list[Candidate], fallback: bool = False) -> Gated:
        return Gated(out, g, withheld, unmentioned, fallback, len(rows), len(kept))

    if plan.confidence is not None and any(c.backfilled for c in rows) and not answered:
        return gated([c for c in rows if c.backfilled] + [c for c in kept if c.kind == PROFILE], fallback=True)
    if not answered:
        return gated([])  # no row answers: the answer is empty, not the profile alone
    enabled, min_results, ratio = plan.autocut
    return gated(gate.autocut(kept, min_results, ratio, keep=g.exact) if enabled else kept)
