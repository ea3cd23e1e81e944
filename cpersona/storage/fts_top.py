"""The best matches of an FTS5 MATCH by bm25, without scoring every match.

FTS5 computes bm25 (https://www.sqlite.org/fts5.html, "bm25") for each matching row (from
the row's position lists and its length), so an OR of common words costs a score per
matching row although only the best few rows are wanted (measured:
benchmarks/rounds/2026-11-30-round-03-latency.md). `best` returns the
same rows, order and scores as `SELECT rowid, rank … ORDER BY rank, rowid LIMIT depth`, while
scoring far fewer rows, by the MaxScore argument (Turtle & Flood, "Query evaluation:
strategies and optimizations", IP&M 1995):

* bm25 is a sum over the query's phrases of idf(p) · f·(k1+1) / (f + k1·(1 − b + b·|d|/avgdl)),
  and each term of that sum is below idf(p)·(k1+1) (k1 = 1.2, FTS5's constant). idf(p) =
  ln((N − n + 0.5) / (n + 0.5)), at least 1e-6, with n the rows holding p (counted here
  exactly as FTS5 counts them: a MATCH of the phrase alone) and N the indexed rows (bounded
  above by the largest rowid, which only raises the bound).
* Split the phrases: the common ones (together bounded by S) and the rest, the essential ones.
  A row holding no essential phrase scores at most S. So every row among the essential
  rows' matches that scores above S is ahead of every row outside them, and the leading
  run of such rows in bm25 order IS the leading run of the full ranking — exact, ties
  included (equal scores keep ascending rowid order, as FTS5 produces matches).
* Only the essential rows are scored (`+rowid IN (…)` keeps the filter out of FTS5, so its
  bm25 is computed by the one query over ALL phrases — the very same numbers).

The caller gets the proven prefix (possibly shorter than `depth`) and `complete` = whether
it is the whole match list; it falls back to the unpruned ranking when the prefix is not
enough.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Iterator
from itertools import takewhile

from cpersona.storage import fts_counts

#: FTS5's bm25 k1 (fts5_aux.c); each phrase adds less than idf·(k1 + 1) to a row's score.
K1 = 1.2
#: Prune only on tables of at least this many rows (by largest rowid): below it the counts
#: of the phrases cost about what they save.
MIN_ROWS = 20000
#: Prune only when the common phrases would make FTS5 score at least this many rows more.
MIN_SAVED_ROWS = 2000
#: The common phrases, taken most frequent first, together bound at most this share of the
#: largest single phrase bound: a row holding no rare phrase must rank below nearly every
#: row holding one, or the proof fails and the work is wasted.
COMMON_SHARE = 0.5
#: Relative safety margin on the bound against rounding (the true bound is strict anyway).
MARGIN = 1e-9

_PHRASE = re.compile(r'"((?:[^"]|"")*)"')


def or_phrases(expr: str) -> list[str] | None:
    """The phrases of `"p1" OR "p2" …` (quotes still doubled); None for any other expression."""
    phrases = _PHRASE.findall(expr)
    if not phrases or " OR ".join(f'"{p}"' for p in phrases) != expr:
        return None
    return phrases


Hits = list[tuple[int, float]]


def prefixes(conn: sqlite3.Connection, fts: str, expr: str, depth: int) -> Iterator[tuple[Hits, bool]]:
    """Ever longer answers, each computed only when the caller asks for the next: (a prefix
    of the `depth` best matches of the whole table as [(rowid, bm25)], best first, equal
    bm25 by ascending rowid; whether it holds EVERY match). First the pruned prefix (when
    pruning pays and proves at least one row), then the `depth` best matches."""
    phrases = or_phrases(expr)
    if phrases is not None and 1 < len(phrases) == len(set(phrases)):  # a repeated phrase counts twice
        pruned = _pruned(conn, fts, phrases, depth)
        if pruned:
            yield pruned, False
    top = conn.execute(f"SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? ORDER BY +rank, rowid LIMIT ?",
                       (expr, depth)).fetchall()
    yield top, len(top) < depth


def _pruned(conn: sqlite3.Connection, fts: str, phrases: list[str], depth: int) -> Hits:
    """The proven prefix when pruning the common phrases pays, else [] (module doc)."""
    rows = conn.execute(f"SELECT MAX(id) FROM {fts}_docsize").fetchone()[0] or 0
    if rows < MIN_ROWS:
        return []
    hits = fts_counts.cached(conn, "phrase", fts, phrases, lambda todo: {
        p: conn.execute(f"SELECT COUNT(*) FROM {fts} WHERE {fts} MATCH ?", (f'"{p}"',)).fetchone()[0] for p in todo})
    bound = {p: (K1 + 1.0) * max(1e-6, math.log((rows - n + 0.5) / (n + 0.5))) for p, n in hits.items()}
    common, total = [], 0.0
    for p in sorted(phrases, key=lambda q: -hits[q])[:-1]:  # at least one phrase stays essential
        if total + bound[p] > COMMON_SHARE * max(bound.values()):
            break
        common.append(p)
        total += bound[p]
    if sum(hits[p] for p in common) < MIN_SAVED_ROWS:
        return []
    essential = " OR ".join(f'"{p}"' for p in phrases if p not in common)
    top = conn.execute(
        f"SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? AND +rowid IN (SELECT rowid FROM {fts} "
        f"WHERE {fts} MATCH ?) ORDER BY +rank, rowid LIMIT ?",
        (" OR ".join(f'"{p}"' for p in phrases), essential, depth)).fetchall()
    ceiling = -total * (1.0 + MARGIN)  # a row outside the essential matches ranks at or above this
    return list(takewhile(lambda hit: hit[1] < ceiling, top))
