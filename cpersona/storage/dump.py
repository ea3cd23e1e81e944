"""Reading whole tables as plain dicts, in a stable order: the body of an export, the
source of a merge, and the reader of another database file (ours or an original's).

The fields are those of the `cpersona-export/1.0` lines (source and metadata as the
stored JSON text, the vector as bytes under `embedding`). A column a file lacks — an
original database older than v13 — reads as its default, so one reader serves every
schema version. Rows are fetched in chunks by id (keyset pagination): memory use stays
flat however large the table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from cpersona.storage import text_columns

#: table → ((field, default when the column is missing), ...), in export order.
FIELDS: dict[str, tuple[tuple[str, Any], ...]] = {
    "memories": (("id", None), ("agent_id", ""), ("msg_id", ""), ("content", ""), ("source", "{}"),
                 ("timestamp", ""), ("metadata", "{}"), ("created_at", None), ("project_id", ""), ("channel", ""),
                 ("locked", 0), ("recall_count", 0), ("last_recalled_at", None)),
    "episodes": (("id", None), ("agent_id", ""), ("summary", ""), ("keywords", ""), ("start_time", None),
                 ("end_time", None), ("created_at", None), ("resolved", 0), ("project_id", ""), ("channel", "")),
    "profiles": (("id", None), ("agent_id", ""), ("user_id", ""), ("content", ""), ("updated_at", None),
                 ("project_id", "")),
}
_CHUNK = 1000


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The columns `table` has in this file (empty when the table does not exist)."""
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


class DumpRepo:
    """Whole-table reads over one connection (use a snapshot for a consistent export)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._columns: dict[str, set[str]] = {}

    def has(self, table: str) -> bool:
        return bool(self._cols(table))

    def _cols(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = columns(self.conn, table)
        return self._columns[table]

    def _read(self, name: str) -> str:
        """How a column is read: text columns as text whatever another program stored there
        (storage/text_columns.py)."""
        return text_columns.read(name)

    def _select(self, table: str, with_embedding: bool) -> str:
        have = self._cols(table)
        parts = []
        for name, default in FIELDS[table]:
            if name in have:
                parts.append(self._read(name))
            else:
                parts.append(f"{'NULL' if default is None else repr(default)} AS {name}")
        if with_embedding:
            parts.append("embedding" if "embedding" in have else "NULL AS embedding")
        return ", ".join(parts)

    def count(self, table: str, agent: str | None) -> int:
        """Rows of `table` (of `agent`; None = every agent); 0 when the table is absent."""
        if not self.has(table):
            return 0
        if agent is None:
            return self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        return self.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE agent_id = ?", (agent,)).fetchone()[0]

    def rows(self, table: str, agent: str | None, with_embedding: bool = False) -> Iterator[dict[str, Any]]:
        """Every row of `table` (of `agent`; None = all) in id order, as dicts of FIELDS
        (+ `embedding` when asked). Nothing when the table is absent."""
        if not self.has(table):
            return
        names = [name for name, _ in FIELDS[table]] + (["embedding"] if with_embedding else [])
        where, params = ("", []) if agent is None else (" AND agent_id = ?", [agent])
        sql = f"SELECT {self._select(table, with_embedding)} FROM {table} WHERE id > ?{where} ORDER BY id LIMIT ?"
        last = 0
        while True:
            chunk = self.conn.execute(sql, [last, *params, _CHUNK]).fetchall()
            for row in chunk:
                yield dict(zip(names, row))
            if len(chunk) < _CHUNK:
                return
            last = chunk[-1][0]

    #: appended to `row`'s statement to hold the row until the transaction ends (PostgreSQL)
    LOCK = ""

    def row(self, table: str, row_id: int, with_embedding: bool = False) -> dict[str, Any] | None:
        """Row `row_id` of `table` as `rows` gives it, read now (None when it is gone); inside a
        write transaction no other writer can change it before the transaction ends."""
        names = [name for name, _ in FIELDS[table]] + (["embedding"] if with_embedding else [])
        found = self.conn.execute(f"SELECT {self._select(table, with_embedding)} FROM {table} WHERE id = ?{self.LOCK}",
                                  (row_id,)).fetchone()
        return None if found is None else dict(zip(names, found))

    def ids(self, table: str, agent: str) -> list[int]:
        """Ids of the agent's rows of `table`."""
        return [r[0] for r in self.conn.execute(f"SELECT id FROM {table} WHERE agent_id = ? ORDER BY id", (agent,))]

    def schema_version(self) -> int | None:
        """MAX(version) of schema_version (None when absent)."""
        if not self.has("schema_version"):
            return None
        return self.conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
