"""Quality gate (spec retrieval.md §6–§9): is a candidate good enough to return at all?

The gate keys on the precedence chain rsf > cc > cosine > rrf — the same chain that names
`match_reason.signal` — against the pool-size heuristic
    min_score(pool) = 0.5 − 0.3 · min(1, ln(pool + 1) / ln 500)      (pool ≤ 0 → 0.5)
(0.5 on an empty store, 0.2 from ≈500 rows); rrf rows compare against min_score · 3/(k+1),
the same fraction of the largest possible rrf. A cc row passes when either of its
evidences clears min_score on its own scale: its cosine, or its lexical score (bm25
relative to the query's best keyword hit). Unscored rows (cascade keyword/episodes)
pass only for a blank query or a pool ≥ 100.

Our rule on top of the spec: an EXACT match is never gated. A row whose content contains
the whole query, a quoted phrase of it, or one of its identifiers (tokens with digits,
underscores, inner punctuation or camelCase: `CVE-2024-3094`, `ERR_TIMEOUT_1750`,
`src/app.py`, `getUserName`) is kept whatever its score — the earlier system returned
nothing for an exact error string on a 30-memory store with embeddings off.
"""

from __future__ import annotations

import math
import re
import sqlite3
from dataclasses import dataclass

from cpersona.core.isolation import Scope
from cpersona.core.retrieval.candidate import Candidate

#: Pool size at which the heuristic reaches its floor (spec retrieval.md §6).
POOL_SATURATION = 500
UNSCORED_MIN_POOL = 100
_QUOTED = re.compile(r"\"([^\"]{3,})\"|「([^」]{2,})」|'([^']{3,})'")
_EDGE_PUNCT = "\"'`()[]{}<>,;:!?。、，！？「」"
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
MIN_NEEDLE, MIN_CJK_NEEDLE = 3, 2
_IDENT = re.compile(r"\d|_|[A-Za-z0-9][-./:#@][A-Za-z0-9]|[a-z][A-Z]")


def pool_size(conn: sqlite3.Connection, scope: Scope) -> int:
    """Rows the gate governs: memories + episodes inside `scope` (source_id ignored)."""
    where, params = scope.predicate()
    sql = f"SELECT (SELECT COUNT(*) FROM memories WHERE {where}) + (SELECT COUNT(*) FROM episodes WHERE {where})"
    return conn.execute(sql, params + params).fetchone()[0]


def min_score(pool: int, deep: bool = False) -> float:
    """Pool-size heuristic threshold on a similarity scale; halved for `deep`."""
    if pool <= 0:
        base = 0.5
    else:
        base = round(0.5 - 0.3 * min(1.0, math.log(pool + 1) / math.log(POOL_SATURATION)), 4)
    return base * 0.5 if deep else base


def signal(cand: Candidate) -> tuple[str, float] | None:
    """(signal name, score) by precedence rsf > cc > cosine > rrf; None when unscored."""
    for name in ("rsf", "cc", "cosine", "rrf"):
        value = getattr(cand, name)
        if value is not None:
            return name, value
    return None


def exact_needles(query: str) -> list[str]:
    """Lower-cased strings whose presence in a row makes it an exact match: the whole
    query (≥ 3 chars, or ≥ 2 when it holds CJK — 梅雨 is a word), quoted phrases,
    identifier tokens."""
    whole = query.strip()
    shortest = MIN_CJK_NEEDLE if _CJK.search(whole) else MIN_NEEDLE
    needles = [whole] if len(whole) >= shortest else []
    needles += [next(g for g in m.groups() if g) for m in _QUOTED.finditer(query)]
    for token in query.split():
        token = token.strip(_EDGE_PUNCT)
        if len(token) >= 4 and _IDENT.search(token):
            needles.append(token)
    return [n.lower() for n in dict.fromkeys(needles)]


@dataclass(frozen=True)
class Gate:
    """Thresholds for one recall."""

    pool: int
    min_score: float
    rrf_k: int
    blank_query: bool
    needles: tuple[str, ...]

    def exact(self, cand: Candidate) -> bool:
        text = cand.content.lower()
        return any(n in text for n in self.needles)

    def passes(self, cand: Candidate) -> bool:
        if self.exact(cand):
            return True
        sig = signal(cand)
        if sig is None:
            return self.blank_query or self.pool >= UNSCORED_MIN_POOL
        name, value = sig
        if name == "cc":
            return any(v is not None and v >= self.min_score for v in (cand.cosine, cand.lexical))
        threshold = self.min_score * 3.0 / (self.rrf_k + 1) if name == "rrf" else self.min_score
        return value >= threshold

    def apply(self, rows: list[Candidate]) -> list[Candidate]:
        return [c for c in rows if self.passes(c)]


def autocut(rows: list[Candidate], min_results: int, min_gap_ratio: float) -> list[Candidate]:
    """Cut at the largest score gap (spec retrieval.md §9); only on all-cosine lists.

    Rank-fusion scores (rrf, rsf) carry no relevance breaks, so such lists are never cut.
    """
    if len(rows) < max(2, min_results) or any(getattr(rows[0], n) is not None for n in ("rrf", "rsf", "cc")):
        return rows
    if any(c.cosine is None for c in rows):
        return rows
    scores = [c.cosine for c in rows]
    if scores[0] <= 0:
        return rows
    gaps = [a - b for a, b in zip(scores, scores[1:])]
    best = max(range(len(gaps)), key=lambda i: gaps[i])
    if gaps[best] / scores[0] < min_gap_ratio:
        return rows
    return rows[: best + 1]
