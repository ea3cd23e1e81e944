"""The word index `memories_words` held in memory (storage/resident_fts.py has the why, the
freshness rule and the bm25): for each term, the rows holding it and how often.

A query phrase is read here only when it is one plain token — lower-case ASCII letters and
digits, or kana, CJK ideographs and Hangul syllables of the blocks SQLite's own Unicode
tables know — which FTS5's unicode61 tokenizer reads as exactly that token; any other phrase
sends the query to FTS5.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from dataclasses import dataclass

import numpy as np

from cpersona.storage import fts_instances, resident_fts
from cpersona.storage.fts_top import Hits

TABLE = "memories_words"
#: The temp fts5vocab tables every connection declares (search.install_vocab): 'row' (each
#: term's instance count) and 'instance'.
TERMS, INSTANCES = f"temp.{TABLE}_vocab", f"temp.{TABLE}_instances"
#: Larger tables are left to FTS5: a build reads every token (~0.3 s of CPU per million,
#: ~0.38 M at 10k rows of chat turns, 3.8 M at the SCALE corpus's 100k) and holds at most
#: 16 bytes for each (a posting: row position and count; int32 saved half and cost ~0.05 ms a
#: recall in numpy's conversions).
MAX_ROWS = resident_fts.MAX_ROWS
MAX_TOKENS = 6_000_000
#: ... or more distinct terms (each a Python string and a dict entry, ~250 bytes: ~100 MB);
#: natural text repeats its words, text of random characters (or CJK bigrams) may not.
MAX_TERMS = 400_000
#: FTS5 cuts a token at this many bytes (query tokens too): a longer query word goes to FTS5.
MAX_TOKEN_BYTES = 32768
#: Terms checked against FTS5 after each build (the most frequent: many rows, many ties).
CHECK_TERMS = 3

_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


#: Code point ranges whose letters SQLite's unicode61 tables (Unicode 6.1) read as token
#: characters: kana, CJK ideographs (Extension A and the unified block as of 6.1), Hangul
#: syllables, halfwidth kana. A letter outside them may be a separator to SQLite although
#: Python's newer tables call it a letter (New Tai Lue vowel signs are: found by a tester).
_TOKEN_RANGES = ((0x3005, 0x3006), (0x3041, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DB5), (0x4E00, 0x9FCB),
                 (0xAC00, 0xD7A3), (0xFF66, 0xFF9D))


def plain_token(text: str) -> bool:
    """Whether FTS5's unicode61 tokenizer reads `text` as exactly one token equal to it (module doc)."""
    if _ASCII_TOKEN.fullmatch(text):
        return True
    return bool(text) and all((c.isascii() and (c.islower() or c.isdigit())) or _cjk_letter(c) for c in text)


def _cjk_letter(c: str) -> bool:
    code = ord(c)
    return any(lo <= code <= hi for lo, hi in _TOKEN_RANGES) and unicodedata.category(c) in ("Lo", "Lm")


@dataclass(frozen=True)
class WordSnapshot:
    """Term t's postings are `docs[lo:hi]` (row positions) / `freqs[lo:hi]` for (lo, hi) = `spans[t]`."""

    rows: resident_fts.Rows
    spans: dict[str, tuple[int, int]]
    docs: np.ndarray
    freqs: np.ndarray

    def top(self, phrases: list[str], depth: int) -> Hits | None:
        if not all(plain_token(p) and len(p.encode("utf-8")) < MAX_TOKEN_BYTES for p in phrases):
            return None
        spans = [self.spans.get(p, (0, 0)) for p in phrases]
        return self.rows.top([(self.docs[lo:hi], self.freqs[lo:hi]) for lo, hi in spans], depth)

    def checks(self) -> list[list[str]]:
        readable = [t for t in self.spans if plain_token(t)]
        frequent = sorted(readable, key=lambda t: self.spans[t][0] - self.spans[t][1])[:CHECK_TERMS]
        return [frequent, frequent[-1:]] if frequent else []


def build(conn: sqlite3.Connection) -> WordSnapshot | None:
    """The snapshot of the table (inside the caller's read transaction), or None (too large, empty)."""
    rows = resident_fts.read_rows(conn, TABLE, MAX_ROWS, MAX_TOKENS)
    if rows is None:
        return None
    listed = fts_instances.term_list(conn, TERMS, MAX_TERMS)
    if listed is None:
        return None
    raw, counts = listed
    doc, term_starts = fts_instances.instances(conn, INSTANCES, counts, lambda i: fts_instances.utf8(raw[i]),
                                              rows.rowids, offsets=False)  # row positions
    firsts = term_starts[:-1]
    # a cut token decodes with U+FFFD: no query phrase this module reads holds one
    terms = [name.decode("utf-8", "replace") for name in raw]
    n = doc.size
    new_pair = np.ones(n, bool)  # one posting per run of equal (term, doc)
    new_pair[1:] = doc[1:] != doc[:-1]
    new_pair[firsts] = True
    starts = np.flatnonzero(new_pair)
    freqs = np.diff(np.append(starts, n)).astype(np.float64)
    bounds = np.append(np.searchsorted(starts, firsts), starts.size).tolist()
    spans = {term: (bounds[k], bounds[k + 1]) for k, term in enumerate(terms)}
    return WordSnapshot(rows, spans, doc[starts], freqs)
