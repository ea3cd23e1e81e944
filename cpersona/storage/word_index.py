"""Writing rows of the word index `memories_words` (schema.WORD_TABLES), for every writer of
`memories.content` in this layer: store and update (memories), import and merge (bulk),
health repairs (repairs), and the fill of rows it lacks (migration step 7).

SQLite triggers cannot compute the word form (it is Python: `util.words.index_form`), so
the triggers only DELETE the row of a deleted or changed memory and the writer that changed
it adds the new row in the same transaction. A memory written by another program (the
original CPersona, the sqlite3 shell) has no row until the next open fills it in, and the
health check `fts_integrity` reports and repairs the gap meanwhile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from cpersona.util.words import index_form

_INSERT = "INSERT INTO memories_words(rowid, body) VALUES (?, ?)"


def put(conn: sqlite3.Connection, memory_id: int, content: str, replace: bool = False) -> None:
    """Index one memory. `replace=True` first drops its row (an UPDATE whose content did not
    change fires no trigger, so the old row may still be there)."""
    if replace:
        conn.execute("DELETE FROM memories_words WHERE rowid = ?", (memory_id,))
    conn.execute(_INSERT, (memory_id, index_form(content)))


def put_many(conn: sqlite3.Connection, rows: Iterable[tuple[int, str]]) -> None:
    """Index (memory id, content) pairs that have no row yet."""
    conn.executemany(_INSERT, [(i, index_form(text)) for i, text in rows])
