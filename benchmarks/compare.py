"""Paired comparison of two `retrieval.py` result files on the same data set.

    python benchmarks/compare.py benchmarks/results/retrieval-locomo-none.json \\
        benchmarks/results/retrieval-locomo-local.json [--metric ndcg@10]

For every query scored in both runs, d = metric(B) − metric(A). Prints, overall and per
category: queries, mean of A, mean of B, mean d ± its standard error (sample standard
deviation / √n), and how many queries B won / lost. A difference smaller than about two
standard errors is within the noise of this query set.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt, print_table

METRICS = ("ndcg@10", "recall@10", "recall@5", "mrr@10")


def per_query(path: Path, metric: str) -> dict[str, tuple[str, float]]:
    """{query id: (category, metric)} from a retrieval.py JSON file.

    Raises SystemExit with a one-line message when the file is not a retrieval result."""
    try:
        rows = json.loads(path.read_text())["per_query"]
        return {r["id"]: (r["category"], float(r[metric])) for r in rows}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{path}: not a retrieval.py result with per-query {metric!r} ({err})") from None


def paired(a: list[float], b: list[float]) -> list:
    """[n, mean a, mean b, mean d, standard error of d, wins, losses] for paired lists."""
    n = len(a)
    diffs = [y - x for x, y in zip(a, b)]
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
    return [n, sum(a) / n, sum(b) / n, mean, math.sqrt(var / n), sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path, help="baseline result JSON")
    p.add_argument("b", type=Path, help="result JSON to compare with the baseline")
    p.add_argument("--metric", default="ndcg@10", choices=METRICS)
    args = p.parse_args(argv)
    a, b = per_query(args.a, args.metric), per_query(args.b, args.metric)
    common_ids = [q for q in a if q in b]
    if not common_ids:
        raise SystemExit("the two files share no query id: different data sets or --max-queries")
    groups: dict[str, list[str]] = {"OVERALL": common_ids}
    for q in common_ids:
        groups.setdefault(a[q][0], []).append(q)
    table = []
    for name, ids in groups.items():
        n, ma, mb, d, se, won, lost = paired([a[q][1] for q in ids], [b[q][1] for q in ids])
        table.append([name, n, fmt(ma, 4), fmt(mb, 4), f"{d:+.4f} ± {se:.4f}", won, lost])
    print(f"{args.metric}: A = {args.a.name}, B = {args.b.name}")
    print_table(["category", "queries", "A", "B", "B − A ± s.e.", "B won", "B lost"], table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
