"""Calibration of the fused gate: the threshold on the score the gate keys on (confidence
when enabled, else the fusion mode's: cc / rsf / rrf).

One draw = up to CPERSONA_FUSED_GATE_SAMPLE_QUERIES of the agent's memories used as queries
(their stored vector is the query vector; the memory itself is excluded before fusion)
through the real ranking stages; every returned row is labelled positive when it lies within
the session window of the query memory (or, without time structure, when its stored vector
clears the vector threshold against the query's), else null. Threshold = separation search
with the agent's β, constrained to keep at least CPERSONA_FUSED_GATE_MIN_KEEP (0.9) of the
positives — the cap on how much the calibrated gate may remove, so a weak proxy cannot make
the gate cut relevant rows. Median (upper) of CPERSONA_FUSED_GATE_CALIBRATION_DRAWS draws. A
gate whose draws separate the labels worse than Youden J `MIN_GATE_J` measured nothing: the
heuristic gate is kept (`fused_gate_note`, not a failure).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from cpersona.calibration.stats import rounded, separation_search
from cpersona.config import Settings
from cpersona.index.vector_index import VectorIndex
from cpersona.retrieval import gate as gate_mod
from cpersona.retrieval.candidate import MEMORY, Candidate
from cpersona.retrieval.fetch import Indexes, SerialFetch
from cpersona.retrieval.gate import AgentGate
from cpersona.retrieval.plan import Question, RecallPlan, exclusions
from cpersona.retrieval.ranking import rank
from cpersona.storage import Database
from cpersona.storage.codec import from_blob
from cpersona.storage.scope import Scope
from cpersona.util.time import parse_ts

MIN_EMBEDDINGS = 10
#: Rows ranked per calibration query.
FUSED_DEPTH = 20
FUSED_MIN_NULL, FUSED_MIN_POS = 10, 5
#: A fused gate whose proxy labels separate worse than this (Youden's J of the chosen
#: draw) measured nothing: the heuristic gate is kept instead of a floor-level gate.
MIN_GATE_J = 0.1
#: A stored row asked as a calibration query is cut to this many characters — the length of
#: a long question. Whole rows (LongMemEval's assistant turns run to several thousand
#: characters) made each query's MATCH hundreds of terms long: calibrating the long-haystack
#: store took CPU minutes (measured: benchmarks/rounds/2026-12-01-round-07-calibration.md).
QUERY_CHARS = 300


@dataclass(frozen=True)
class FusedJob:
    """What one fused-gate calibration of one agent needs."""

    settings: Settings
    db: Database
    indexes: dict[str, VectorIndex]
    dim: int
    stale: tuple[int, int]
    agent_id: str
    vector_threshold: float
    beta: float
    signal: str
    temporal: bool


def _rank_as_query(job: FusedJob, content: str, qvec: np.ndarray) -> list[Candidate]:
    """The ranked pre-gate rows for `content` as a query (the memory itself excluded)."""
    question = Question(Scope(job.agent_id), content[:QUERY_CHARS], FUSED_DEPTH, exclusions=exclusions((content,)))
    plan = RecallPlan.of(job.settings, AgentGate(job.vector_threshold), inject_profiles=False)
    with job.db.read() as s:
        return rank(SerialFetch(s, qvec, Indexes.of(job.indexes)), plan, question).rows


def _label_draw(job: FusedJob, picked: list[tuple[int, str, str, bytes]], window_s: float,
                stop) -> tuple[list[float], list[float], int]:
    """(null scores, positive scores, queries run) of one draw."""
    null: list[float] = []
    pos: list[float] = []
    run = 0
    for row_id, content, ts, blob in picked:
        qts, qvec = parse_ts(ts), from_blob(blob)
        if stop() or not content.strip() or qts is None or qvec is None:
            continue
        run += 1
        rows = _rank_as_query(job, content, qvec)
        vectors: dict[int, bytes] = {}
        if not job.temporal:
            with job.db.read() as s:
                vectors = s.vectors.memory_blobs([c.id for c in rows if c.kind == MEMORY and c.id != row_id])
        for cand in rows:
            if cand.id <= 0 or (cand.kind == MEMORY and cand.id == row_id):
                continue
            sig = gate_mod.signal(cand)
            if sig is None or sig[0] != job.signal:
                continue
            if job.temporal:
                cts = parse_ts(cand.timestamp)
                if cts is None:
                    continue
                positive = abs((cts - qts).total_seconds()) <= window_s
            else:
                vec = from_blob(vectors.get(cand.id)) if cand.kind == MEMORY else None
                if vec is None:
                    continue
                positive = float(vec @ qvec) >= job.vector_threshold
            (pos if positive else null).append(sig[1])
    return null, pos, run


def calibrate(job: FusedJob, stop=lambda: False) -> dict[str, Any]:
    """The agent's fused gate: {threshold, youden_j, …} | {kept_heuristic, measured} | {error}."""
    s = job.settings
    with job.db.read() as session:
        candidates = session.vectors.dated_memories(job.dim, job.stale, job.agent_id)
    if len(candidates) < MIN_EMBEDDINGS:
        return {"error": f"need at least {MIN_EMBEDDINGS} embedded memories with a timestamp, found {len(candidates)}"}
    draws: list[dict[str, Any]] = []
    errors: list[str] = []
    queries_run = 0
    for draw in range(s.fused_gate_calibration_draws):
        if stop():
            break
        picked = random.Random(f"{job.agent_id}:{len(candidates)}:{draw}").sample(
            candidates, min(s.fused_gate_sample_queries, len(candidates)))
        null, pos, run = _label_draw(job, picked, s.calibrate_temporal_window_min * 60.0, stop)
        queries_run += run
        if len(null) < FUSED_MIN_NULL or len(pos) < FUSED_MIN_POS:
            errors.append(f"draw {draw}: {len(null)} null / {len(pos)} positive rows (need {FUSED_MIN_NULL} / "
                          f"{FUSED_MIN_POS})")
            continue
        draws.append(_draw_summary(np.array(null), np.array(pos), job.beta, s))
    if not draws:
        return {"error": "; ".join(errors[:3]) or "no draw ran"}
    draws.sort(key=lambda d: d["threshold"])
    chosen = dict(draws[len(draws) // 2])
    chosen.update(signal=job.signal, beta=job.beta, min_keep=s.fused_gate_min_keep, queries_run=queries_run,
                  proxy_source="temporal" if job.temporal else "semantic")
    if len(draws) > 1:
        chosen["threshold_draws"] = [d["threshold"] for d in draws]
    if (chosen["youden_j"] or 0.0) < MIN_GATE_J:
        return {"kept_heuristic": (
            f"the {chosen['proxy_source']} proxy does not separate related from unrelated rows on the {job.signal} "
            f"score (Youden J {chosen['youden_j']} < {MIN_GATE_J}); the heuristic gate is kept"), "measured": chosen}
    return chosen


def _draw_summary(nul: np.ndarray, po: np.ndarray, beta: float, s: Settings) -> dict[str, Any]:
    sep = separation_search(nul, po, beta, s.calibrate_floor, s.fused_gate_min_keep)
    return {"threshold": round(sep.threshold, 4), "youden_j": rounded(sep.youden_j), "n_null": len(nul),
            "n_pos": len(po), "null_admit_rate": rounded(float((nul >= sep.threshold).mean())),
            "pos_admit_rate": rounded(float((po >= sep.threshold).mean())), "null_mean": rounded(float(nul.mean())),
            "pos_mean": rounded(float(po.mean()))}
