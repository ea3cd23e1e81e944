"""`cpersona_meta` (key → JSON text) on PostgreSQL: the methods of `storage/meta.py`, and a
lock of one key against other nodes' writers."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from cpersona.storage.meta import TABLES, VECTORS_KEY, VectorState, decode
from cpersona.storage.postgres.rows import scalar


class PgMetaRepo:
    """Reads and writes of `cpersona_meta` over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def get(self, key: str) -> Any | None:
        """The decoded JSON value of `key`; None when absent, {} when unreadable."""
        row = self.conn.execute("SELECT value FROM cpersona_meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else decode(key, row[0])

    def lock(self, key: str) -> None:
        """Hold `key` against other nodes' writers until COMMIT (a transaction-scoped advisory
        lock: it also covers a key that has no row yet)."""
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':meta:' || %s))", (key,))

    def put(self, key: str, value: Any) -> None:
        self._put(key, json.dumps(value))

    def _put(self, key: str, text: str) -> None:
        self.conn.execute("INSERT INTO cpersona_meta(key, value) VALUES (%s, %s) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, text))

    def vector_state(self) -> VectorState:
        """The recorded vector identity; an empty VectorState when none (or unreadable)."""
        return VectorState.from_value(self.get(VECTORS_KEY))

    def put_vector_state(self, state: VectorState) -> None:
        self._put(VECTORS_KEY, state.to_json())

    def max_ids(self) -> dict[str, int]:
        """Largest id of memories and episodes (the boundary of a re-embedding)."""
        return {t: scalar(self.conn, f"SELECT COALESCE(MAX(id), 0) FROM {t}") for t in TABLES}

    def count_in_range(self, table: str, lo: int, hi: int) -> int:
        """Rows of `table` with id in (lo, hi]."""
        return scalar(self.conn, f"SELECT COUNT(*) FROM {table} WHERE id > %s AND id <= %s", (lo, hi))
