"""FTS5 indexes held in memory: the best matches of an OR of phrases by bm25, the same rows,
order and scores FTS5 gives (`fts_top.prefixes`), without FTS5 reading and scoring every
match. The word index (`resident_words.py`) and the memories' trigram index
(`resident_trigrams.py`) are held; this module has what they share.

Why: FTS5 reads every phrase's doclist twice — to match, and to count it for the idf — and
looks up each matching row's size, so the two keyword MATCHes were the largest part of a
recall's CPU (measured: benchmarks/rounds/2026-12-01-round-08-held-fts.md).

What is held is read from FTS5 itself, never re-derived: the index's own tokens, rows and
positions (its `fts5vocab` 'row' and 'instance' tables: `instances`), each row's token
count (`<table>_docsize`)
and the row and token totals of its averages record (what its bm25 uses). A snapshot is
rebuilt whole in a background thread; it answers only when it was built at the file's
current change stamp (`Database.change_stamp`: this process's writes and any other
connection's commits), so an answer never comes from an older state of the file. Until the
rebuild — started when recall has found the snapshot stale more than ASKED_BEFORE_BUILD
times at one stamp, once the file has been quiet for QUIET_S (and as long as the last build
took) — recall asks FTS5.

bm25 exactly as FTS5 computes it (sqlite/ext/fts5/fts5_aux.c, fts5Bm25Function, k1 = 1.2,
b = 0.75): for each phrase i in query order, idf_i = ln((N − n_i + 0.5) / (n_i + 0.5)), 1e-6
when ≤ 0, and score += idf_i · (f·(k1 + 1)) / (f + k1·(1 − b + b·D / avgdl)); rank = −score.
The same IEEE operations in the same order give the same doubles; every build checks that
against FTS5 (`agrees`) and turns the snapshot off when a platform rounds differently (a
compiler's fused multiply-add, say).
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from cpersona.storage.fts_top import K1, Hits, or_phrases

log = logging.getLogger(__name__)

#: FTS5's bm25 b (fts5_aux.c).
B = 0.75
#: A stale snapshot is rebuilt once the change stamp has not moved for this many seconds
#: (a burst of stores costs one build, not one per store).
QUIET_S = 0.5
#: ... and only once recall has asked this many times more at the same stamp (one recall asks
#: once per held index): an agent that stores after every recall would never use the build
#: (~2 s of CPU at 10k rows), a run of recalls on an unchanged file uses it from the next one.
ASKED_BEFORE_BUILD = 2
#: A build the file had changed under before it finished was wasted: the next one waits for
#: twice as long a quiet spell, up to this many seconds; a build that answers resets it. Steady
#: writes every second or so (another process storing) made builds back to back, a core busy.
MAX_QUIET_S = 60.0
#: Tables of more rows are left to FTS5 (a row costs 16 bytes held and a docsize read; each
#: index also bounds the tokens it holds: resident_trigrams / resident_words MAX_TOKENS).
MAX_ROWS = 150_000
#: SQLite virtual-machine steps between two looks of a build's statement at `close` (a few ms).
PROGRESS_STEPS = 10_000
#: Matches compared with FTS5 after each build, per check query.
CHECK_DEPTH = 40

#: Per phrase of a query, in query order: (row positions holding it, ascending; occurrences).
PhraseHits = list[tuple[np.ndarray, np.ndarray]]


class Snapshot(Protocol):
    """One index's state, as held in memory."""

    def top(self, phrases: list[str], depth: int) -> Hits | None:
        """FTS5's `depth` best matches of `"p1" OR "p2" …` ([(rowid, bm25)], best first,
        equal bm25 by ascending rowid), or None for a phrase this snapshot cannot read."""

    def checks(self) -> list[list[str]]:
        """Queries whose answers `agrees` compares with FTS5's."""


@dataclass(frozen=True)
class Rows:
    """The rows of one FTS5 table: rowids (int64, ascending), FTS5's row count N, each
    row's k1·(1 − b + b·D/avgdl), and the tokens of every row together (its instances)."""

    rowids: np.ndarray
    count: int
    norms: np.ndarray
    tokens: int

    def top(self, hits: PhraseHits, depth: int) -> Hits:
        """bm25 over the phrases' hits (module doc), the best `depth` as [(rowid, bm25)]."""
        if depth <= 0:
            return []
        score = np.zeros(self.rowids.size)  # per row of the table: a row's phrases add up in query order
        matched = np.zeros(self.rowids.size, bool)
        for docs, freq in hits:
            if not docs.size:
                continue
            idf = math.log((self.count - docs.size + 0.5) / (docs.size + 0.5))
            idf = idf if idf > 0.0 else 1e-6
            score[docs] += idf * ((freq * (K1 + 1.0)) / (freq + self.norms[docs]))
            matched[docs] = True
        rows = np.flatnonzero(matched)
        rank = -1.0 * score[rows]
        if rows.size > depth:  # every row tied with the depth-th best stays in for the rowid order
            keep = rank <= np.partition(rank, depth - 1)[depth - 1]
            rows, rank = rows[keep], rank[keep]
        rowids = self.rowids[rows]
        order = np.lexsort((rowids, rank))[:depth]
        return list(zip(rowids[order].tolist(), rank[order].tolist()))


