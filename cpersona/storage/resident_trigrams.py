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
from dataclasses import dataclass, field

import numpy as np

from cpersona.storage import fts_instances, resident_fts
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
#: ... or more distinct trigrams (16 bytes each held; text of random characters has about one
#: per character, natural text far fewer: 16k at the SCALE corpus's 100k rows).
MAX_TERMS = 4_000_000
_SHIFT, _OFFSET = fts_instances.SHIFT, fts_instances.OFFSET
#: Trigrams whose places a snapshot remembers (~150 bytes each).
FOUND_CACHE = 65536
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
    """The places of the trigram whose `code` is codes[t] are keys[starts[t]:starts[t + 1]];
    `codes` ascend (term order). Codes, not strings: a store of random characters holds about
    as many distinct trigrams as characters, and a Python string per trigram costs ~250 bytes."""

    rows: resident_fts.Rows
    codes: np.ndarray
    starts: np.ndarray
    keys: np.ndarray
    found: dict[str, tuple[int, int] | None] = field(default_factory=dict, compare=False, repr=False)

    def top(self, phrases: list[str], depth: int) -> Hits | None:
        folded = [fold(p) for p in phrases]
        if any(f is None or len(f) < 3 for f in folded):
            return None
        return self.rows.top([self._occurrences(f) for f in folded if f is not None], depth)

    def _places(self, text: str) -> list[np.ndarray] | None:
        """The places of each trigram of `text` in order; None when one occurs nowhere."""
        spans = [self._span(text[i:i + 3]) for i in range(len(text) - 2)]
        if any(span is None for span in spans):
            return None
        return [self.keys[lo:hi] for lo, hi in spans]  # type: ignore[misc]

    def _span(self, trigram: str) -> tuple[int, int] | None:
        """(lo, hi) of a trigram's places, None when it occurs nowhere; remembered for the
        trigrams recalls ask (FOUND_CACHE of them: a binary search costs ~10× a dict lookup)."""
        if trigram in self.found:
            return self.found[trigram]
        value = code(trigram)
        at = int(np.searchsorted(self.codes, value))
        span = (int(self.starts[at]), int(self.starts[at + 1])) \
            if at < self.codes.size and int(self.codes[at]) == value else None
        if len(self.found) < FOUND_CACHE:
            self.found[trigram] = span
        return span

    def _occurrences(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(row positions holding `text`, ascending; occurrences in each)."""
        places = self._places(text)
        if places is None:
            return np.empty(0, np.int64), np.empty(0)
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
        """The three most frequent readable trigrams together; the most frequent alone; and a
        four-character phrase that occurs (the most frequent trigram and the one after it)."""
        sizes = np.diff(self.starts)
        frequent: list[str] = []
        for t in np.argsort(-sizes, kind="stable")[:1000].tolist():  # the first readable ones
            if (text := trigram(int(self.codes[t]))) is not None and fold(text) == text:
                frequent.append(text)
                if len(frequent) == 3:
                    break
        if not frequent:
            return []
        first = self._places(frequent[0])[0][0]  # type: ignore[index]
        at = np.flatnonzero(self.keys == first + 1)
        after = trigram(int(self.codes[np.searchsorted(self.starts, at[0], "right") - 1])) if at.size else None
        longer = [[frequent[0] + after[2]]] if after and after[:2] == frequent[0][1:] and fold(after) == after else []
        return [frequent, frequent[:1], *longer]


def code(text: str) -> int:
    """A trigram as one integer (21 bits per code point): codes ascend as FTS5 orders terms
    (UTF-8 byte order is code point order)."""
    return (ord(text[0]) << 42) | (ord(text[1]) << 21) | ord(text[2])


def trigram(value: int) -> str | None:
    """The trigram of a `code`; None when a code point is none Python can pass as text (above
    U+10FFFF or a surrogate: bytes another program wrote, which FTS5 reads as such): no query
    phrase holds one, and it cannot bound a range of terms."""
    points = (value >> 42, (value >> 21) & 0x1FFFFF, value & 0x1FFFFF)
    if any(p > 0x10FFFF or 0xD800 <= p <= 0xDFFF for p in points):
        return None
    return "".join(map(chr, points))


#: Every term of the 'row' table as its `code` (SQLite's unicode() / substr() count code
#: points), its instance count and its length in bytes (`_utf8_bytes` of the code must agree:
#: a term with a NUL — where SQLite's text functions stop — or bytes that are not UTF-8 does not).
_CODES = ("SELECT group_concat((unicode(substr(term, 1, 1)) << 42) | (unicode(substr(term, 2, 1)) << 21) "
          "| unicode(substr(term, 3, 1))), group_concat(cnt), group_concat(length(CAST(term AS BLOB))), count(*) "
          f"FROM {TERMS}")


def _utf8_bytes(codes: np.ndarray) -> np.ndarray:
    """The UTF-8 length in bytes of each code's trigram."""
    total = np.zeros(codes.size, np.int64)
    for shift in (42, 21, 0):
        point = (codes >> shift) & 0x1FFFFF
        total += 1 + (point >= 0x80) + (point >= 0x800) + (point >= 0x10000)
    return total


def build(conn: sqlite3.Connection) -> TrigramSnapshot | None:
    """The snapshot of the table (inside the caller's read transaction), or None (too large, empty).
    Raises RuntimeError when a term is not three characters of UTF-8 (a NUL inside, bytes another
    program wrote) or the codes do not ascend: the build fails and FTS5 answers."""
    rows = resident_fts.read_rows(conn, TABLE, MAX_ROWS, MAX_TOKENS)
    if rows is None or fts_instances.too_many_terms(conn, TERMS, MAX_TERMS):
        return None
    *texts, n = conn.execute(_CODES).fetchone()
    codes, counts, sizes = (np.fromstring(t, dtype=np.int64, sep=",") if t else np.empty(0, np.int64) for t in texts)
    if n and not (codes.size == counts.size == sizes.size == n and np.array_equal(_utf8_bytes(codes), sizes)
                  and np.all(np.diff(codes) > 0)):
        raise RuntimeError(f"{TERMS}: terms that are not trigrams of UTF-8 text in code point order")
    keys, starts = fts_instances.instances(conn, INSTANCES, counts, lambda i: trigram(int(codes[i])), rows.rowids,
                                          offsets=True)
    return TrigramSnapshot(rows, codes, starts, keys)
