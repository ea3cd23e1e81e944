"""Keyword search over the FTS5 trigram indexes (https://www.sqlite.org/fts5.html), the
LIKE fallback, and the counts recall's quality gate needs.

`rank` is FTS5's bm25 (lower = better). Rows come back as `MemoryRow` / `EpisodeRow`
with their bm25, best first.
"""

from __future__ import annotations

import sqlite3

from cpersona.storage import episodes, memories
from cpersona.storage.records import EpisodeRow, MemoryRow
from cpersona.storage.scope import Scope

#: fts table → (content table, alias, columns of the row type).
_FTS = {
    "memories_fts": ("memories", "m", memories.ROW_COLUMNS),
    "episodes_fts": ("episodes", "e", episodes.ROW_COLUMNS),
    "memories_words": ("memories", "m", memories.ROW_COLUMNS),
}


class SearchRepo:
    """Keyword queries over one connection; `fts_enabled` says whether the FTS5 tables exist."""

    def __init__(self, conn: sqlite3.Connection, fts_enabled: bool) -> None:
        self.conn = conn
        self.fts_enabled = fts_enabled

    def memories_fts(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories matching the MATCH expression `expr` inside the scope, best bm25 first."""
        where, params = memories.row_filter(scope, source_id)
        return [(MemoryRow._make(r[:-1]), r[-1]) for r in self._fts("memories_fts", expr, where, params, limit)]

    def memories_words(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories whose word index (schema.WORD_TABLES) matches `expr`, best bm25 first."""
        where, params = memories.row_filter(scope, source_id)
        return [(MemoryRow._make(r[:-1]), r[-1]) for r in self._fts("memories_words", expr, where, params, limit)]

    def episodes_fts(self, expr: str, scope: Scope, limit: int) -> list[tuple[EpisodeRow, float]]:
        """Episodes (summary + keywords) matching `expr` inside the scope, best bm25 first."""
        where, params = scope.predicate("e")
        return [(EpisodeRow._make(r[:-1]), r[-1]) for r in self._fts("episodes_fts", expr, where, params, limit)]

    def _fts(self, fts: str, expr: str, where: str, params: list, limit: int) -> list[tuple]:
        table, alias, columns = _FTS[fts]
        sql = (
            f"SELECT {columns}, {fts}.rank FROM {fts} JOIN {table} {alias} ON {alias}.id = {fts}.rowid "
            f"WHERE {fts} MATCH ? AND {where} ORDER BY {fts}.rank LIMIT ?"
        )
        return self.conn.execute(sql, [expr, *params, limit]).fetchall()

    def memories_like(self, text: str, scope: Scope, source_id: str, limit: int) -> list[MemoryRow]:
        """`content LIKE '%<text>%'` (wildcards escaped, ASCII case-insensitive), newest first."""
        where, params = memories.row_filter(scope, source_id)
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = (
            f"SELECT {memories.ROW_COLUMNS} FROM memories m WHERE m.content LIKE ? ESCAPE '\\' AND {where} "
            "ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
        )
        return [MemoryRow._make(r) for r in self.conn.execute(sql, [pattern, *params, limit])]

    def pool_size(self, scope: Scope) -> int:
        """Memories + episodes inside `scope` (the rows the quality gate governs)."""
        where, params = scope.predicate()
        sql = f"SELECT (SELECT COUNT(*) FROM memories WHERE {where}) + (SELECT COUNT(*) FROM episodes WHERE {where})"
        return self.conn.execute(sql, params + params).fetchone()[0]

    def table_size(self, fts: str) -> int:
        """Largest rowid of the content table behind `fts` (an upper bound of its rows)."""
        table = _FTS[fts][0]
        return self.conn.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}").fetchone()[0]

    def term_doc_counts(self, fts: str, grams: list[str]) -> dict[str, int]:
        """Rows of `fts` containing each term (a trigram, or a word of the word index), read
        from its TEMP fts5vocab table."""
        vocab = f"{fts}_vocab"
        self.conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {fts}, 'row')")
        found = {g: 0 for g in grams}
        for g in grams:
            row = self.conn.execute(f"SELECT doc FROM temp.{vocab} WHERE term = ?", (g,)).fetchone()
            if row:
                found[g] = row[0]
        return found

    def database_file(self) -> str:
        """The main database's file name ('' for an in-memory database)."""
        return self.conn.execute("PRAGMA database_list").fetchone()[2]
