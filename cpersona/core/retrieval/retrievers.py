"""The three retrievers of spec retrieval.md §2 and the LIKE fallback inside the memory
keyword channel. Each returns candidates best-first, at most `limit`, inside `scope`.

* vector   — cosine over the resident scan window (`VectorIndex`), memories then episodes.
* keyword  — FTS5 MATCH over memories (bm25); LIKE '%query%' only when FTS is disabled, the
             query has no usable term, or MATCH found nothing.
* episodes — FTS5 MATCH over episode summary + keywords (no LIKE fallback).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Callable

import numpy as np

from cpersona.core.isolation import Scope, source_id_predicate
from cpersona.core.retrieval.candidate import EPISODE, MEMORY, Candidate
from cpersona.core.retrieval.term_stats import prune_common
from cpersona.core.text import fts_terms, match_expression
from cpersona.core.vector_index import VectorIndex

EPISODE_PREFIX = "[Episode] "
EPISODE_SOURCE = {"System": "episode"}
_MEMORY_COLS = "m.id, m.content, m.timestamp, m.created_at, m.source, m.msg_id"
_EPISODE_COLS = "e.id, e.summary, COALESCE(NULLIF(e.start_time, ''), e.created_at, ''), e.created_at, e.resolved"


@dataclass(frozen=True)
class Query:
    """Everything a retriever needs to know about one recall."""

    text: str
    scope: Scope
    limit: int
    source_id: str = ""

    @property
    def episodes_allowed(self) -> bool:
        """Episodes carry no source: a source_id filter hides them unless a channel is set."""
        return not self.source_id or bool(self.scope.channel)


def _parse_json(text: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return {}


def memory_row(row: tuple) -> Candidate:
    """Candidate from a row selected with `_MEMORY_COLS`."""
    return Candidate(MEMORY, row[0], row[1], timestamp=row[2] or "", created_at=row[3], source=_parse_json(row[4]), msg_id=row[5])


def episode_row(row: tuple) -> Candidate:
    """Candidate from a row selected with `_EPISODE_COLS`."""
    return Candidate(EPISODE, row[0], EPISODE_PREFIX + row[1], timestamp=row[2] or "", created_at=row[3],
                     source=dict(EPISODE_SOURCE), resolved=bool(row[4]))


def _memory_filter(query: Query, alias: str = "m", use_index: bool = True) -> tuple[str, list]:
    where, params = query.scope.predicate(alias, use_index)
    if query.source_id:
        src_sql, src_params = source_id_predicate(query.source_id, alias)
        where, params = f"{where} AND {src_sql}", params + src_params
    return where, params


def fetch_memories(conn: sqlite3.Connection, ids: list[int], query: Query) -> dict[int, Candidate]:
    """Load memory rows by id, re-applying scope and source filter (vanished rows skipped)."""
    where, params = _memory_filter(query, use_index=False)
    marks = ",".join("?" * len(ids))
    sql = f"SELECT {_MEMORY_COLS} FROM memories m WHERE m.id IN ({marks}) AND {where}"
    return {row[0]: memory_row(row) for row in conn.execute(sql, [*ids, *params])}


def fetch_episodes(conn: sqlite3.Connection, ids: list[int], scope: Scope) -> dict[int, Candidate]:
    """Load episode rows by id inside `scope`."""
    where, params = scope.predicate("e", use_index=False)
    marks = ",".join("?" * len(ids))
    sql = f"SELECT {_EPISODE_COLS} FROM episodes e WHERE e.id IN ({marks}) AND {where}"
    return {row[0]: episode_row(row) for row in conn.execute(sql, [*ids, *params])}


def source_allowed_ids(conn: sqlite3.Connection, query: Query) -> np.ndarray | None:
    """Ids of in-scope memories whose source.id matches the prefix; None when no filter."""
    if not query.source_id:
        return None
    where, params = _memory_filter(query)
    rows = conn.execute(f"SELECT m.id FROM memories m WHERE {where}", params).fetchall()
    return np.fromiter((r[0] for r in rows), np.int64, len(rows))


def vector(
    conn: sqlite3.Connection,
    query: Query,
    qvec: np.ndarray,
    memories: VectorIndex,
    episodes: VectorIndex,
    window: int,
    threshold: float,
) -> list[Candidate]:
    """Cosine retriever: memory scan window then episode scan window, the `limit` best.

    Ties keep memories before episodes (stable sort). Each candidate's `cosine` is set.
    """
    mem_hits = memories.search(qvec, query.scope, window, threshold, query.limit, source_allowed_ids(conn, query))
    ep_hits = episodes.search(qvec, query.scope, window, threshold, query.limit) if query.episodes_allowed else []
    merged = sorted([(MEMORY, i, c) for i, c in mem_hits] + [(EPISODE, i, c) for i, c in ep_hits], key=lambda h: -h[2])
    merged = merged[: query.limit]
    rows = {
        MEMORY: fetch_memories(conn, [i for k, i, _ in merged if k == MEMORY], query) if mem_hits else {},
        EPISODE: fetch_episodes(conn, [i for k, i, _ in merged if k == EPISODE], query.scope) if ep_hits else {},
    }
    out = []
    for kind, row_id, cos in merged:
        cand = rows[kind].get(row_id)
        if cand is not None:
            cand.cosine = cos
            out.append(cand)
    return out


def backfill_cosine(rows: list[Candidate], qvec: np.ndarray | None, memories: VectorIndex | None,
                    episodes: VectorIndex | None) -> int:
    """Give every memory / episode row without a cosine its cosine to `qvec`, read from the
    resident index (so a row whose vector is stale after a model change, or missing, stays
    without one), multiplied by the row's penalty so far; marks them `backfilled`.

    Used by `cc` fusion (every candidate needs both evidences — Bruch et al., TOIS 2023 —
    or a keyword-only row would count as cosine 0) and by confidence scoring (spec
    retrieval.md §5.1). Returns how many rows got a cosine."""
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


def keyword(conn: sqlite3.Connection, query: Query, fts_enabled: bool) -> list[Candidate]:
    """Memory keyword channel: FTS5 bm25 ranking, LIKE fallback when it yields nothing.

    A blank query returns the newest `limit` memories (pure recency, no score).
    """
    where, params = _memory_filter(query)
    if not query.text.strip():
        sql = f"SELECT {_MEMORY_COLS} FROM memories m WHERE {where} ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
        return [memory_row(r) for r in conn.execute(sql, [*params, query.limit])]
    found = _fts(conn, _FTS["memories"], query, where, params) if fts_enabled else []
    return found or like(conn, query)


def like(conn: sqlite3.Connection, query: Query) -> list[Candidate]:
    """`content LIKE '%<query>%'` (wildcards escaped, ASCII case-insensitive), newest first."""
    where, params = _memory_filter(query)
    pattern = "%" + query.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    sql = (
        f"SELECT {_MEMORY_COLS} FROM memories m WHERE m.content LIKE ? ESCAPE '\\' AND {where} "
        "ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
    )
    return [memory_row(r) for r in conn.execute(sql, [pattern, *params, query.limit])]


def episodes_fts(conn: sqlite3.Connection, query: Query, fts_enabled: bool) -> list[Candidate]:
    """FTS5 over episode summary + keywords, bm25 order; [] when FTS is off or no term."""
    if not (fts_enabled and query.episodes_allowed):
        return []
    where, params = query.scope.predicate("e")
    return _fts(conn, _FTS["episodes"], query, where, params)


@dataclass(frozen=True)
class _FtsTable:
    fts: str
    content: str
    alias: str
    columns: str
    to_candidate: Callable[[tuple], Candidate]


_FTS = {
    "memories": _FtsTable("memories_fts", "memories", "m", _MEMORY_COLS, memory_row),
    "episodes": _FtsTable("episodes_fts", "episodes", "e", _EPISODE_COLS, episode_row),
}


def _fts(conn: sqlite3.Connection, t: _FtsTable, query: Query, where: str, params: list) -> list[Candidate]:
    """FTS5 MATCH over `t` inside the scope `where`, best bm25 first; each candidate's
    `bm25` set (SQLite sign: lower is better). [] when the query has no usable term."""
    terms = fts_terms(query.text)
    pruned = prune_common(conn, t.fts, t.content, terms)
    found = _fts_run(conn, t, match_expression(pruned), query.limit, where, params) if pruned else []
    if len(found) < query.limit and len(pruned) < len(terms):
        # Frequencies are table-wide (every agent): a term common elsewhere may be this
        # scope's only evidence, so a short answer is retried with every term.
        found = _fts_run(conn, t, match_expression(terms), query.limit, where, params)
    return found


def _fts_run(conn: sqlite3.Connection, t: _FtsTable, expr: str, limit: int, where: str, params: list) -> list[Candidate]:
    sql = (
        f"SELECT {t.columns}, {t.fts}.rank FROM {t.fts} JOIN {t.content} {t.alias} ON {t.alias}.id = {t.fts}.rowid "
        f"WHERE {t.fts} MATCH ? AND {where} ORDER BY {t.fts}.rank LIMIT ?"
    )
    found = []
    for row in conn.execute(sql, [expr, *params, limit]):
        cand = t.to_candidate(row)
        cand.bm25 = row[-1]
        found.append(cand)
    return found
