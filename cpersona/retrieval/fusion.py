"""Fusion of the retriever lists into one ranking.

* rrf     — reciprocal rank fusion: score(d) = Σ_c 1 / (k + rank_c(d) + 1), rank 0-based
            (Cormack, Clarke & Büttcher, SIGIR 2009; k = CPERSONA_RRF_K, default 60).
* rsf     — relative score fusion: per channel min-max normalise the raw score of this
            query's rows (cosine; −bm25), sum, divide by the number of channels that answered.
* cc      — convex combination with theoretical-min-max normalisation (Bruch, Gai & Ingber,
            "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023):
            cc(d) = α·v(d) + (1 − α)·lexical(d). lexical = bm25 / the best bm25 of its keyword
            channel for this query (bm25's theoretical minimum is 0), 1.0 for a LIKE substring
            hit. v = the cosine's excess over the query's background in the scan window, in
            units of the chance maximum (`vector_evidence`). Every candidate carries both
            evidences: the pipeline gives keyword rows their cosine from the resident index
            before fusing (a missing cosine would count as 0 and push keyword hits below
            vector hits), and reads the memory keyword channel 2·limit deep so the cosine can
            lift a hit from just below the cut. α = CPERSONA_CC_ALPHA when set, else chosen per
            agent from how well its vectors separate related rows (retrieval/separation.py):
            a fixed α suits one corpus only (with the bundled USE model the best α of one public
            set is far from another's: benchmarks/rounds/2026-11-30-round-02-word-index.md).
* cascade — legacy sequential fill: vector, then episodes, then keyword; no fused score.

Input `channels` is an ordered mapping name → best-first list; first-seen order breaks ties.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from cpersona.index.vector_index import WindowStats
from cpersona.retrieval.candidate import Candidate
from cpersona.util import scripts

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
#: Twice the chance maximum: a row that far above its background is a clear hit; the cap
#: keeps cc within [0, 2] for any α, the range a calibrated cc gate is checked against.
EVIDENCE_CAP = 2.0


#: A row whose letters the keyword channels can read at most this share of (the rest in
#: scripts the query does not use) has its unseen part judged by the vector evidence (`cc`).
#: Rows mostly in the query's scripts are not: the few foreign-script words of a row (a
#: Latin name in a Japanese paragraph) repeat what the rest says, and imputing them moved
#: answers down (measured: benchmarks/rounds/2026-11-30-round-06-cross-language.md).
MOSTLY_UNSEEN = 0.5


def vector_evidence(background: WindowStats | None) -> Callable[[float], float]:
    """cc's vector evidence of a cosine: how far it stands above the query's background
    (the mean μ of its cosines over the scan window), in units of the largest excess that
    chance gives n unrelated rows, σ·√(2 ln n) (the expected maximum of n Gaussian draws,
    e.g. Cramér 1946), floored at 0 and capped at EVIDENCE_CAP: 1 ≈ "as close as the closest
    of n unrelated rows".
    A raw cosine says little across corpora and models (USE's unrelated rows sit around 0.1
    on one store and 0.2 on another); the excess over the query's own background does not
    depend on either. Without a background (fewer than 2 rows scored, or no spread) the
    cosine itself, floored at 0."""
    if background is None or background.n < 2 or background.std <= 0:
        return lambda cos: max(cos, 0.0)
    mu, unit = background.mean, background.std * math.sqrt(2.0 * math.log(background.n))
    return lambda cos: min(max((cos - mu) / unit, 0.0), EVIDENCE_CAP)


def cc(channels: Channels, alpha: float, background: WindowStats | None = None,
       query: str | None = None) -> list[Candidate]:
    """Convex-combination fusion; sets `lexical` and `cc` on every candidate; best first.

    Each keyword channel (memories, episodes) is normalised by its own best bm25: the two
    FTS tables have independent statistics (one archived episode has almost no IDF), so a
    joint scale would bury episodes. Equal scores keep memories before episodes.

    With the `query` text (given when the query has a vector), the share s ∈ [0, 1] of each
    row that the keyword channels can judge is its script overlap with the query
    (util/scripts.py `seen_share`; without `query`, all of every row). A row they can read
    at most `MOSTLY_UNSEEN` of is judged on the part they cannot see by its vector evidence
    instead of a keyword score of 0: its keyword evidence becomes
    max(lexical, (1 − s)·v / EVIDENCE_CAP), never less than measured — on the keyword scale a
    clear vector hit (v at the cap) counts as a perfect keyword match, a row as close as the
    closest unrelated one (v = 1) as half of one. Without it an English question could not
    rank the Japanese row that answers it above an English row sharing one of its words
    whenever α is small (a bilingual store: benchmarks/crosslang.py). min(v, 1) instead put
    chance-level rows of other languages above paraphrased answers at 10k rows (SCALE with
    the bundled model; measured: benchmarks/rounds/2026-11-30-round-06-cross-language.md)."""
    for name in _LEXICAL:
        rows = channels.get(name) or []
        best = max((-c.bm25 for c in rows if c.bm25 is not None), default=0.0)
        for cand in rows:
            if cand.lexical is None:  # the memory channel scores its own rows (retrieval/lexical.py)
                cand.lexical = 1.0 if cand.bm25 is None or best <= 0 else -cand.bm25 / best
    ordered: Channels = {name: channels[name] for name in ("vector", "keyword", "episodes") if name in channels}
    merged = _merge({**ordered, **channels})
    fused: dict[tuple[str, int], float] = {}
    evidence = vector_evidence(background)
    for key, cand in merged.items():
        cos = evidence(cand.cosine or 0.0)
        lexical = cand.lexical or 0.0
        share = 1.0 if query is None else scripts.seen_share(query, cand.content)
        if share <= MOSTLY_UNSEEN:
            lexical = max(lexical, (1.0 - share) * cos / EVIDENCE_CAP)
        cand.cc = fused[key] = alpha * cos + (1.0 - alpha) * lexical
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
