"""Fusion of the retriever lists into one ranking.

* rrf     — reciprocal rank fusion: score(d) = Σ_c 1 / (k + rank_c(d) + 1), rank 0-based
            (Cormack, Clarke & Büttcher, SIGIR 2009; k = CPERSONA_RRF_K, default 60).
* rsf     — relative score fusion: per channel min-max normalise the raw score of this
            query's rows (cosine; −bm25), sum, divide by the number of channels that answered.
* cc      — convex combination with theoretical-min-max normalisation (Bruch, Gai & Ingber,
            "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023):
            cc(d) = α·max(cosine, 0) + (1 − α)·lexical, lexical = bm25 / the best bm25 of its
            keyword channel for this query (bm25's theoretical minimum is 0), 1.0 for a LIKE
            substring hit. Every candidate carries both evidences: the pipeline gives keyword
            rows their cosine from the resident index before fusing (a missing cosine would
            count as 0 and push keyword hits below vector hits), and reads the memory keyword
            channel 2·limit deep so the cosine can lift a hit from just below the cut.
            Cosine keeps its absolute scale, so a weak vector channel cannot outvote strong
            keyword evidence; α = CPERSONA_CC_ALPHA (default 0.2). With the bundled USE model,
            NDCG@10 gain over keyword-only at α 0.1 / 0.2 / 0.3: LoCoMo +0.001 / +0.002 /
            +0.000, JSQuAD +0.002 / +0.003 / +0.004, LongMemEval oracle +0.012 / +0.022 /
            +0.035 (benchmarks/README.md); 0.2 is the best α that gains on all three.
* cascade — legacy sequential fill: vector, then episodes, then keyword; no fused score.

Input `channels` is an ordered mapping name → best-first list; first-seen order breaks ties.
"""

from __future__ import annotations

from collections.abc import Callable

from cpersona.retrieval.candidate import Candidate

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
                seen.lexical = seen.lexical if seen.lexical is not None else cand.lexical
            seen.channels.append(name)
    return merged


Weights = dict[str, float]


def rrf(channels: Channels, k: int, weights: Weights | None = None) -> list[Candidate]:
    """Reciprocal rank fusion Σ_c w_c / (k + rank_c + 1); sets `rrf`; best first.

    `weights` maps channel name → w_c (default 1.0 each)."""
    weights = weights or {}
    scores: dict[tuple[str, int], float] = {}
    for name, rows in channels.items():
        w = weights.get(name, 1.0)
        for rank, cand in enumerate(rows):
            scores[cand.key] = scores.get(cand.key, 0.0) + w / (k + rank + 1)
    merged = _merge(channels)
    for key, cand in merged.items():
        cand.rrf = scores[key]
    return sorted(merged.values(), key=lambda c: -scores[c.key])


_RAW: dict[str, Callable[[Candidate], float | None]] = {
    "vector": lambda c: c.cosine,
    "episodes": lambda c: None if c.bm25 is None else -c.bm25,
    "keyword": lambda c: c.lexical,
}


def _min_max(values: list[float | None]) -> list[float]:
    known = [v for v in values if v is not None]
    if not known:
        return [1.0] * len(values)
    lo, hi = min(known), max(known)
    if hi <= lo:
        return [1.0] * len(values)
    return [0.0 if v is None else (v - lo) / (hi - lo) for v in values]


def rsf(channels: Channels, weights: Weights | None = None) -> list[Candidate]:
    """Relative score fusion Σ_c w_c·norm_c / Σ_active w_c; sets `rsf` ∈ [0, 1]; best first.

    Channels that returned no row do not count in the denominator."""
    weights = weights or {}
    active = [name for name, rows in channels.items() if rows]
    totals: dict[tuple[str, int], float] = {}
    for name in active:
        rows = channels[name]
        w = weights.get(name, 1.0)
        raw = [_RAW[name](c) for c in rows]
        for cand, norm in zip(rows, _min_max(raw)):
            totals[cand.key] = totals.get(cand.key, 0.0) + w * norm
    merged = _merge(channels)
    denominator = sum(weights.get(name, 1.0) for name in active) or 1.0
    fused: dict[tuple[str, int], float] = {}
    for key, cand in merged.items():
        cand.rsf = fused[key] = totals.get(key, 0.0) / denominator
    return sorted(merged.values(), key=lambda c: -fused[c.key])


_LEXICAL = ("episodes", "keyword")


def cc(channels: Channels, alpha: float) -> list[Candidate]:
    """Convex-combination fusion; sets `lexical` and `cc` on every candidate; best first.

    Each keyword channel (memories, episodes) is normalised by its own best bm25: the two
    FTS tables have independent statistics (one archived episode has almost no IDF), so a
    joint scale would bury episodes. Equal scores keep memories before episodes."""
    for name in _LEXICAL:
        rows = channels.get(name) or []
        best = max((-c.bm25 for c in rows if c.bm25 is not None), default=0.0)
        for cand in rows:
            if cand.lexical is None:  # the memory channel scores its own rows (retrieval/lexical.py)
                cand.lexical = 1.0 if cand.bm25 is None or best <= 0 else -cand.bm25 / best
    ordered: Channels = {name: channels[name] for name in ("vector", "keyword", "episodes") if name in channels}
    merged = _merge({**ordered, **channels})
    fused: dict[tuple[str, int], float] = {}
    for key, cand in merged.items():
        cos = max(cand.cosine or 0.0, 0.0)
        cand.cc = fused[key] = alpha * cos + (1.0 - alpha) * (cand.lexical or 0.0)
    return sorted(merged.values(), key=lambda c: -fused[c.key])


def cascade(channels: Channels, limit: int) -> list[Candidate]:
    """Sequential fill in channel order until `limit` rows; first occurrence wins."""
    out: dict[tuple[str, int], Candidate] = {}
    for rows in channels.values():
        for cand in rows:
            if len(out) >= limit:
                return list(out.values())
            out.setdefault(cand.key, cand)
    return list(out.values())
