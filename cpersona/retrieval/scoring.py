"""Post-fusion penalties.

Episode boundary penalty: archiving an episode marks everything said before it as older
context. Every non-episode row whose timestamp lies before the latest in-scope episode's
`created_at` has its cosine / rrf / rsf multiplied by
    factor = max(EPISODE_DECAY_FLOOR, exp(−EPISODE_DECAY_RATE × hours_before))
(defaults 0.5 and 0.01/h: the floor is reached after ln 2 / 0.01 ≈ 69 h). Episode rows,
profile rows and undated rows are exempt.
"""

from __future__ import annotations

import math

from cpersona.retrieval.candidate import MEMORY, Candidate
from cpersona.util.time import parse_ts


def episode_penalty(rows: list[Candidate], boundary: str | None, rate: float, floor: float) -> bool:
    """Apply the boundary penalty in place; True if any row was penalised."""
    limit = parse_ts(boundary)
    if limit is None:
        return False
    touched = False
    for cand in rows:
        stamp = parse_ts(cand.timestamp) if cand.kind == MEMORY else None
        if stamp is None or stamp >= limit:
            continue
        hours = (limit - stamp).total_seconds() / 3600.0
        factor = max(floor, math.exp(-rate * hours))
        cand.penalty *= factor
        for name in ("cosine", "rrf", "rsf", "cc", "lexical"):
            value = getattr(cand, name)
            if value is not None:
                setattr(cand, name, value * factor)
        touched = True
    return touched


def resort_after_penalty(rows: list[Candidate]) -> list[Candidate]:
    """Re-sort by the fused score when every row has one (rrf first, else rsf)."""
    for name in ("rrf", "rsf", "cc"):
        if rows and all(getattr(c, name) is not None for c in rows):
            return sorted(rows, key=lambda c: -getattr(c, name))
    return rows
