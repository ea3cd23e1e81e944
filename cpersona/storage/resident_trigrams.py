"""The memories' trigram index `memories_fts` held in memory (storage/resident_fts.py has
the why, the freshness rule and the bm25): for each trigram, every place it occurs, as
keys row position << 32 | offset, ascending.

A phrase of n ≥ 3 characters is the n − 2 trigrams at consecutive offsets (FTS5's trigram
tokenizer, case folded): its occurrences are the places of its rarest trigram whose
neighbours hold the others — overlapping occurrences each count, as in FTS5. A phrase is
read here only when its case folding is known exactly: ASCII (A–Z → a–z, as FTS5 folds it)
and characters without case (Unicode Lo / Lm letters — CJK, kana, Hangul — punctuation and
spaces); any other phrase, or one shorter than a trigram, sends the query to FTS5.
"""

from __future__ import annotations

import sqlite3
import unicodedata
from dataclasses import dataclass

import numpy as np

from cpersona.storage import resident_fts
from cpersona.storage.fts_top import Hits

TABLE = "memories_fts"
#: The temp fts5vocab tables every connection declares (search.install_vocab): 'row' (each
#: term's instance count) and 'instance'.
TERMS, INSTANCES = f"temp.{TABLE}_vocab", f"temp.{TABLE}_instances"
#: Larger tables are left to FTS5: a build reads every trigram (~0.35 s of CPU per million,
#: ~0.85 M at 10k rows of chat turns or the SCALE corpus, 8.6 M at its 100k) and holds 8 bytes
#: for each: 12 M trigrams is ~100 MB held.
MAX_ROWS = resident_fts.MAX_ROWS
MAX_TOKENS = 12_000_000
_SHIFT, _OFFSET = resident_fts.SHIFT, resident_fts.OFFSET
#: Categories of the non-ASCII characters whose FTS5 case folding is the character itself.
_UNCASED = frozenset({"Lo", "Lm", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Zs"})


def fold(phrase: str) -> str | None:
    """The phrase as FTS5's trigram tokenizer folds it, or None when that is not known here."""
    out = []
    for c in phrase:
        if c.isascii():
            out.append(c.lower())
        elif unicodedata.category(c) in _UNCASED:
            out.append(c)
        else:
            return None
    return "".join(out)


@dataclass(frozen=True)
class TrigramSnapshot:
    """Trigram t's places are `keys[lo:hi]` for (lo, hi) = `spans[t]`."""

    rows: resident_fts.Rows
    spans: dict[str, tuple[int, int]]
    keys: np.ndarray

    def top(self, phrases: list[str], depth: int) -> Hits | None:
        folded = [fold(p) for p in phrases]
        if any(f is None or len(f) < 3 for f in folded):
            return None
        return self.rows.top([self._occurrences(f) for f in folded if f is not None], depth)

    def _occurrences(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(row positions holding `text`, ascending; occurrences in each)."""
        spans = [self.spans.get(text[i:i + 3]) for i in range(len(text) - 2)]
        if any(s is None for s in spans):
            return np.empty(0, np.int64), np.empty(0)
        places = [self.keys[lo:hi] for lo, hi in spans]  # type: ignore[misc]
        rarest = min(range(len(places)), key=lambda j: places[j].size)
        starts = places[rarest][(places[rarest] & _OFFSET) >= rarest] - rarest
        for j, keys in enumerate(places):
            if j != rarest and starts.size:
                want = starts + j
                at = np.minimum(np.searchsorted(keys, want), keys.size - 1)
                starts = starts[keys[at] == want]
        docs, counts = np.unique(starts >> _SHIFT, return_counts=True)
        return docs, counts.astype(np.float64)

    def checks(self) -> list[list[str]]:
        """The three most frequent trigrams together; the most frequent alone; and a
        four-character phrase that occurs (the most frequent trigram and the one after it)."""
        readable = [t for t in self.spans if fold(t) == t]
        frequent = sorted(readable, key=lambda t: self.spans[t][0] - self.spans[t][1])[:3]
        if not frequent:
            return []
        first = self.keys[self.spans[frequent[0]][0]]
        after = next((t for t, (lo, hi) in self.spans.items() if _holds(self.keys[lo:hi], first + 1)), None)
        longer = [[frequent[0] + after[2]]] if after and after[:2] == frequent[0][1:] and fold(after) == after else []
        return [frequent, frequent[:1], *longer]


def _holds(keys: np.ndarray, key: int) -> bool:
    at = int(np.searchsorted(keys, key))
    return at < keys.size and int(keys[at]) == key


def build(conn: sqlite3.Connection) -> TrigramSnapshot | None:
    """The snapshot of the table (inside the caller's read transaction), or None (too large, empty)."""
    rows = resident_fts.read_rows(conn, TABLE, MAX_ROWS, MAX_TOKENS)
    if rows is None:
        return None
    terms, keys, firsts = resident_fts.instances(conn, TERMS, INSTANCES, rows.rowids, offsets=True)
    bounds = [*firsts, keys.size]
    return TrigramSnapshot(rows, {term: (bounds[k], bounds[k + 1]) for k, term in enumerate(terms)}, keys)
