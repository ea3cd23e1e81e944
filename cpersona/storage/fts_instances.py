"""Reading an FTS5 index's vocabulary into numpy arrays, for the indexes held in memory
(storage/resident_fts.py): its terms and their instance counts from its 'row' fts5vocab table,
and every instance (row, offset) from its 'instance' table — as one `group_concat` per range
of about CHUNK instances, parsed by numpy, never as a Python row per instance."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import numpy as np

#: Instances a build reads per query (as text, ~16 bytes each).
CHUNK = 1 << 20
#: A trigram instance's key: row position << SHIFT | token offset (`instances`).
SHIFT = 32
OFFSET = (1 << SHIFT) - 1


def too_many_terms(conn: sqlite3.Connection, terms_table: str, max_terms: int) -> bool:
    """Whether the index behind the 'row' fts5vocab table `terms_table` has more distinct terms."""
    return conn.execute(f"SELECT count(*) FROM {terms_table}").fetchone()[0] > max_terms


def term_list(conn: sqlite3.Connection, terms_table: str, max_terms: int) -> tuple[list[bytes], np.ndarray] | None:
    """The terms of an FTS5 index (bytes, in its term order) and their instance counts, read
    from its 'row' fts5vocab table `terms_table`; None when it holds more than `max_terms`
    (each held as a Python object: ~250 bytes)."""
    if too_many_terms(conn, terms_table, max_terms):
        return None
    factory = conn.text_factory
    conn.text_factory = bytes  # FTS5 cuts a token at 32,768 bytes, maybe inside a character: not UTF-8
    try:
        counted = conn.execute(f"SELECT term, cnt FROM {terms_table}").fetchall()
    finally:
        conn.text_factory = factory
    return [term for term, _ in counted], np.fromiter((cnt for _, cnt in counted), np.int64, len(counted))


def instances(conn: sqlite3.Connection, instances_table: str, counts: np.ndarray, bound: Callable[[int], str | None],
              rowids: np.ndarray, offsets: bool) -> tuple[np.ndarray, np.ndarray]:
    """An FTS5 index's instances in its term order: (one int64 key per instance, the index
    where each term's instances start, with their total last). `counts` are the terms'
    instance counts in term order; `bound(i)` is term i as text, or None when it cannot bound
    a range (not UTF-8). A key is the instance's row position in `rowids` (the table's,
    ascending), shifted left SHIFT bits and or-ed with its token offset when `offsets`; a
    term's keys ascend.

    The instances are read as one `group_concat` per range of about CHUNK of them and parsed
    by numpy (~5 times faster than a row per instance; a build never holds them as Python
    objects, and converts a range before reading the next). Raises RuntimeError when a range
    does not hold the instances its counts promise, names a row without a size, or a term's
    instances do not ascend (the index changed under the read, or fts5vocab scanned in another
    order): the build fails and recall asks FTS5."""
    firsts = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=firsts[1:])
    keys = np.empty(int(firsts[-1]), np.int64)
    places = _places(rowids)
    for a, b, lo, hi in _ranges(firsts, bound):
        keys[firsts[a]:firsts[b]] = _read(conn, instances_table, places, offsets, (lo, hi), firsts[a:b + 1] - firsts[a])
    return keys, firsts


def _ranges(firsts: np.ndarray, bound: Callable[[int], str | None]) -> list[tuple[int, int, str | None, str | None]]:
    """Term ranges of about CHUNK instances: (first term index, end index, lowest term or None,
    the term bounding it above or None). A bound is passed as text (SQLite and FTS5 both order
    terms by their bytes)."""
    starts: list[int] = [0]
    names: list[str | None] = [None]
    for i in range(1, firsts.size - 1):
        if firsts[i] - firsts[starts[-1]] >= CHUNK and (name := bound(i)) is not None:
            starts.append(i)
            names.append(name)
    names.append(None)
    ends = [*starts[1:], firsts.size - 1]
    return [(a, b, names[k], names[k + 1]) for k, (a, b) in enumerate(zip(starts, ends))]


def utf8(term: bytes) -> str | None:
    """`term` decoded, or None when it is not UTF-8 (a token FTS5 cut inside a character)."""
    try:
        return term.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _places(rowids: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """rowids → their row positions (−1: no such row). Rowids of a table are mostly dense
    (1 up to a few times the count): an array indexed by rowid, else (also for negative
    rowids, which SQLite allows) a binary search."""
    if rowids.size and int(rowids[0]) >= 0 and int(rowids[-1]) <= 4 * rowids.size + 1_000_000:
        table = np.full(int(rowids[-1]) + 1, -1, np.int64)
        table[rowids] = np.arange(rowids.size)

        def index(docs: np.ndarray) -> np.ndarray:
            return np.where((docs >= 0) & (docs < table.size), table[np.clip(docs, 0, table.size - 1)], -1)
        return index

    def search(docs: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(rowids, docs), max(rowids.size - 1, 0))
        return np.where(rowids[at] == docs, at, -1) if rowids.size else np.full(docs.size, -1)
    return search


def _read(conn: sqlite3.Connection, table: str, places: Callable[[np.ndarray], np.ndarray], offsets: bool,
          bounds: tuple[str | None, str | None], starts: np.ndarray) -> np.ndarray:
    """The keys (`instances`) of the terms in [lo, hi) = `bounds`, whose instances start at
    `starts` (relative; the last entry is their total); `places` from `_places`."""
    where = [w for w, bound in zip(("term >= ?", "term < ?"), bounds) if bound is not None]
    columns = ['group_concat(doc)', *(['group_concat("offset")'] if offsets else [])]
    sql = f"SELECT count(*), {', '.join(columns)} FROM {table}" + (f" WHERE {' AND '.join(where)}" if where else "")
    n, *texts = conn.execute(sql, [b for b in bounds if b is not None]).fetchone()
    docs, *offset = [np.fromstring(t, dtype=np.int64, sep=",") if n else np.empty(0, np.int64) for t in texts]
    if n != starts[-1] or docs.size != n or any(o.size != n for o in offset):
        raise RuntimeError(f"{table}: {docs.size} instances read where its terms count {starts[-1]}")
    rows = places(docs)
    keys = (rows << SHIFT) | offset[0] if offsets else rows
    steps = np.diff(keys) < 0
    steps[starts[1:-1] - 1] = False  # a new term starts over
    if steps.any() or (n and rows.min() < 0):
        raise RuntimeError(f"{table}: instances out of order, or of rows without a size")
    return keys
