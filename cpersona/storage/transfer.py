"""Copying a whole store between backends (`cpersona migrate`): every table's rows in id
order, in batches, with explicit ids, so a copy can resume after the last id the target
holds. The column lists are the stored format shared by both backends (docs/storage.md);
columns a backend adds for itself (the PostgreSQL task leases) are not copied. The two
tables of the declared graph without an id (an entity's aliases and mentions) are copied in
groups of whole entities, keyed by `entity_id`."""

from __future__ import annotations

import sqlite3
from typing import Any

from cpersona.storage.meta import WORD_FORM_KEY

#: table → columns copied, id first. Order = copy order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "memories": ("id", "agent_id", "project_id", "msg_id", "content", "source", "timestamp", "metadata", "embedding",
                 "channel", "recall_count", "last_recalled_at", "locked", "created_at"),
    "episodes": ("id", "agent_id", "project_id", "summary", "keywords", "embedding", "start_time", "end_time",
                 "resolved", "channel", "created_at"),
    "profiles": ("id", "agent_id", "project_id", "user_id", "content", "updated_at"),
    "pending_memory_tasks": ("id", "task_type", "agent_id", "project_id", "payload", "retries", "created_at",
                             "status", "last_error", "updated_at", "not_before"),
    "entities": ("id", "agent_id", "project_id", "channel", "name", "normalized", "declared_by", "created_at"),
    "entity_aliases": ("entity_id", "alias", "normalized"),
    "entity_mentions": ("entity_id", "ref", "declared_by", "created_at"),
    "relations": ("id", "agent_id", "project_id", "channel", "subject_kind", "subject_id", "predicate", "object_kind",
                  "object_id", "anchor_ref", "declared_by", "declared_at"),
}
#: Tables without an id: the rows of one `entity_id` (their first column) move in one batch,
#: ordered within it by this column.
GROUPED = {"entity_aliases": "normalized", "entity_mentions": "ref"}


def key(table: str) -> str:
    """The column a copy of `table` resumes after: its id, or the entity of a grouped table."""
    return COLUMNS[table][0]


def rows_query(table: str, mark: str = "?") -> str:
    """SELECT of the rows after a key (first `mark`) in key order, at most a limit (second
    `mark`) of ids — of entities for a grouped table, whose every row of those comes along."""
    cols, k = ", ".join(COLUMNS[table]), key(table)
    if table in GROUPED:
        return (f"SELECT {cols} FROM {table} WHERE {k} IN (SELECT DISTINCT {k} FROM {table} WHERE {k} > {mark} "
                f"ORDER BY {k} LIMIT {mark}) ORDER BY {k}, {GROUPED[table]}")
    return f"SELECT {cols} FROM {table} WHERE id > {mark} ORDER BY id LIMIT {mark}"
#: The key-value table, copied whole (it has no id).
META_TABLE = "cpersona_meta"


class TransferRepo:
    """Bulk reads and writes for a copy, over one SQLite connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def count(self, table: str) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]

    def max_id(self, table: str) -> int:
        return self.conn.execute(f"SELECT COALESCE(MAX({key(table)}), 0) FROM {table}").fetchone()[0]

    def rows(self, table: str, after_id: int, limit: int) -> list[tuple]:
        """Rows with a key (`key`) > after_id, in key order, as tuples of COLUMNS[table]."""
        return self.conn.execute(rows_query(table), (after_id, limit)).fetchall()

    def insert_rows(self, table: str, rows: list[tuple]) -> int:
        """Insert rows with their ids (write transaction); rows whose id exists are skipped."""
        cols = COLUMNS[table]
        marks = ", ".join("?" * len(cols))
        cur = self.conn.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) VALUES ({marks})", rows)
        return max(cur.rowcount, 0)

    def meta_items(self) -> list[tuple[str, str]]:
        """(key, JSON text) of every cpersona_meta entry, by key (the record of the word
        index's form left out: each store derives its own index)."""
        return self.conn.execute(f"SELECT key, value FROM {META_TABLE} WHERE key <> ? ORDER BY key",
                                 (WORD_FORM_KEY,)).fetchall()

    def put_meta_items(self, items: list[tuple[str, str]]) -> None:
        self.conn.executemany(f"INSERT OR REPLACE INTO {META_TABLE}(key, value) VALUES (?, ?)", items)

    def finish(self) -> None:
        """After a copy: nothing to do on SQLite (AUTOINCREMENT follows explicit ids)."""


def canonical(value: Any) -> Any:
    """A stored value as both backends give it back (bytes stay bytes; memoryview → bytes)."""
    return bytes(value) if isinstance(value, memoryview) else value
