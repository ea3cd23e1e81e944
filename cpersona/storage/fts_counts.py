"""Exact FTS5 term and phrase counts, remembered by each connection while the file is unchanged.

Recall counts the rows holding each query term (the word index's idf, the bounds of
MaxScore pruning in fts_top.py). A common word's count walks its whole posting list, and
the common words of one query are those of the next, so each connection keeps the counts
it read until the file changes: `PRAGMA data_version` changes when another connection
commits, `total_changes` when this one writes (https://www.sqlite.org/pragma.html#pragma_data_version).
Counts read inside a transaction (uncommitted rows) are never kept.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

#: Counts a connection keeps before it starts over.
MAX_KEPT = 50_000


class CountingConnection(sqlite3.Connection):
    """A connection with room for the counts it has read (`sqlite3.connect(factory=…)`)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kept_counts: dict[tuple[str, str, str], int] = {}
        self.kept_at: tuple[int, int] | None = None


def cached(conn: sqlite3.Connection, kind: str, fts: str, keys: list[str],
           count: Callable[[list[str]], dict[str, int]]) -> dict[str, int]:
    """{key: count(…)[key]} for every key, from what `conn` kept while the file is unchanged;
    `count` is called once with the missing keys. `kind` names what is counted (terms of a
    vocabulary, phrase matches) so different counts of one table never mix."""
    if not isinstance(conn, CountingConnection) or conn.in_transaction:
        return count(keys)
    stamp = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
    if conn.kept_at != stamp or len(conn.kept_counts) > MAX_KEPT:
        conn.kept_counts, conn.kept_at = {}, stamp
    kept = conn.kept_counts
    missing = [k for k in keys if (kind, fts, k) not in kept]
    if missing:
        for key, value in count(missing).items():
            kept[(kind, fts, key)] = value
    return {k: kept[(kind, fts, k)] for k in keys}
