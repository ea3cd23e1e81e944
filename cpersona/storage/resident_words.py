"""The word index's postings held in memory: the best matches of an OR of words by bm25,
the same rows, order and scores as FTS5 gives (`fts_top.prefixes` on `memories_words`),
without FTS5 reading and scoring every match.

Why: at 10k rows a recall's word MATCH costs ~3 ms of CPU (FTS5 reads each phrase's
doclist twice — once to match, once to count it for the idf — and looks up every matching
row's size), the largest single cost of a recall after the trigram MATCH.

What is held (a `Snapshot`, rebuilt whole, never patched): for every term of
`memories_words`, the rows holding it and how often (read from FTS5's own `fts5vocab`
'instance' table, so the terms are FTS5's tokens by construction), each row's token count
(`memories_words_docsize`) and the table's row and token totals (FTS5's averages record,
the numbers its bm25 uses).

bm25 exactly as FTS5 computes it (sqlite/ext/fts5/fts5_aux.c, fts5Bm25Function,
k1 = 1.2, b = 0.75): for each phrase i in query order, idf_i = ln((N − n_i + 0.5) /
(n_i + 0.5)), 1e-6 when ≤ 0, and score += idf_i · (f·(k1 + 1)) / (f + k1·(1 − b + b·D /
avgdl)); rank = −score. The same IEEE operations in the same order give the same doubles;
every build checks that on FTS5 itself and turns the snapshot off when a platform's
compiler rounds differently (a fused multiply-add, say).

When it answers: only when the snapshot was built at the file's current change stamp
(`Database.change_stamp`: this process's writes and any other connection's commits), only
for an OR of phrases that are each one plain token (lower-case ASCII letters and digits, or
letters without case — CJK, kana — whose FTS5 form is the text itself), and only while the
table has at most MAX_ROWS rows. Otherwise the caller asks FTS5 (and a stale snapshot is
rebuilt in the background once the file has been quiet for QUIET_S).
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import threading
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cpersona.storage.fts_top import K1, Hits, or_phrases

if TYPE_CHECKING:
    from cpersona.storage.db import Database

log = logging.getLogger(__name__)

TABLE = "memories_words"
#: The temp fts5vocab 'instance' table every connection declares (search.install_vocab).
INSTANCES = f"temp.{TABLE}_instances"
#: FTS5's bm25 b (fts5_aux.c).
B = 0.75
#: Tables with more rows are left to FTS5: a build reads every token (~0.4 s per 10k rows).
MAX_ROWS = 60000
#: A stale snapshot is rebuilt once the change stamp has not moved for this many seconds
#: (a burst of stores costs one build, not one per store).
QUIET_S = 0.5
#: Terms checked against FTS5 after each build (the most frequent ones: many rows, many ties).
CHECK_TERMS = 3
CHECK_DEPTH = 40

_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


def plain_token(text: str) -> bool:
    """Whether FTS5's unicode61 tokenizer reads `text` as exactly one token equal to it:
    lower-case ASCII letters and digits, or letters without case (Unicode Lo / Lm: CJK, kana,
    Hangul) — no separator inside, nothing its case folding would change."""
    if _ASCII_TOKEN.fullmatch(text):
        return True
    return bool(text) and all((c.isascii() and (c.islower() or c.isdigit())) or
                              (not c.isascii() and unicodedata.category(c) in ("Lo", "Lm")) for c in text)


def _varint(blob: bytes, pos: int = 0) -> tuple[int, int]:
    """SQLite's variable-length integer at `pos` (https://www.sqlite.org/fileformat.html,
    "varint"): (value, position after it)."""
    value = 0
    for i in range(8):
        byte = blob[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    return (value << 8) | blob[pos + 8], pos + 9


@dataclass(frozen=True)
class Snapshot:
    """The postings of one state of the table (module doc). Row `i` of the table has rowid
    `rowids[i]`; term t's postings are `docs[lo:hi]` / `freqs[lo:hi]` for (lo, hi) = `spans[t]`."""

    stamp: tuple[int, int]
    rows: int
    rowids: np.ndarray  # int64, ascending
    norms: np.ndarray  # float64: k1·(1 − b + b·D/avgdl) per row
    spans: dict[str, tuple[int, int]]
    docs: np.ndarray  # int32 row positions
    freqs: np.ndarray  # float64 occurrences

    def top(self, phrases: list[str], depth: int) -> Hits:
        """The `depth` best matches of `"p1" OR "p2" …` over the whole table as [(rowid,
        bm25)], best first, equal bm25 by ascending rowid. Phrases must be plain tokens."""
        spans = [self.spans.get(p, (0, 0)) for p in phrases]
        held = [self.docs[lo:hi] for lo, hi in spans if hi > lo]
        if not held:
            return []
        rows = np.unique(np.concatenate(held))
        score = np.zeros(rows.size)
        for lo, hi in spans:
            if hi == lo:
                continue
            idf = math.log((self.rows - (hi - lo) + 0.5) / ((hi - lo) + 0.5))
            idf = idf if idf > 0.0 else 1e-6
            docs, freq = self.docs[lo:hi], self.freqs[lo:hi]
            score[np.searchsorted(rows, docs)] += idf * ((freq * (K1 + 1.0)) / (freq + self.norms[docs]))
        rank, rowids = -1.0 * score, self.rowids[rows]
        order = np.lexsort((rowids, rank))[:depth]
        return list(zip(rowids[order].tolist(), rank[order].tolist()))


