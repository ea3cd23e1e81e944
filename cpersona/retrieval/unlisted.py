"""Keyword evidence for the vector hits the memory keyword channel did not return.

cc fuses α·(vector evidence) + (1 − α)·lexical (retrieval/fusion.py). The keyword channel
lists only its best `depth` rows, so a row the vectors found but the keyword lists cut off
had lexical 0 — scored as if it held none of the query's words, below every keyword hit of
the list however many of those words it holds. On a large store of long chats (LongMemEval:
10.9k turns, long assistant answers that repeat the question's words) the short user turn
that answers is often such a row: the closest row by cosine, yet fused below rows that only
share the question's words.

What the channel knows about a row it did not return, and what it gives it here:

* the row was listed by one of its indexes but ranked below the cut after scoring: its
  exact `lexical`, kept from the channel's scoring;
* the row was listed by neither index, and an index's list was cut at `depth` (more rows
  matched than it returned): the row scores at most the relative bm25 of the last row of
  that list (bm25 lists are best first) — the row gets that ceiling, times the same coverage
  factor every keyword row gets (retrieval/lexical.py), if it holds a query word at all;
* otherwise (no list was cut, or the row holds no query word): 0, as before.

The ceiling is the most the row can score in the index, the rule `retrievers.complete_scores`
applies to the trigram list; the coverage factor keeps a row holding only one common query
word well below it. Exact bm25 of given rows is not read from FTS5: a MATCH restricted to
rowids re-reads every term's doclist for each row.

On by default (CPERSONA_KEYWORD_CEILING=false turns it off): with the quality gate's names and
identifiers rule in place it lifts LongMemEval's answer turns, moves no other public set
beyond its noise and answers no more unanswerable questions; without that rule it let the
gate answer more of them, and was off. Measured with the bundled model:
benchmarks/rounds/2026-12-01-round-06-combined.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cpersona.retrieval import lexical
from cpersona.retrieval.candidate import MEMORY, Candidate


@dataclass(frozen=True)
class Unlisted:
    """What the memory keyword channel knows about the rows it did not return.

    `dropped`: row id → `lexical` of the rows an index listed but the channel cut after
    scoring; `ceiling`: the largest relative bm25 (0..1, before the coverage factor) a row
    neither index listed can have — 0 when no index list was cut."""

    dropped: dict[int, float] = field(default_factory=dict)
    ceiling: float = 0.0


NONE = Unlisted()


def ceiling(found: Iterable[Candidate], cut: Iterable[tuple[float | None, str]]) -> float:
    """The relative bm25 ceiling of a row no index listed: for each index list that was cut,
    its last (worst) bm25 relative to that index's best bm25 among `found`; the larger.
    `cut` holds (last bm25 of a cut list, "bm25" or "word_bm25": the Candidate field of that
    index)."""
    rows = list(found)
    best = 0.0
    for last, name in cut:
        top = max((-v for c in rows if (v := getattr(c, name)) is not None), default=0.0)
        if last is not None and top > 0:
            best = max(best, -last / top)
    return best


def fill(rows: Iterable[Candidate], returned: Iterable[Candidate], known: Unlisted, wq: lexical.WordQuery) -> int:
    """Set `coverage` and `lexical` on the memory rows of `rows` (the vector hits) that are
    not among `returned` (the keyword channel's rows, which carry their own score), as the
    module doc says; returns how many rows got a non-zero score."""
    listed = {c.id for c in returned if c.kind == MEMORY}
    done = 0
    for cand in rows:
        if cand.kind != MEMORY or cand.id in listed or cand.lexical is not None or not wq.terms:
            continue
        cand.coverage = wq.coverage(cand.content)
        exact = known.dropped.get(cand.id)
        if exact is not None:
            cand.lexical = exact
        elif cand.coverage > 0 and known.ceiling > 0:
            cand.lexical = known.ceiling * lexical.coverage_factor(wq, cand.content, cand.coverage)
        done += bool(cand.lexical)
    return done
