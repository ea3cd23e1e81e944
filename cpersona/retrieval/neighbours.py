"""Neighbour turns: a row may take a share of the score of the row next to it in its conversation.

In a conversation the words of a question often sit in one turn and the answer in the next
("Which one has been your favourite?" — "I loved *Becoming Nicole*…"), or a reply repeats
what the turn before it said: the answer holds none of the question's words and, in a
corpus whose turns all speak of the same lives, is no nearer the question's vector than
any other turn. The turn that matches says where to look. So, after fusion, each of the
best `top` memory rows and the rows just before and after it in its agent's
(created_at, id) order — the order the resident vector index keeps, the neighbours
`separation.py` measures — lend each other their score, damped by w:

    s'(x) = max(s(x), w · max{ s(y) : y next to x, x or y among the best `top` })

A row never loses score and a strong row is never pushed up by a strong neighbour: only
a row weaker than w × its neighbour rises, to just below it (adding the neighbour's score
instead favoured whole on-topic sessions over the one row that answers; measured:
benchmarks/rounds/2026-11-30-round-05-ranking.md). Neighbours that were not candidates
are fetched (in scope, under the source filter) and scored by their cosine alone. This is
score regularisation over a document graph (Diaz, "Regularizing ad hoc retrieval scores",
CIKM 2005) with time adjacency as the graph. Only rows of one session are neighbours (stored at most
CPERSONA_CALIBRATE_TEMPORAL_WINDOW_MIN apart, the session of the calibration): facts an
agent stored hours or days apart are not turns of one conversation, and lending between them
put unrelated rows above the answer (found by a new user with a store of dated team facts).
Only a row that could answer the recall on its own evidence lends (the quality gate's answer
bar, `Gate.evident`, or an exact match): "the turn that matches says where to look" holds
for a turn that matches, not for one that shares a common word — on a store of facts written
one after another, a row holding only `project` lent 0.97 of its score to the unrelated facts
stored beside it, which then outranked the answer (measured:
benchmarks/rounds/2026-12-01-round-06-fact-store.md). Lending runs after the episode
boundary penalty, so a row never rises above the row it borrowed from.

w = 1 − 2α by default, α the recall's cc weight of the vectors (½·G², G the agent's
separation): the share of the ranking the vectors do not explain. Where neighbouring turns
are close in vector space anyway (chats over many topics, encyclopaedia paragraphs: G near 1,
w small) the vectors already carry a turn's context and little is lent; where turns of one
conversation all look alike to the model (one long conversation between two people: G low,
w near 1) adjacency is the evidence left (G per public set:
benchmarks/rounds/2026-11-30-round-03-vector-weight.md).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cpersona.index.vector_index import VectorIndex
from cpersona.retrieval.candidate import MEMORY, Candidate
from cpersona.retrieval.retrievers import memory_candidate
from cpersona.storage import Session
from cpersona.storage.scope import Scope

#: The channel a fetched neighbour row names in `match_reason.retrievers`.
CHANNEL = "neighbours"


def weight(setting: float | None, alpha: float) -> float:
    """The share w of a neighbour's score a row can take: `setting` when set, else 1 − 2α
    (floored at 0)."""
    return setting if setting is not None else max(0.0, 1.0 - 2.0 * alpha)


def spread(rows: list[Candidate], w: float, top: int, session: Session, index: VectorIndex, qvec: np.ndarray,
           scope: Scope, source_id: str, score_new: Callable[[float], float],
           keep: Callable[[Candidate], bool] = lambda _c: True, max_gap_s: float | None = None,
           settle: Callable[[list[Candidate]], None] = lambda _rows: None,
           lends: Callable[[Candidate], bool] = lambda _c: True) -> list[Candidate]:
    """`rows` (cc-scored, best first) with the neighbours of the best `top` memory rows
    added and each `cc` raised to `w` × its best neighbour's where that is higher (module
    doc); best first. `score_new` turns a fetched neighbour's cosine into its cc; `keep`
    filters fetched rows (the caller's exclusions); `max_gap_s` keeps the neighbours within
    one session (None: any gap); `settle` completes the fetched rows (coverage, penalties)
    before they lend or borrow; only rows for which `lends` is true lend. Rows the index does
    not hold (no vector) neither lend nor borrow."""
    heads = [c for c in rows[:top] if c.kind == MEMORY]
    if w <= 0 or not heads:
        return rows
    near = index.neighbours([c.id for c in heads], scope, max_gap_s)
    have = {c.id: c for c in rows if c.kind == MEMORY}
    missing = sorted({n for ids in near.values() for n in ids} - have.keys())
    cosines = index.cosines(qvec, missing)
    added = []
    for row_id, row in sorted(session.memories.fetch(missing, scope, source_id).items()):
        cand = memory_candidate(row)
        if row_id in cosines and keep(cand):
            cand.cosine, cand.backfilled, cand.channels = cosines[row_id], True, [CHANNEL]
            cand.cc = score_new(cand.cosine)
            have[row_id] = cand
            added.append(cand)
    settle(added)
    base = {i: c.cc or 0.0 for i, c in have.items()}
    lent: dict[int, float] = {}
    judged = {i for head, ids in near.items() for i in (head, *ids) if i in base}  # the only rows that may lend
    lender = {i for i in judged if lends(have[i])}
    for head, ids in near.items():
        for n in (i for i in ids if i in base):
            if head in lender:
                lent[n] = max(lent.get(n, 0.0), base[head])
            if n in lender:
                lent[head] = max(lent.get(head, 0.0), base[n])
    for i, score in lent.items():
        have[i].cc = max(base[i], w * score)
    return sorted(rows + added, key=lambda c: -(c.cc or 0.0))
