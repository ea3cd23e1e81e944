"""Keyword search over the FTS5 trigram indexes (https://www.sqlite.org/fts5.html), the
LIKE fallback, and the counts recall's quality gate needs.

`rank` is FTS5's bm25 (lower = better). Rows come back as `MemoryRow` / `EpisodeRow`
with their bm25, best first; equal bm25 in ascending rowid order.

How a MATCH is run (the same rows, order and scores as `… JOIN … WHERE MATCH AND <scope>
ORDER BY rank LIMIT n`, only faster): `ORDER BY rank` hands the sort to FTS5, which scores
and sorts EVERY matching row before the first is returned. `ORDER BY +rank, rowid LIMIT d`
(the `+` keeps FTS5 from taking the ORDER BY) lets SQLite keep only the best d while it
scores them — and FTS5 produces matches in ascending rowid order, which SQLite's sort keeps
for equal keys, so the order is the one FTS5 gives. The best d = TOP_DEPTH_FACTOR·n matches
of the whole table are read first and only those rows are then looked up in their table
under the scope (the best n first, the rest only when some of those are out of scope: a store
of one agent reads n rows); when fewer than n of them are in scope while the table had more
matches, the scoped query runs as before (a store shared by many agents).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator

from cpersona.storage import (
    episodes,
    fts_counts,
    fts_top,
    memories,
    resident_fts,
    resident_trigrams,
    resident_words,
    session_memo,
)
from cpersona.storage.records import EpisodeRow, MemoryRow
from cpersona.storage.scope import Scope

#: fts table → (content table, alias, columns of the row type).
_FTS = {
    "memories_fts": ("memories", "m", memories.READ_COLUMNS),
    "episodes_fts": ("episodes", "e", episodes.READ_COLUMNS),
    "memories_words": ("memories", "m", memories.READ_COLUMNS),
}

#: The scoped answer is taken from the best `TOP_DEPTH_FACTOR × limit` matches of the whole
#: table when that many hold `limit` rows of the scope (module doc).
TOP_DEPTH_FACTOR = 4

#: FTS tables with a TEMP fts5vocab 'row' table `<table>_vocab` on every connection.
_VOCAB_TABLES = ("memories_fts", "episodes_fts", "memories_words")


def install_vocab(conn: sqlite3.Connection, fts_enabled: bool = True) -> None:
    """TEMP fts5vocab tables (https://www.sqlite.org/fts5.html#the_fts5vocab_virtual_table_module):
    term document counts (to prune common query terms) and the instances of the indexes held
    in memory (storage/resident_fts.py), declared before a reader turns query-only. Nothing is
    written to the file. Nothing without FTS."""
    if not fts_enabled:
        return
    for table in _VOCAB_TABLES:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_vocab USING fts5vocab(main, {table}, 'row')")
    for held in (resident_words, resident_trigrams):
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {held.INSTANCES} "
                     f"USING fts5vocab(main, {held.TABLE}, 'instance')")


#: use_index → (WHERE clause on the content table's alias, parameters).
Filter = Callable[[bool], tuple[str, list]]


class SearchRepo:
    """Keyword queries over one connection; `fts_enabled` says whether the FTS5 tables exist."""

    def __init__(self, conn: sqlite3.Connection, fts_enabled: bool,
                 resident: resident_fts.ResidentFts | None = None) -> None:
        self.conn = conn
        self.fts_enabled = fts_enabled
        self.resident = resident
        self._memo: dict = {}  # storage/session_memo.py

    def memories_fts(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories matching the MATCH expression `expr` inside the scope, best bm25 first."""
        rows = self._fts("memories_fts", expr, lambda use: memories.row_filter(scope, source_id, use), limit)
        return [(MemoryRow._make(r[:-1]), r[-1]) for r in rows]

    def memories_words(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories whose word index (schema.WORD_TABLES) matches `expr`, best bm25 first."""
        rows = self._fts("memories_words", expr, lambda use: memories.row_filter(scope, source_id, use), limit)
        return [(MemoryRow._make(r[:-1]), r[-1]) for r in rows]

    def episodes_fts(self, expr: str, scope: Scope, limit: int) -> list[tuple[EpisodeRow, float]]:
        """Episodes (summary + keywords) matching `expr` inside the scope, best bm25 first."""
        rows = self._fts("episodes_fts", expr, lambda use: scope.predicate("e", use), limit)
        return [(EpisodeRow._make(r[:-1]), r[-1]) for r in rows]

    def _fts(self, fts: str, expr: str, scoped: Filter, limit: int) -> list[tuple]:
        """Rows (columns of the row type, then bm25) of the `limit` best matches in scope."""
        table, alias, columns = _FTS[fts]
        where, params = scoped(False)
        for top, complete in self._prefixes(fts, expr, limit * TOP_DEPTH_FACTOR):
            if not top:
                return []
            best = self._in_scope(table, alias, columns, (where, params), top, limit)
            if len(best) == limit or complete:
                return best
        where, params = scoped(True)
        sql = (
            f"SELECT {columns}, {fts}.rank FROM {fts} JOIN {table} {alias} ON {alias}.id = {fts}.rowid "
            f"WHERE {fts} MATCH ? AND {where} ORDER BY {fts}.rank LIMIT ?"
        )
        return self.conn.execute(sql, [expr, *params, limit]).fetchall()

    def _prefixes(self, fts: str, expr: str, depth: int) -> Iterator[tuple[fts_top.Hits, bool]]:
        """`fts_top.prefixes`, or the one answer of the index held in memory when it has it."""
        resident = self.resident.top(fts, expr, depth) if self.resident is not None else None
        if resident is None:
            return fts_top.prefixes(self.conn, fts, expr, depth)
        return iter([(resident, len(resident) < depth)])

    def _in_scope(self, table: str, alias: str, columns: str, scoped: tuple[str, list], top: fts_top.Hits,
                  limit: int) -> list[tuple]:
        """The first `limit` rows of `top` (best first) that are in scope, with their bm25.
        The best `limit` ids are looked up first and the rest only when some of those are out
        of scope: a store of one agent reads `limit` rows, not `TOP_DEPTH_FACTOR` times as many."""
        where, params = scoped
        best: list[tuple] = []
        for part in (top[:limit], top[limit:]):
            if not part or len(best) == limit:
                break
            marks = ",".join("?" * len(part))
            sql = f"SELECT {columns} FROM {table} {alias} WHERE {alias}.id IN ({marks}) AND {where}"
            found = {row[0]: row for row in self.conn.execute(sql, [i for i, _ in part] + params)}
            best.extend((*found[i], score) for i, score in part if i in found)
        return best[:limit]

    def memories_like(self, text: str, scope: Scope, source_id: str, limit: int) -> list[MemoryRow]:
        """`content LIKE '%<text>%'` (wildcards escaped, ASCII case-insensitive), newest first."""
        where, params = memories.row_filter(scope, source_id)
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = (
            f"SELECT {memories.READ_COLUMNS} FROM memories m WHERE m.content LIKE ? ESCAPE '\\' AND {where} "
            "ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
        )
        return [MemoryRow._make(r) for r in self.conn.execute(sql, [pattern, *params, limit])]

    def pool_size(self, scope: Scope) -> int:
        """Memories + episodes inside `scope` (the rows the quality gate governs)."""
        where, params = scope.predicate()
        sql = f"SELECT (SELECT COUNT(*) FROM memories WHERE {where}) + (SELECT COUNT(*) FROM episodes WHERE {where})"
        return self.conn.execute(sql, params + params).fetchone()[0]

    def table_size(self, fts: str) -> int:
        """Largest rowid of the content table behind `fts` (an upper bound of its rows); read
        once per session (storage/session_memo.py)."""
        table = _FTS[fts][0]
        return session_memo.once(self.conn, self._memo, ("size", table), lambda: self.conn.execute(
            f"SELECT COALESCE(MAX(rowid), 0) FROM {table}").fetchone()[0])

    def term_doc_counts(self, fts: str, grams: list[str]) -> dict[str, int]:
        """Rows of `fts` containing each term (a trigram, or a word of the word index), read
        from its TEMP fts5vocab table (kept by the connection while the file is unchanged:
        storage/fts_counts.py)."""
        vocab = f"{fts}_vocab"
        self.conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {fts}, 'row')")

        def count(todo: list[str]) -> dict[str, int]:
            found = {g: 0 for g in todo}
            for g in todo:
                row = self.conn.execute(f"SELECT doc FROM temp.{vocab} WHERE term = ?", (g,)).fetchone()
                if row:
                    found[g] = row[0]
            return found

        return fts_counts.cached(self.conn, "vocab", fts, grams, count)

    def database_file(self) -> str:
        """The main database's file name ('' for an in-memory database)."""
        return self.conn.execute("PRAGMA database_list").fetchone()[2]
