"""Bulk reads and writes for `cpersona migrate` on PostgreSQL (storage/transfer.py has the
column lists and the contract)."""

from __future__ import annotations

import psycopg

from cpersona.storage.meta import POSTGRES_LAYOUT_KEY, WORD_FORM_KEY
from cpersona.storage.postgres import word_index
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.transfer import COLUMNS, META_TABLE, key, rows_query


class PgTransferRepo:
    """Bulk reads and writes for a copy, over one PostgreSQL connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def count(self, table: str) -> int:
        return scalar(self.conn, f"SELECT COUNT(*) FROM {table}")

    def max_id(self, table: str) -> int:
        return scalar(self.conn, f"SELECT COALESCE(MAX({key(table)}), 0) FROM {table}")

    def rows(self, table: str, after_id: int, limit: int) -> list[tuple]:
        """Rows with a key (storage/transfer.py: `key`) > after_id, in key order, as tuples of COLUMNS[table]."""
        return self.conn.execute(rows_query(table, "%s"), (after_id, limit)).fetchall()

    def insert_rows(self, table: str, rows: list[tuple]) -> int:
        """Insert rows with their ids (write transaction); rows whose id exists are skipped."""
        cols = COLUMNS[table]
        marks = ", ".join(["%s"] * len(cols))
        with self.conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks}) ON CONFLICT DO NOTHING",
                            [tuple(_text_safe(v) for v in r) for r in rows])
            return cur.rowcount

    def meta_items(self) -> list[tuple[str, str]]:
        """(key, JSON text) of every cpersona_meta entry, by key (the backend's own layout
        record and the record of the word index's form left out)."""
        rows = self.conn.execute(f"SELECT key, value FROM {META_TABLE} WHERE key <> ALL(%s) ORDER BY key",
                                 ([POSTGRES_LAYOUT_KEY, WORD_FORM_KEY],))
        return [tuple(r) for r in rows]

    def put_meta_items(self, items: list[tuple[str, str]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {META_TABLE}(key, value) VALUES (%s, %s) "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", items)

    def finish(self) -> None:
        """After a copy: move every id sequence past the largest copied id and index the
        copied memories' words (the word index is derived, never copied)."""
        for table in (t for t in COLUMNS if key(t) == "id"):
            self.conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                              f"GREATEST((SELECT COALESCE(MAX(id), 0) FROM {table}), 1))")
        word_index.fill_missing(self.conn)


def _text_safe(value: object) -> object:
    """SQLite is dynamically typed: a legacy file may hold a number in a TEXT column. Numbers
    are sent as text so PostgreSQL's assignment casts accept them for either column type."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
