"""Retrieval and latency metrics of the benchmarks: recall@k, MRR@10, NDCG@10 (binary gains,
or graded from a query's `relevance`; Järvelin & Kekäläinen, TOIS 2002), per-category
aggregation, percentiles (linear interpolation between closest ranks)."""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Sequence
from typing import Any


def query_gains(query: dict) -> dict[str, float]:
    """Gain per relevant memory id: the graded `relevance` map when present, else 1."""
    graded = query.get("relevance")
    if graded:
        return {k: float(v) for k, v in graded.items()}
    return {r: 1.0 for r in query["relevant"]}


def score_ranking(ranking: Sequence[Iterable[str]], query: dict) -> dict[str, float]:
    """Metrics of one query.

    `ranking` is best-first; each entry is the set of data-set ids that the returned row
    stands for (more than one when the server skipped an identical text as a duplicate and
    answered with the existing row; empty for rows we cannot map). A relevant id found in a
    row counts once (first occurrence). NDCG@10 uses linear gains g/log2(rank+1), the ideal
    ranking from the query's gains (same as fts5_baseline.py), clipped to 1.0 (reachable
    only when two relevant ids share one stored row).
    """
    gains = query_gains(query)
    relevant = set(query["relevant"]) | set(gains)
    seen: set[str] = set()
    found_at: dict[str, int] = {}
    dcg = 0.0
    first_hit = None
    for rank, ids in enumerate(ranking, start=1):
        hits = [i for i in ids if i in relevant and i not in seen]
        seen.update(hits)
        for i in hits:
            found_at[i] = rank
        if hits and first_hit is None:
            first_hit = rank
        if rank <= 10:
            dcg += sum(gains.get(i, 0.0) for i in hits) / math.log2(rank + 1)
    ideal = sorted(gains.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    n_rel = len(relevant) or 1
    return {
        "recall@5": sum(1 for r in found_at.values() if r <= 5) / n_rel,
        "recall@10": sum(1 for r in found_at.values() if r <= 10) / n_rel,
        "mrr@10": (1.0 / first_hit) if first_hit and first_hit <= 10 else 0.0,
        "ndcg@10": min(1.0, dcg / idcg) if idcg else 0.0,
        "first_hit": first_hit,
    }


METRIC_KEYS = ("recall@5", "recall@10", "mrr@10", "ndcg@10")


def aggregate(per_query: list[dict]) -> dict[str, Any]:
    """Mean metrics over `per_query` rows ({category, recall@5, …, rows}), overall and per
    category (categories sorted by size, largest first)."""

    def summary(rows: list[dict]) -> dict[str, Any]:
        out: dict[str, Any] = {"queries": len(rows)}
        for key in METRIC_KEYS:
            out[key] = round(sum(r[key] for r in rows) / len(rows), 4) if rows else 0.0
        out["mean_rows"] = round(sum(r["rows"] for r in rows) / len(rows), 2) if rows else 0.0
        out["zero_row_queries"] = sum(1 for r in rows if r["rows"] == 0)
        return out

    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for row in per_query:
        groups[row["category"]].append(row)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return {"overall": summary(per_query), "categories": {name: summary(rows) for name, rows in ordered}}


def percentile(values: Sequence[float], p: float) -> float:
    """p-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default); nan for an empty list."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_summary(ms: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / p99 / mean / max of per-call wall times in ms (rounded to 0.01 ms)."""
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "mean_ms": round(sum(ms) / len(ms), 2),
        "max_ms": round(max(ms), 2),
    }