def varint(blob: bytes, pos: int = 0) -> tuple[int, int]:
    """SQLite's variable-length integer at `pos` (https://www.sqlite.org/fileformat.html,
    "varint"): (value, position after it)."""
    value = 0
    for i in range(8):
        byte = blob[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    return (value << 8) | blob[pos + 8], pos + 9


def read_rows(conn: sqlite3.Connection, table: str, max_rows: int, max_tokens: int) -> Rows | None:
    """The table's `Rows` (inside the caller's read transaction); None when it holds more
    than `max_rows` rows or `max_tokens` tokens (what a build reads and holds: long rows make
    many), or no token at all (nothing can match: FTS5 answers at once)."""
    averages = conn.execute(f"SELECT block FROM main.{table}_data WHERE id = 1").fetchone()
    if averages is None or not averages[0]:  # a table never written has an empty record
        return None
    count, pos = varint(averages[0])
    tokens = 0
    while pos < len(averages[0]):  # one total per column
        column, pos = varint(averages[0], pos)
        tokens += column
    if count == 0 or tokens == 0 or count > max_rows or tokens > max_tokens:
        return None
    sizes = conn.execute(f"SELECT id, sz FROM main.{table}_docsize ORDER BY id").fetchall()
    rowids = np.fromiter((i for i, _ in sizes), np.int64, len(sizes))
    lengths = np.fromiter((_row_tokens(sz) for _, sz in sizes), np.float64, len(sizes))
    return Rows(rowids, count, K1 * (1 - B + B * lengths / (float(tokens) / float(count))), tokens)


def _row_tokens(sizes: bytes | None) -> int:
    """A docsize record: one varint per column; the row's tokens are their sum."""
    total, pos = 0, 0
    while sizes and pos < len(sizes):
        column, pos = varint(sizes, pos)
        total += column
    return total


def agrees(conn: sqlite3.Connection, table: str, snap: Snapshot) -> bool:
    """Whether the snapshot answers its check queries exactly as FTS5 does on `conn`."""
    for phrases in snap.checks():
        expr = " OR ".join('"' + p.replace('"', '""') + '"' for p in phrases)
        theirs = conn.execute(f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ? ORDER BY +rank, rowid LIMIT ?",
                              (expr, CHECK_DEPTH)).fetchall()
        ours = snap.top(phrases, CHECK_DEPTH)
        if ours is not None and [tuple(hit) for hit in theirs] != ours:  # None: not read here, FTS5 answers
            return False
    return True


#: table → build(connection inside a read transaction) → its snapshot or None.
Builders = dict[str, Callable[[sqlite3.Connection], Snapshot | None]]


class _Connected(Protocol):
    @property
    def conn(self) -> sqlite3.Connection: ...


class Source(Protocol):
    """What the held indexes need of their database (storage/db.py: `Database`)."""

    def change_stamp(self, wait: bool = True) -> tuple[int, int] | None:
        """Equal stamps mean unchanged rows; None (with `wait=False`) while the file is written."""

    def read(self) -> AbstractContextManager[_Connected]:
        """A read session on this thread's connection."""


class ResidentFts:
    """The snapshots of one database's held indexes, rebuilt by a daemon thread when the
    file changed (module doc)."""

    def __init__(self, db: Source, builders: Builders) -> None:
        self.db = db
        self.builders = builders
        self._held: tuple[tuple[int, int], dict[str, Snapshot]] | None = None
        self._asked: tuple[tuple[int, int] | None, int] = (None, 0)  # (stamp, times asked at it while stale)
        self._quiet = QUIET_S  # the quiet spell the next build waits for (MAX_QUIET_S)
        self._build_s = 0.0  # how long the last build took: a shorter quiet spell would not outlast one
        self.disabled: dict[str, str] = {}  # table → why it is off for good
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def top(self, table: str, expr: str, depth: int) -> Hits | None:
        """FTS5's `depth` best matches of `expr` in `table`, or None: ask FTS5."""
        phrases = or_phrases(expr)
        if phrases is None or table not in self.builders or table in self.disabled:
            return None
        held, stamp = self._held, self.db.change_stamp(wait=False)
        if stamp is None:
            return None
        if held is None or held[0] != stamp:
            with self._lock:  # a snapshot of another state never answers again: free it
                if held is not None and self._held is held:
                    self._held = None
            count = self._asked[1] + 1 if self._asked[0] == stamp else 1
            self._asked = (stamp, count)
            if count > ASKED_BEFORE_BUILD:
                self._start()
            return None
        snap = held[1].get(table)
        hits = None if snap is None else snap.top([p.replace('""', '"') for p in phrases], depth)
        if hits is not None:
            self._quiet = QUIET_S  # builds pay off: back to the short wait
        return hits

    def _start(self) -> None:
        with self._lock:
            self._wanted.set()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="cpersona-resident-fts", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            self._wanted.clear()
            stamp = self._quiet_stamp()
            held = self._held
            if stamp is not None and not self._stop.is_set() and (held is None or held[0] != stamp):
                self._build(stamp)  # (recalls that found it stale while it was building ask again: once is enough)

    def _build(self, stamp: tuple[int, int]) -> None:
        """Build every held index at `stamp`, each on its own (one that fails leaves the other)."""
        started = time.monotonic()
        with self._lock:
            self._held = None  # stale (or it would not be rebuilt): not held beside the new one
        failed: list[str] = []
        snaps: dict[str, Snapshot] | None = None
        try:
            with self.db.read() as s:
                s.conn.set_progress_handler(self._stop.is_set, PROGRESS_STEPS)  # close() aborts what runs
                s.conn.execute("BEGIN")  # one state of the file for every table
                try:
                    snaps = {t: snap for t, build in self.builders.items() if t not in self.disabled
                             if (snap := self._one(s.conn, t, build, failed)) is not None}
                finally:
                    s.conn.set_progress_handler(None, 0)
                    s.conn.execute("COMMIT")
        except Exception as err:  # noqa: BLE001 — recall keeps asking FTS5; said below
            failed.append(f"{type(err).__name__}: {err}")
        if snaps is not None:
            with self._lock:
                self._held = (stamp, snaps)
            self._build_s = time.monotonic() - started
        if failed or self.db.change_stamp(wait=False) != stamp:  # failed, or stale on arrival: wasted
            self._quiet = min(2 * self._quiet, MAX_QUIET_S)  # a build that fails again would cost as much again
        if failed and not self._stop.is_set():
            log.warning("FTS indexes not held in memory (%s); keyword search asks FTS5; next try after "
                        "%.0f s of quiet", "; ".join(failed), self._quiet)

    def _one(self, conn: sqlite3.Connection, table: str, build: Callable[[sqlite3.Connection], Snapshot | None],
             failed: list[str]) -> Snapshot | None:
        """One index's snapshot, checked against FTS5; None (and why in `failed`) when it fails."""
        try:
            snap = build(conn)
        except Exception as err:  # noqa: BLE001 — reported by `_build`
            failed.append(f"{table}: {type(err).__name__}: {err}")
            return None
        return snap if snap is not None and self._checked(conn, table, snap) else None

    def _checked(self, conn: sqlite3.Connection, table: str, snap: Snapshot) -> bool:
        if agrees(conn, table, snap):
            return True
        self.disabled[table] = "ranked differently from FTS5 on this platform"
        log.warning("%s not held in memory: it %s; keyword search asks FTS5", table, self.disabled[table])
        return False

    def _quiet_stamp(self) -> tuple[int, int] | None:
        """The change stamp once it has stayed the same for the current quiet spell, and at
        least as long as the last build took (None: closed)."""
        stamp = self.db.change_stamp(wait=False)
        while not self._stop.wait(min(max(self._quiet, self._build_s), MAX_QUIET_S)):
            now = self.db.change_stamp(wait=False)
            if now is not None and now == stamp:
                return stamp
            stamp = now
        return None

    def close(self, wait_s: float = 10.0) -> threading.Thread | None:
        """Stop rebuilding: the build it may be running stops at its next SQLite step (waited
        for, at most `wait_s`). Returns the builder thread when it is still running then: its
        read connection must not be closed under it."""
        self._stop.set()  # a build's statements abort (its progress handler), its numpy work is short
        self._wanted.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait_s)
            if thread.is_alive():
                log.warning("an FTS index build was still running %.0f s after close", wait_s)
                return thread
        return None
