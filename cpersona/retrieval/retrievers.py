"""The three retrievers of recall, and the LIKE fallback inside the memory keyword channel.
Each returns candidates best-first, at most `limit`, inside the query's scope.

* vector   — cosine over the resident scan window (`VectorIndex`), memories then episodes.
* keyword  — FTS5 MATCH over memories, trigram and word indexes fused (retrieval/lexical.py);
             LIKE '%query%' only when FTS is disabled, the query has no usable term, or
             neither index matched.
* episodes — FTS5 MATCH over episode summary + keywords (no LIKE fallback).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cpersona.index.vector_index import VectorIndex, WindowStats
from cpersona.retrieval import lexical, unlisted
from cpersona.retrieval.candidate import EPISODE, MEMORY, Candidate
from cpersona.retrieval.term_stats import prune_common
from cpersona.storage import Session
from cpersona.storage.records import EpisodeRow, MemoryRow
from cpersona.storage.scope import Scope
from cpersona.util.jsonutil import loads_or_empty
from cpersona.util.text import fts_terms, match_expression
from cpersona.util.time import utc_text

EPISODE_PREFIX = "[Episode] "
EPISODE_SOURCE = {"System": "episode"}


@dataclass(frozen=True)
class Query:
    """Everything a retriever needs to know about one recall."""

    text: str
    scope: Scope
    limit: int
    source_id: str = ""
    #: the query's word terms and their idf (retrieval/lexical.py); None = look them up
    words: lexical.WordQuery | None = None

    @property
    def episodes_allowed(self) -> bool:
        """Episodes carry no source: a source_id filter hides them unless a channel is set."""
        return not self.source_id or bool(self.scope.channel)


def memory_candidate(row: MemoryRow) -> Candidate:
    return Candidate(MEMORY, row.id, row.content, timestamp=row.timestamp or "", created_at=row.created_at,
                     source=loads_or_empty(row.source), msg_id=row.msg_id)


def episode_candidate(row: EpisodeRow) -> Candidate:
    """An episode's row. Its time is its first turn's as given, else its creation time — stored
    as SQLite's naive UTC `YYYY-MM-DD HH:MM:SS` and answered as ISO-8601 UTC like every other
    time the server writes, so answers sort by their timestamp strings (a naive time sorted
    before every ISO time of its day)."""
    when = row.timestamp or ""
    if when and when == row.created_at:
        when = utc_text(when) or when
    return Candidate(EPISODE, row.id, EPISODE_PREFIX + row.summary, timestamp=when,
                     created_at=row.created_at, source=dict(EPISODE_SOURCE), resolved=bool(row.resolved))


def source_allowed_ids(session: Session, query: Query) -> np.ndarray | None:
    """Ids of in-scope memories whose source.id matches the prefix; None when no filter."""
    if not query.source_id:
        return None
    ids = session.memories.ids_with_source(query.scope, query.source_id)
    return np.fromiter(ids, np.int64, len(ids))


def vector(
    session: Session,
    query: Query,
    qvec: np.ndarray,
    memories: VectorIndex,
    episodes: VectorIndex | None,
    window: int,
    threshold: float,
    stats: WindowStats | None = None,
) -> list[Candidate]:
    """Cosine retriever: memory scan window then episode scan window, the `limit` best.
    `stats` receives the distribution of the query's cosines over the memory scan window.

    Ties keep memories before episodes (stable sort). Each candidate's `cosine` is set.
    """
    allowed = source_allowed_ids(session, query)
    mem_hits = memories.search(qvec, query.scope, window, threshold, query.limit, allowed, stats)
    ep_hits = episodes.search(qvec, query.scope, window, threshold, query.limit) \
        if episodes is not None and query.episodes_allowed else []
    merged = sorted([(MEMORY, i, c) for i, c in mem_hits] + [(EPISODE, i, c) for i, c in ep_hits], key=lambda h: -h[2])
    merged = merged[: query.limit]
    mem_rows = session.memories.fetch([i for k, i, _ in merged if k == MEMORY], query.scope, query.source_id)
    ep_rows = session.episodes.fetch([i for k, i, _ in merged if k == EPISODE], query.scope)
    out = []
    for kind, row_id, cos in merged:
        found = mem_rows.get(row_id) if kind == MEMORY else ep_rows.get(row_id)
        if found is None:
            continue
        cand = memory_candidate(found) if isinstance(found, MemoryRow) else episode_candidate(found)
        cand.cosine = cos
        out.append(cand)
    return out


def backfill_cosine(rows: list[Candidate], qvec: np.ndarray | None, memories: VectorIndex | None,
                    episodes: VectorIndex | None) -> int:
    """Give every memory / episode row without a cosine its cosine to `qvec`, read from the
    resident index (so a row whose vector is stale after a model change, or missing, stays
    without one), multiplied by the row's penalty so far; marks them `backfilled`.

    Used by `cc` fusion (every candidate needs both evidences — Bruch et al., TOIS 2023 —
    or a keyword-only row would count as cosine 0) and by confidence scoring. Returns how
    many rows got a cosine."""
    if qvec is None:
        return 0
    done = 0
    for kind, index in ((MEMORY, memories), (EPISODE, episodes)):
        todo = [c for c in rows if c.kind == kind and c.cosine is None]
        found = index.cosines(qvec, [c.id for c in todo]) if index is not None and todo else {}
        for cand in todo:
            cos = found.get(cand.id)
            if cos is not None:
                cand.cosine, cand.backfilled = cos * cand.penalty, True
                done += 1
    return done


#: The word half of the memory keyword channel: the query's word terms and the word index's
#: matches (row, bm25), best first.
WordHits = tuple[lexical.WordQuery, list[tuple[MemoryRow, float]]]


def word_channel(session: Session, query: Query) -> WordHits:
    """The word index's half of the keyword channel (`keyword` fuses it with the trigram
    half). It reads nothing the trigram half writes, so it may run on another connection
    while the trigram MATCH runs (SQLite releases the GIL while it steps a statement)."""
    wq = query.words or lexical.word_query(session, query.text)
    return wq, lexical.word_hits(session, wq, lambda expr: session.search.memories_words(
        expr, query.scope, query.source_id, query.limit))


def keyword(session: Session, query: Query,
            words: Callable[[], WordHits] | None = None) -> tuple[list[Candidate], unlisted.Unlisted]:
    """Memory keyword channel: the trigram and word indexes fused (retrieval/lexical.py);
    the LIKE fallback when FTS is off or neither index matched. `words` returns the word
    half when the caller started it elsewhere (`word_channel` of the same query); None =
    computed here, after the trigram MATCH.

    A blank query returns the newest `limit` memories (pure recency, no score). Also returns
    what the channel knows of the rows it did not return (retrieval/unlisted.py).
    """
    if not query.text.strip():
        return [memory_candidate(r) for r in session.memories.newest(query.scope, query.source_id,
                                                                     query.limit)], unlisted.NONE
    if not session.search.fts_enabled:
        return like(session, query), unlisted.NONE
    found: dict[int, Candidate] = {}
    trigram = _fts(session, "memories_fts", query, lambda expr: session.search.memories_fts(
        expr, query.scope, query.source_id, query.limit))
    for row, rank in trigram:
        found[row.id] = memory_candidate(row)
        found[row.id].bm25 = rank
    wq, word_rows = words() if words is not None else word_channel(session, query)
    for row, rank in word_rows:
        cand = found.get(row.id)
        if cand is None:
            cand = found[row.id] = memory_candidate(row)
        cand.word_bm25 = rank
    if not found:
        return like(session, query), unlisted.NONE
    complete_scores(found, query.limit, trigram, query.text)
    scored = lexical.score(list(found.values()), wq)
    cut = [(hits[-1][1], name) for hits, name in ((trigram, "bm25"), (word_rows, "word_bm25"))
           if len(hits) >= query.limit]
    known = unlisted.Unlisted({c.id: c.lexical or 0.0 for c in scored[query.limit:]},
                              unlisted.ceiling(scored, cut))
    return scored[: query.limit], known


def like(session: Session, query: Query) -> list[Candidate]:
    """Memories whose content contains the whole query (ASCII case-insensitive), newest first."""
    return [memory_candidate(r) for r in session.search.memories_like(query.text, query.scope, query.source_id,
                                                                      query.limit)]


def episodes_fts(session: Session, query: Query) -> list[Candidate]:
    """FTS5 over episode summary + keywords, bm25 order; [] when FTS is off or no term."""
    if not (session.search.fts_enabled and query.episodes_allowed):
        return []
    found = []
    for row, rank in _fts(session, "episodes_fts", query,
                          lambda expr: session.search.episodes_fts(expr, query.scope, query.limit)):
        cand = episode_candidate(row)
        cand.bm25 = rank
        found.append(cand)
    return found


def _fts(session: Session, fts: str, query: Query, run) -> list:
    """Run the MATCH of the query's terms, common terms pruned first; [] without a usable
    term. Frequencies are table-wide (every agent): a term common elsewhere may be this
    scope's only evidence, so a short answer is retried with every term."""
    terms = fts_terms(query.text)
    pruned = prune_common(session, fts, terms)
    found = run(match_expression(pruned)) if pruned else []
    if len(found) < query.limit and len(pruned) < len(terms):
        found = run(match_expression(terms))
    return found


def complete_scores(found: dict[int, Candidate], limit: int, trigram: list, text: str) -> None:
    """A row listed by the word index only, when the trigram list was cut at `limit`, gets the
    trigram list's last (worst) bm25 if it holds one of the trigram terms (as a case-folded
    substring): the most it can score there, and exactly its score when the rows at the cut
    are tied — as they are whenever what tells rows apart is shorter than a trigram.
    Every `Service number N …` row scores alike in the trigram index (`7` is no trigram), so
    its list holds the oldest `limit` of them; `Service number 7`, first in the word index,
    would otherwise count as no trigram match at all and lose to them: a smaller recall limit
    would answer with another row. A row missing from a list shorter than `limit` (which holds
    every match) has no trigram score. The word index needs no such help (its terms have any
    length), and FTS5 cannot score given rows cheaply (a MATCH restricted to rowids re-reads
    every term's doclist per row, ~2.5 ms each)."""
    if len(trigram) < limit:
        return
    cut, terms = trigram[-1][1], [t.casefold() for t in fts_terms(text)]
    for cand in found.values():
        if cand.bm25 is None and any(t in cand.content.casefold() for t in terms):
            cand.bm25 = cut
