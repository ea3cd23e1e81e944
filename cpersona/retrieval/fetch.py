"""The first stage of a recall: its channels, read through ONE injected `Fetcher`.

The pipeline never starts a thread, embeds a query or counts a pool itself: it asks the
fetcher it was given for the `Channels` of a question — the memory keyword channel (trigram and
word indexes fused), the episodes' keyword channel, the vector channel with the query vector and
the resident indexes it was read from, the query's word terms — and for the gate's pool. The
service's fetcher (service/fetcher.py) runs parts of that on other threads' read connections
while the recall's own thread runs the trigram MATCH; `SerialFetch` here reads everything on one
connection, one part after the other, with a query vector given (calibration). Either way the
parts are put together by `gather`, so who ran a part never changes the channels: each part is
a function of the stored rows and the question alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

import numpy as np

from cpersona.index.vector_index import VectorIndex, WindowStats
from cpersona.retrieval import lexical, retrievers
from cpersona.retrieval.candidate import Candidate
from cpersona.retrieval.plan import Question, RecallPlan
from cpersona.retrieval.unlisted import Unlisted
from cpersona.storage import Session
from cpersona.storage.scope import Scope

#: The channels in their canonical order (the order fusion meets them in).
CHANNEL_ORDER = ("vector", "episodes", "keyword")


class Indexes(NamedTuple):
    """The resident vector indexes a recall reads (index/resident.py)."""

    memories: VectorIndex
    episodes: VectorIndex | None

    @classmethod
    def of(cls, loaded: dict[str, VectorIndex] | None) -> Indexes | None:
        """From the service's `{"memories": …, "episodes": …}` (None: not loaded)."""
        return cls(loaded["memories"], loaded.get("episodes")) if loaded else None


@dataclass(frozen=True)
class VectorHits:
    """The vector channel: its rows (best first), the query's cosines over the memory scan
    window (count, mean, std), and the query vector and indexes they were read from — the
    later stages read cosines of other rows (cc's backfill, neighbour turns) from the same."""

    rows: list[Candidate]
    background: WindowStats
    qvec: np.ndarray
    indexes: Indexes


@dataclass(frozen=True)
class Channels:
    """What the retrievers found for one question. `found`: channel name → best-first rows in
    `CHANNEL_ORDER` (the caller's exclusions left out); `words`: the query's word terms and idf
    (None: FTS off or a blank query); `unlisted`: what the keyword channel knows of the rows it
    cut off; `vectors`: the vector channel (None: no query vector or no resident index)."""

    found: dict[str, list[Candidate]]
    words: lexical.WordQuery | None
    unlisted: Unlisted
    vectors: VectorHits | None

    @property
    def background(self) -> WindowStats | None:
        return self.vectors.background if self.vectors is not None else None

    @property
    def trace(self) -> dict[str, Any]:
        bg = self.background
        out: dict[str, Any] = {"background": {"n": bg.n, "mean": bg.mean, "std": bg.std}} if bg else {}
        out["channels"] = {name: len(rows) for name, rows in self.found.items()}
        return out


class Fetcher(Protocol):
    """The one object a recall reads through; it owns every thread of the recall."""

    @property
    def session(self) -> Session:
        """The recall's own read connection (the stages after the fetch read through it)."""
        ...

    def channels(self, plan: RecallPlan, question: Question) -> Channels:
        """The channels of `question` (`gather`). An alternative of the recall's question is
        read with the recall's query vector (the whole question's: its meaning holds both)."""
        ...

    def pool(self, scope: Scope) -> int:
        """The gate's pool: memories + episodes in `scope`."""
        ...


def vector_hits(session: Session, plan: RecallPlan, question: Question, qvec: np.ndarray,
                indexes: Indexes) -> VectorHits:
    """The vector retriever's rows for `question` and the query's cosines over the memory scan
    window; any thread's read connection."""
    factor = 1.0 if plan.mode == "cascade" else 0.5
    stats = WindowStats()
    query = retrievers.Query(question.query, question.scope, question.limit, question.source_id)
    rows = retrievers.vector(session, query, qvec, indexes.memories, indexes.episodes, plan.window,
                             plan.vector_threshold * factor, stats)
    return VectorHits(rows, stats, qvec, indexes)


def word_half_query(plan: RecallPlan, question: Question) -> retrievers.Query:
    """The query of the word index's half of the keyword channel (`retrievers.word_channel`)."""
    return retrievers.Query(question.query, question.scope, plan.keyword_depth(question), question.source_id)


def gather(session: Session, plan: RecallPlan, question: Question,
           words: Callable[[], retrievers.WordHits] | None,
           vectors: Callable[[], VectorHits | None]) -> Channels:
    """The channels of `question`, the memory keyword channel's trigram MATCH on `session`.
    `words` gives the word index's half when the fetcher started it elsewhere (None: it runs
    here, after the trigram MATCH); `vectors` gives the vector channel (waiting for the query
    vector) — asked for last, so the keyword channels run while the query is embedded."""
    blank = question.blank
    fts = session.search.fts_enabled and not blank
    here = lexical.word_query(session, question.query) if fts and words is None else None
    query = retrievers.Query(question.query, question.scope, question.limit, question.source_id, here)
    keyword, unlisted = retrievers.keyword(session, replace(query, limit=plan.keyword_depth(question)), words)
    terms = words()[0] if words is not None else here
    episodes = None if blank else retrievers.episodes_fts(session, replace(query, words=terms))
    hits = None if blank else vectors()
    found: dict[str, list[Candidate]] = {}  # in CHANNEL_ORDER
    if hits is not None:
        found["vector"] = hits.rows
    if episodes is not None:
        found["episodes"] = episodes
    found["keyword"] = keyword
    if question.exclusions:
        for name in ("vector", "keyword"):
            if name in found:
                found[name] = [c for c in found[name] if not question.excludes(c.content)]
    return Channels(found, terms, unlisted, hits)


@dataclass(frozen=True)
class SerialFetch:
    """A fetcher that reads everything on one connection, one part after the other, with the
    query vector given (None: keywords only): calibration's queries, whose vector is a stored
    row's."""

    session: Session
    qvec: np.ndarray | None
    indexes: Indexes | None

    def channels(self, plan: RecallPlan, question: Question) -> Channels:
        return gather(self.session, plan, question, None, lambda: self._vectors(plan, question))

    def _vectors(self, plan: RecallPlan, question: Question) -> VectorHits | None:
        if self.qvec is None or self.indexes is None:
            return None
        return vector_hits(self.session, plan, question, self.qvec, self.indexes)

    def pool(self, scope: Scope) -> int:
        return self.session.search.pool_size(scope)
