"""Recall orchestration (spec retrieval.md §1): retrievers → fusion → penalties → gate →
limit → reverse → response. Each stage is a plain function of this package; this module
only wires them and shapes the response.

The response lists rows WORST → BEST: the last element is the strongest match, because an
LLM attends most to the end of its context (seed §検索, 最後の反転).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cpersona.core.isolation import Scope
from cpersona.core.retrieval import fusion, gate, retrievers, scoring
from cpersona.core.retrieval.candidate import EPISODE, Candidate
from cpersona.core.vector_index import VectorIndex

#: Exclusion entries shorter than this exclude only exact equals (spec retrieval.md §3).
EXCLUDE_PREFIX_MIN = 32


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
    """What the pipeline needs from the engine for one recall."""

    conn: sqlite3.Connection
    mode: str
    rrf_k: int
    fts_enabled: bool
    window: int
    vector_threshold: float
    memory_index: VectorIndex | None
    episode_index: VectorIndex | None
    embed_query: Callable[[str], np.ndarray | None]
    weights: dict[str, float] = field(default_factory=dict)
    cc_alpha: float = 0.2
    episode_penalty: tuple[bool, float, float] = (True, 0.01, 0.5)
    autocut: tuple[bool, int, float] = (True, 3, 0.15)
    trace: dict[str, Any] = field(default_factory=dict)


def _excluded(content: str, exclusions: list[str]) -> bool:
    text = content.strip().lower()
    if not text:
        return False
    for entry in exclusions:
        if len(entry) < EXCLUDE_PREFIX_MIN:
            if text == entry:
                return True
        elif text.startswith(entry) or entry.startswith(text):
            return True
    return False


def retrieve(ctx: RecallContext, req: RecallRequest) -> dict[str, list[Candidate]]:
    """Stage 1: run every retriever; returns ordered channels name → best-first rows."""
    query = retrievers.Query(req.query, req.scope, req.limit, req.source_id)
    blank = not req.query.strip()
    channels: dict[str, list[Candidate]] = {}
    qvec = None if blank else ctx.embed_query(req.query)
    if qvec is not None and ctx.memory_index is not None:
        factor = 1.0 if ctx.mode == "cascade" else 0.5
        channels["vector"] = retrievers.vector(
            ctx.conn, query, qvec, ctx.memory_index, ctx.episode_index, ctx.window, ctx.vector_threshold * factor
        )
    if not blank:
        channels["episodes"] = retrievers.episodes_fts(ctx.conn, query, ctx.fts_enabled)
    channels["keyword"] = retrievers.keyword(ctx.conn, query, ctx.fts_enabled)
    exclusions = [e.strip().lower() for e in req.exclude_contents if e.strip()]
    if exclusions:
        for name in ("vector", "keyword"):
            if name in channels:
                channels[name] = [c for c in channels[name] if not _excluded(c.content, exclusions)]
    return channels


def fuse(ctx: RecallContext, req: RecallRequest, channels: dict[str, list[Candidate]]) -> list[Candidate]:
    """Stage 2: one ranked list (rrf / rsf; cascade for blank queries or mode cascade)."""
    if ctx.mode == "rrf" and req.query.strip():
        return fusion.rrf(channels, ctx.rrf_k, ctx.weights)
    if ctx.mode == "rsf" and req.query.strip():
        return fusion.rsf(channels, ctx.weights)
    if ctx.mode == "cc" and req.query.strip():
        return fusion.cc(channels, ctx.cc_alpha)
    return fusion.cascade(channels, req.limit)


def penalise(ctx: RecallContext, req: RecallRequest, rows: list[Candidate]) -> list[Candidate]:
    """Stage 3: episode boundary penalty, then re-sort on the fused score."""
    enabled, rate, floor = ctx.episode_penalty
    if not enabled or not rows:
        return rows
    boundary = scoring.latest_episode_boundary(ctx.conn, req.scope)
    if scoring.episode_penalty(rows, boundary, rate, floor):
        return scoring.resort_after_penalty(rows)
    return rows


def apply_gate(ctx: RecallContext, req: RecallRequest, rows: list[Candidate]) -> list[Candidate]:
    """Stage 4: quality gate, then autocut on similarity-scale lists."""
    pool = gate.pool_size(ctx.conn, req.scope)
    g = gate.Gate(pool, gate.min_score(pool, req.deep), ctx.rrf_k, not req.query.strip(), tuple(gate.exact_needles(req.query)))
    kept = g.apply(rows)
    ctx.trace.update(pool=pool, min_score=g.min_score, before_gate=len(rows), after_gate=len(kept))
    enabled, min_results, ratio = ctx.autocut
    return gate.autocut(kept, min_results, ratio) if enabled else kept


def message(cand: Candidate) -> dict[str, Any]:
    """Response row: content, ref, source, timestamp, id (msg_id), match_reason."""
    msg: dict[str, Any] = {"content": cand.content}
    if cand.ref:
        msg["ref"] = cand.ref
    if cand.source:
        msg["source"] = cand.source
    if cand.timestamp:
        msg["timestamp"] = cand.timestamp
    if cand.msg_id:
        msg["id"] = cand.msg_id
    sig = gate.signal(cand)
    if sig is not None:
        reason: dict[str, Any] = {"signal": sig[0], "score": sig[1]}
        for name in ("cosine", "rrf", "rsf", "cc", "lexical"):
            if getattr(cand, name) is not None:
                reason[name] = getattr(cand, name)
        if cand.channels:
            reason["retrievers"] = list(dict.fromkeys(cand.channels))
        msg["match_reason"] = reason
    return msg


def recall(ctx: RecallContext, req: RecallRequest) -> list[dict[str, Any]]:
    """Run the whole pipeline; returns messages ordered worst → best (last = best)."""
    channels = retrieve(ctx, req)
    rows = fuse(ctx, req, channels)
    rows = penalise(ctx, req, rows)
    rows = apply_gate(ctx, req, rows)
    rows = rows[: req.limit]
    rows.reverse()
    ctx.trace["channels"] = {name: len(found) for name, found in channels.items()}
    return [message(c) for c in rows]


__all__ = ["RecallRequest", "RecallContext", "recall", "retrieve", "fuse", "penalise", "apply_gate", "EPISODE"]
