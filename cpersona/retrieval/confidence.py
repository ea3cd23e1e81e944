"""Confidence scoring (the original CPersona's formula), active only with
CPERSONA_CONFIDENCE_ENABLED=true.

Confidence is NOT match strength: it mixes the cosine with a dynamic time decay, the
resolved flag of episodes and the recall history of memories:

    eff_range   = max(MIN_TIME_RANGE_HOURS, range_h)            range_h = corpus time span
    age_h       = now − timestamp            (imputed when the row has none: newest_age + range/2)
    boost       = ln(1 + recall_count) · RECALL_BOOST, faded by 1/(1 + h_since_last_recall · BOOST_DECAY_RATE)
    floor       = min(DECAY_CEIL, DECAY_FLOOR + boost)
    time_decay  = 1 if deep else max(floor, 1 / (1 + age_h · DECAY_RATE / max(1, eff_range / REFERENCE_HOURS)))
    completion  = RESOLVED_DECAY_FACTOR for a resolved episode (not deep), else 1
    recency_pen = RECENT_RECALL_PENALTY when the row was recalled within RECENT_RECALL_WINDOW_MIN (not deep)
    norm_cos    = clamp((cos − COSINE_FLOOR) / (COSINE_CEIL − COSINE_FLOOR), 0, 1)
    score       = round(sqrt(norm_cos · time_decay) · completion · recency_pen, 4)   (cosine-less: sqrt(time_decay) · …)

With confidence on, the pipeline first back-fills a cosine for keyword-only rows from their
resident vectors (`retrievers.backfill_cosine`), re-sorts every row by confidence, and the gate keys on
it; recall_count / last_recalled_at of returned memories are bumped afterwards by the recall
service (not for deep recalls, gate_fallback rescues, or while persistence is paused).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from cpersona.config import Settings
from cpersona.retrieval.candidate import MEMORY, Candidate
from cpersona.storage import Session
from cpersona.storage.scope import Scope
from cpersona.util.time import parse_ts


@dataclass(frozen=True)
class ConfidenceParams:
    """The knobs of the formula (CPERSONA_* settings of the same names)."""

    cosine_floor: float = 0.20
    cosine_ceil: float = 0.75
    decay_rate: float = 0.005
    decay_floor: float = 0.3
    decay_ceil: float = 0.5
    recall_boost: float = 0.02
    boost_decay_rate: float = 0.002
    min_time_range_hours: float = 24.0
    reference_hours: float = 168.0
    resolved_decay_factor: float = 0.3
    recent_recall_penalty: float = 0.7
    recent_recall_window_min: float = 5.0

    @classmethod
    def from_settings(cls, s: Settings) -> ConfidenceParams:
        return cls(**{name: getattr(s, name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class CorpusSpan:
    """Time span of the memories in scope: range_h (MAX − MIN) and the newest row's age."""

    range_h: float = 0.0
    newest_age_h: float | None = None


def corpus_span(session: Session, scope: Scope, now: datetime) -> CorpusSpan:
    """Span of the parseable memory timestamps inside `scope`."""
    span = session.memories.timestamp_span(scope)
    if span is None:
        return CorpusSpan()
    now_jd = now.timestamp() / 86400.0 + 2440587.5  # Unix epoch as a Julian day
    return CorpusSpan(max(0.0, (span[1] - span[0]) * 24.0), max(0.0, (now_jd - span[1]) * 24.0))


def _hours(a: datetime, b: datetime) -> float:
    return (a - b).total_seconds() / 3600.0


def score(
    cand: Candidate,
    p: ConfidenceParams,
    span: CorpusSpan,
    stats: tuple[int, str | None] | None,
    now: datetime,
    deep: bool = False,
) -> dict:
    """The confidence object of one row: {age_hours, age_unknown?, resolved?, cosine?, score}."""
    eff_range = max(p.min_time_range_hours, span.range_h)
    stamp = parse_ts(cand.timestamp)
    detail: dict = {}
    if stamp is not None:
        age_h = max(0.0, _hours(now, stamp))
    else:
        detail["age_unknown"] = True
        age_h = span.newest_age_h + span.range_h / 2 if span.newest_age_h is not None else eff_range / 2
    rc, last = stats or (0, None)
    last_ts = parse_ts(last) if last else None
    boost = math.log1p(rc) * p.recall_boost
    if boost > 0 and last_ts is not None:
        boost *= 1.0 / (1.0 + max(0.0, _hours(now, last_ts)) * p.boost_decay_rate)
    floor = min(p.decay_ceil, p.decay_floor + boost)
    if deep:
        time_decay = 1.0
    elif span.range_h > 0:
        time_decay = max(floor, 1.0 / (1.0 + age_h * p.decay_rate / max(1.0, eff_range / p.reference_hours)))
    else:
        time_decay = max(floor, 1.0 / (1.0 + age_h * p.decay_rate))
    completion = p.resolved_decay_factor if cand.resolved and not deep else 1.0
    recent = last_ts is not None and 0 <= _hours(now, last_ts) * 60.0 <= p.recent_recall_window_min
    recency_pen = p.recent_recall_penalty if recent and not deep else 1.0
    if cand.cosine is not None:
        span_cos = p.cosine_ceil - p.cosine_floor
        norm = 0.0 if span_cos <= 0 else min(1.0, max(0.0, (cand.cosine - p.cosine_floor) / span_cos))
        value = math.sqrt(norm * time_decay) * completion * recency_pen
        detail["cosine"] = round(cand.cosine, 4)
    else:
        value = math.sqrt(time_decay) * completion * recency_pen
    if cand.resolved:
        detail["resolved"] = True
    detail["age_hours"] = round(age_h, 1)
    if recency_pen < 1.0:
        detail["recently_recalled"] = True
    detail["score"] = round(value, 4)
    return detail


def apply(
    session: Session,
    rows: list[Candidate],
    p: ConfidenceParams,
    scope: Scope,
    deep: bool = False,
    now: datetime | None = None,
) -> list[Candidate]:
    """Score every row (memories, episodes, profiles) and sort by confidence, best first."""
    now = now or datetime.now(UTC)
    span = corpus_span(session, scope, now)
    stats = session.memories.recall_stats([c.id for c in rows if c.kind == MEMORY])
    for cand in rows:
        detail = score(cand, p, span, stats.get(cand.id) if cand.kind == MEMORY else None, now, deep)
        cand.confidence = detail["score"]
        cand.confidence_detail = detail
    return sorted(rows, key=lambda c: -cast(float, c.confidence))  # set on every row just above