def build(conn: sqlite3.Connection, stamp: tuple[int, int]) -> Snapshot | None:
    """Read the table into a Snapshot in one read transaction; None when it has more than
    MAX_ROWS rows or no token at all (nothing matches: FTS5 answers at once)."""
    conn.execute("BEGIN")
    try:
        averages = conn.execute(f"SELECT block FROM main.{TABLE}_data WHERE id = 1").fetchone()
        if averages is None:
            return None
        total_rows, pos = _varint(averages[0])
        total_tokens, _ = _varint(averages[0], pos)
        if total_rows == 0 or total_tokens == 0 or total_rows > MAX_ROWS:
            return None
        sizes = conn.execute(f"SELECT id, sz FROM main.{TABLE}_docsize ORDER BY id").fetchall()
        instances = conn.execute(f"SELECT term, doc FROM {INSTANCES}").fetchall()  # by term, then doc
    finally:
        conn.execute("COMMIT")
    rowids = np.fromiter((i for i, _ in sizes), np.int64, len(sizes))
    lengths = np.fromiter((_varint(sz)[0] if sz else 0 for _, sz in sizes), np.float64, len(sizes))
    avgdl = float(total_tokens) / float(total_rows)
    norms = K1 * (1 - B + B * lengths / avgdl)
    spans, docs, freqs = _postings(instances, rowids)
    return Snapshot(stamp, total_rows, rowids, norms, spans, docs, freqs)


def _postings(instances: list[tuple[str, int]], rowids: np.ndarray) -> tuple[dict[str, tuple[int, int]],
                                                                           np.ndarray, np.ndarray]:
    """(term → span, row positions, occurrences) from the instances in (term, doc) order:
    one posting per run of equal (term, doc)."""
    n = len(instances)
    doc = np.fromiter((d for _, d in instances), np.int64, n)
    firsts = [i for i in range(n) if i == 0 or instances[i][0] != instances[i - 1][0]]
    new_pair = np.ones(n, bool)
    new_pair[1:] = doc[1:] != doc[:-1]
    new_pair[firsts] = True
    starts = np.flatnonzero(new_pair)
    freqs = np.diff(np.append(starts, n)).astype(np.float64)
    bounds = np.append(np.searchsorted(starts, firsts), starts.size).tolist()
    spans = {instances[f][0]: (bounds[k], bounds[k + 1]) for k, f in enumerate(firsts)}
    return spans, np.searchsorted(rowids, doc[starts]).astype(np.int32), freqs


def agrees(conn: sqlite3.Connection, snap: Snapshot) -> bool:
    """Whether the snapshot ranks the CHECK_TERMS most frequent terms (together, and the
    rarest alone) exactly as FTS5 does on `conn`."""
    frequent = sorted(snap.spans, key=lambda t: snap.spans[t][0] - snap.spans[t][1])[:CHECK_TERMS]
    for phrases in (frequent, frequent[-1:]):
        expr = " OR ".join(f'"{p}"' for p in phrases)
        theirs = conn.execute(f"SELECT rowid, rank FROM {TABLE} WHERE {TABLE} MATCH ? ORDER BY +rank, rowid LIMIT ?",
                              (expr, CHECK_DEPTH)).fetchall()
        if [tuple(hit) for hit in theirs] != snap.top(phrases, CHECK_DEPTH):
            return False
    return True


class ResidentWords:
    """The snapshot of one Database, rebuilt by a daemon thread when the file changed."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._snapshot: Snapshot | None = None
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self.disabled = ""  # why the snapshot is off for good (a build that disagreed with FTS5)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def top(self, expr: str, depth: int) -> Hits | None:
        """FTS5's `depth` best matches of `expr` (module doc), or None: ask FTS5."""
        phrases = or_phrases(expr)
        if phrases is None or self.disabled or not all(plain_token(p) for p in phrases):
            return None
        snap, stamp = self._snapshot, self.db.change_stamp(wait=False)
        if stamp is None:
            return None
        if snap is None or snap.stamp != stamp:
            self._start()
            return None
        return snap.top(phrases, depth)

    def _start(self) -> None:
        with self._lock:
            self._wanted.set()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="cpersona-resident-words", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            self._wanted.clear()
            stamp = self._quiet_stamp()
            if stamp is None or self._stop.is_set():
                continue
            try:
                with self.db.read() as s:
                    snap = build(s.conn, stamp)
                    if snap is not None and not agrees(s.conn, snap):
                        self.disabled = "the word postings ranked differently from FTS5 on this platform"
                        log.warning("resident word postings off: %s; keyword search asks FTS5", self.disabled)
                        snap = None
                self._snapshot = snap
            except Exception as err:  # noqa: BLE001 — recall keeps asking FTS5; said once per failed build
                if not self._stop.is_set():
                    log.warning("resident word postings not built (%s: %s); keyword search asks FTS5",
                                type(err).__name__, err)

    def _quiet_stamp(self) -> tuple[int, int] | None:
        """The change stamp once it has stayed the same for QUIET_S (None: closed / writing)."""
        stamp = self.db.change_stamp(wait=False)
        while not self._stop.wait(QUIET_S):
            now = self.db.change_stamp(wait=False)
            if now is not None and now == stamp:
                return stamp
            stamp = now
        return None

    def close(self, wait_s: float = 10.0) -> None:
        """Stop rebuilding: the thread ends after the build it may be running (waited for, at
        most `wait_s`, so the connections it reads are not closed under it)."""
        self._stop.set()
        self._wanted.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait_s)
