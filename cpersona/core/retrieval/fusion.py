"""Fusion of the retriever lists (spec retrieval.md §4).

* rrf     — reciprocal rank fusion: score(d) = Σ_c 1 / (k + rank_c(d) + 1), rank 0-based
            (Cormack, Clarke & Büttcher, SIGIR 2009; k = CPERSONA_RRF_K, default 60).
* rsf     — relative score fusion: per channel min-max normalise the raw score of this
            query's rows (cosine; −bm25), sum, divide by the number of channels that answered.
* cascade — legacy sequential fill: vector, then episodes, then keyword; no fused score.

Input `channels` is an ordered mapping name → best-first list; first-seen order breaks ties.
"""

from __future__ import annotations

from typing import Callable

from cpersona.core.retrieval.candidate import Candidate

Channels = dict[str, list[Candidate]]


def _merge(channels: Channels) -> dict[tuple[str, int], Candidate]:
    """Union by identity, first occurrence wins; scores from later channels are copied in."""
    merged: dict[tuple[str, int], Candidate] = {}
    for name, rows in channels.items():
        for cand in rows:
            seen = merged.get(cand.key)
            if seen is None:
                merged[cand.key] = cand
                seen = cand
            else:
                seen.cosine = seen.cosine if seen.cosine is not None else cand.cosine
                seen.bm25 = seen.bm25 if seen.bm25 is not None else cand.bm25
            seen.channels.append(name)
    return merged


def rrf(channels: Channels, k: int) -> list[Candidate]:
    """Reciprocal rank fusion; sets `rrf` on every candidate; best first."""
    scores: dict[tuple[str, int], float] = {}
    for rows in channels.values():
        for rank, cand in enumerate(rows):
            scores[cand.key] = scores.get(cand.key, 0.0) + 1.0 / (k + rank + 1)
    merged = _merge(channels)
    for key, cand in merged.items():
        cand.rrf = scores[key]
    return sorted(merged.values(), key=lambda c: -c.rrf)


_RAW: dict[str, Callable[[Candidate], float | None]] = {
    "vector": lambda c: c.cosine,
    "episodes": lambda c: None if c.bm25 is None else -c.bm25,
    "keyword": lambda c: None if c.bm25 is None else -c.bm25,
}


def _min_max(values: list[float | None]) -> list[float]:
    known = [v for v in values if v is not None]
    if not known:
        return [1.0] * len(values)
    lo, hi = min(known), max(known)
    if hi <= lo:
        return [1.0] * len(values)
    return [0.0 if v is None else (v - lo) / (hi - lo) for v in values]


def rsf(channels: Channels) -> list[Candidate]:
    """Relative score fusion; sets `rsf` ∈ [0, 1] on every candidate; best first."""
    active = [name for name, rows in channels.items() if rows]
    totals: dict[tuple[str, int], float] = {}
    for name in active:
        rows = channels[name]
        raw = [_RAW[name](c) for c in rows]
        for cand, norm in zip(rows, _min_max(raw)):
            totals[cand.key] = totals.get(cand.key, 0.0) + norm
    merged = _merge(channels)
    n_active = max(1, len(active))
    for key, cand in merged.items():
        cand.rsf = totals.get(key, 0.0) / n_active
    return sorted(merged.values(), key=lambda c: -c.rsf)


def cascade(channels: Channels, limit: int) -> list[Candidate]:
    """Sequential fill in channel order until `limit` rows; first occurrence wins."""
    out: dict[tuple[str, int], Candidate] = {}
    for rows in channels.values():
        for cand in rows:
            if len(out) >= limit:
                return list(out.values())
            out.setdefault(cand.key, cand)
    return list(out.values())
