"""How well an agent's vectors separate related from unrelated rows, measured on the
resident index, and the cc weight of the cosine that follows from it.

Related rows are rows next to each other in time (consecutive turns of one conversation,
consecutive facts of one session); unrelated rows are pairs drawn at random from the same
agent. The separation is the Gini coefficient of the two cosine samples, 2·AUC − 1, AUC =
P(cos(neighbours) > cos(random pair)) (Hanley & McNeil, Radiology 1982: the AUC as the
Mann–Whitney probability): 0 when the vectors cannot tell a neighbour from any other row,
1 when every neighbour pair is closer than every random pair.

On one long conversation between two people (LoCoMo), where every turn is about the same
lives, the bundled model separates weakly; on personal-assistant chats over many topics
(LongMemEval) and encyclopaedia paragraphs (JSQuAD) strongly (G and α per public set:
benchmarks/rounds/2026-11-30-round-03-vector-weight.md).
The weight of the vector evidence in `cc` follows it: α = ½ · G², G the separation. G is
Somers' D, a rank correlation between "the vectors say close" and "related"; its square,
like r² of a correlation, is the share of the ranking the vectors explain, and ½ makes α
the equal-weight convex combination when the vectors separate perfectly and 0 when they
separate nothing. Not measured
here: how good the MODEL is on a corpus's questions (a stronger model on the same rows
gets the same α; set CPERSONA_CC_ALPHA to override).
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from cpersona.index.vector_index import VectorIndex

#: Row pairs of each kind sampled per measurement (cost: 2 × PAIRS dot products).
PAIRS = 512
#: α when the separation cannot be measured: the fixed α of earlier releases, the largest that
#: gained on every public set (measured: benchmarks/rounds/2026-11-29-round-01-baseline.md).
FALLBACK_ALPHA = 0.2
#: The measurement is redone each time the agent's rows grow by this factor (`checkpoint`).
GROWTH = 1.05
#: Below this many embedded rows the sample says too little: the configured α is used.
MIN_ROWS = 50

#: index → agent → (the agent's row version, its separation); entries go with their index.
_cache: weakref.WeakKeyDictionary[VectorIndex, dict[str, tuple[tuple[int, int, int], float | None]]] = \
    weakref.WeakKeyDictionary()
_lock = threading.Lock()


def checkpoint(rows: int) -> int:
    """The largest 1.05^k (rounded down) ≤ `rows`: the measurement uses the agent's oldest
    `checkpoint(rows)` rows (≥ 95 % of them), so it is redone when the agent has grown by
    5 %, not after every store (a measurement costs ~1–2 ms), and stays a function of the
    stored rows alone."""
    if rows < 1:
        return 0
    return int(GROWTH ** math.floor(math.log(rows) / math.log(GROWTH) + 1e-9))


def gini(near: np.ndarray, far: np.ndarray) -> float:
    """2·AUC − 1 of `near` over `far` (ties count half)."""
    ordered = np.sort(far)
    below = np.searchsorted(ordered, near, side="left")
    ties = np.searchsorted(ordered, near, side="right") - below
    auc = float((below + 0.5 * ties).sum()) / (len(near) * len(far))
    return 2.0 * auc - 1.0


def separation(index: VectorIndex | None, agent_id: str | None) -> float | None:
    """The agent's separation (module doc) in [−1, 1]; None without an index, an agent or
    MIN_ROWS embedded rows. Cached per index and agent until the agent's rows pass the next
    `checkpoint` or one of the rows measured changes."""
    if index is None or agent_id is None:
        return None
    rows = checkpoint(index.agent_version(agent_id)[0])
    _, oldest, last = index.agent_version(agent_id, rows)
    version = (rows, oldest, last)
    with _lock:
        cached = _cache.get(index, {}).get(agent_id)
    if cached is not None and cached[0] == version:
        return cached[1]
    value = None
    if rows >= MIN_ROWS:
        pairs = index.pair_cosines(agent_id, PAIRS, rows)
        value = None if pairs is None else gini(*pairs)
    with _lock:
        _cache.setdefault(index, {})[agent_id] = (version, value)
    return value


def cc_alpha(index: VectorIndex | None, agent_id: str | None, fallback: float) -> float:
    """α of `cc` for one recall: ½ · the square of the agent's separation (0 when it is
    negative), or `fallback` when it cannot be measured."""
    sep = separation(index, agent_id)
    return fallback if sep is None else 0.5 * max(sep, 0.0) ** 2
