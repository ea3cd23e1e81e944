"""Statistics of calibration: pure functions of numpy arrays (no I/O).

Separation search: 256 candidate thresholds evenly spaced over [min, max] of null ∪
positives; pick the first argmax of TPR + β·(1 − FPR) (subject to TPR ≥ min_keep);
threshold = max(c*, floor); the reported youden_j is TPR − FPR at c* (Youden, "Index for
rating diagnostic tests", Cancer 1950).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np

SEARCH_POINTS = 256


def pair_similarities(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(full similarity matrix, its upper triangle without the diagonal = the null)."""
    sims = vectors @ vectors.T
    upper = np.triu_indices(len(vectors), 1)
    return sims, sims[upper].astype(np.float64)


@dataclass(frozen=True)
class Separation:
    """The chosen threshold and its rates on the two samples."""

    threshold: float
    youden_j: float
    tpr: float
    fpr: float


def separation_search(
    null: np.ndarray, pos: np.ndarray, beta: float, floor: float, min_keep: float = 0.0
) -> Separation:
    """Threshold maximising TPR + β·(1 − FPR) over 256 evenly spaced candidates (first
    argmax), among candidates keeping at least `min_keep` of the positives."""
    null = np.asarray(null, np.float64)
    pos = np.asarray(pos, np.float64)
    lo = float(min(null.min(), pos.min()))
    hi = float(max(null.max(), pos.max()))
    if hi <= lo:
        return Separation(max(lo, floor), 0.0, 1.0, 1.0)
    cands = np.linspace(lo, hi, SEARCH_POINTS)
    null_sorted, pos_sorted = np.sort(null), np.sort(pos)
    tpr = 1.0 - np.searchsorted(pos_sorted, cands, side="left") / len(pos_sorted)
    fpr = 1.0 - np.searchsorted(null_sorted, cands, side="left") / len(null_sorted)
    objective = tpr + beta * (1.0 - fpr)
    objective[tpr < min_keep - 1e-12] = -np.inf
    i = int(np.argmax(objective))
    return Separation(max(float(cands[i]), floor), float(tpr[i] - fpr[i]), float(tpr[i]), float(fpr[i]))


def sessions(stamps: list[datetime], window_s: float) -> int:
    """Number of sessions in sorted timestamps (a gap > window starts a new one)."""
    if not stamps:
        return 0
    return 1 + sum(1 for a, b in itertools.pairwise(stamps) if (b - a).total_seconds() > window_s)


def temporal_positives(vectors: np.ndarray, stamps: list[datetime], window_s: float) -> np.ndarray:
    """Cosines of time-consecutive pairs at most `window_s` apart (rows sorted by time)."""
    out = [float(vectors[i] @ vectors[i + 1]) for i in range(len(stamps) - 1)
           if (stamps[i + 1] - stamps[i]).total_seconds() <= window_s]
    return np.array(out, np.float64)


def rounded(value: float | None, digits: int = 4) -> float | None:
    """`value` rounded for a response; None for None or a non-finite value."""
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def summary(values: np.ndarray) -> dict[str, float | None]:
    """{mean, std, median, p95} of a sample, rounded."""
    return {"mean": rounded(values.mean()), "std": rounded(values.std()), "median": rounded(np.median(values)),
            "p95": rounded(np.quantile(values, 0.95))}
