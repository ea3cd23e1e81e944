"""Document frequencies of FTS5 query terms, to leave out terms too common to matter.

A term found in a large share of the rows carries almost no bm25 weight (its IDF is near
zero) but makes SQLite score every row it matches: at 100k rows, Japanese boilerplate
trigrams (の設定, エラー…) turn one recall into tens of thousands of bm25 evaluations.
`prune_common` drops such terms before the MATCH, keeping at least the rarest one.

The frequency of a term is estimated from the trigram index itself through an `fts5vocab`
table created in the connection's TEMP schema (the database file is not changed): a term
matches at most as many rows as its rarest trigram. Counting a trigram's rows walks its
posting list, on every recall that asks, so counts are cached per database file and table, and the cache is
dropped when the table has grown or shrunk by more than REFRESH_RATIO since it was filled.
"""

from __future__ import annotations

import math
import threading

from cpersona.storage import Session

#: Terms estimated in more than this share of rows are dropped…
MAX_DF_RATIO = 0.2
#: …but only on tables with at least this many rows: below it every query is fast anyway, and
#: the trigram-based estimate is too coarse to pay for itself (a lower bound cost LoCoMo
#: NDCG: benchmarks/rounds/2026-12-03-moved-from-code.md).
MIN_ROWS = 20000
TRIGRAM = 3
REFRESH_RATIO = 0.1

_cache: dict[tuple[str, str], tuple[int, dict[str, int]]] = {}
_cache_lock = threading.Lock()


def _trigrams(term: str) -> list[str]:
    low = term.lower()
    return [low[i : i + TRIGRAM] for i in range(len(low) - TRIGRAM + 1)]


def prune_common(session: Session, fts_table: str, terms: list[str]) -> list[str]:
    """`terms` without those estimated in > MAX_DF_RATIO of the table's rows.

    Order is kept; the rarest term always survives; tables under MIN_ROWS rows and
    single-term queries are returned unchanged.
    """
    if len(terms) < 2:
        return terms
    rows = session.search.table_size(fts_table)
    if rows < MIN_ROWS:
        return terms
    counts = _doc_counts(session, fts_table, rows, {g for t in terms for g in _trigrams(t)})
    df = {t: min(counts[g] for g in _trigrams(t)) for t in terms}
    keep = [t for t in terms if df[t] <= MAX_DF_RATIO * rows]
    return keep or [min(terms, key=lambda t: df[t])]


def drop_common(session: Session, fts_table: str, terms: list[str], counts: dict[str, int]) -> tuple[str, ...]:
    """`terms` without those in more than MAX_DF_RATIO of the rows, on tables of MIN_ROWS
    rows or more (the rarest term always stays); `counts` = rows holding each term."""
    rows = session.search.table_size(fts_table)
    if rows < MIN_ROWS or len(terms) < 2:
        return tuple(terms)
    keep = [t for t in terms if counts[t] <= MAX_DF_RATIO * rows]
    return tuple(keep or [min(terms, key=lambda t: counts[t])])


def idf(session: Session, fts_table: str, terms: list[str]) -> tuple[dict[str, float], dict[str, int]]:
    """FTS5's inverse document frequency of each term of `fts_table` (a word-index token):
    ln((N − n + 0.5) / (n + 0.5)), at least 1e-6, N = rows of the table, n = rows holding
    the term — the IDF of the bm25 that SQLite ranks with (https://www.sqlite.org/fts5.html,
    "bm25"), so `Σ idf` is what a row holding every term once, at average length, scores.
    Returns (idf, n) per term."""
    rows = session.search.table_size(fts_table)
    counts = _doc_counts(session, fts_table, rows, set(terms))
    # N and n are read by separate statements: rows committed in between (another writer,
    # another node) can make n exceed the N read first, so N is at least every n
    rows = max([rows, *(counts[t] for t in terms)])
    weights = {t: max(1e-6, math.log((rows - counts[t] + 0.5) / (counts[t] + 0.5))) for t in terms}
    return weights, {t: counts[t] for t in terms}


def _doc_counts(session: Session, fts_table: str, rows: int, grams: set[str]) -> dict[str, int]:
    """Rows containing each term (cached from MIN_ROWS rows up; see module docstring)."""
    if rows < MIN_ROWS:  # short posting lists: exact counts are cheap, and never stale
        return session.search.term_doc_counts(fts_table, sorted(grams))
    key = (session.search.database_file(), fts_table)
    with _cache_lock:
        filled_at, counts = _cache.get(key, (rows, {}))
        if abs(rows - filled_at) > REFRESH_RATIO * max(filled_at, 1):
            filled_at, counts = rows, {}
        missing = [g for g in grams if g not in counts]
    if missing:
        found = session.search.term_doc_counts(fts_table, missing)
        with _cache_lock:
            counts = {**counts, **found}
            _cache[key] = (filled_at, counts)
    return counts
