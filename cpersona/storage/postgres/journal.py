"""The bulk-write journal on PostgreSQL: `storage/journal.py` (whose module doc explains the
phases, undo and roll-forward) over postgres/dialect.py, with the tables created by the
migration (not on first use: two nodes creating a table at once would collide in the
catalog) and the journal rows keyed by a `seq` column instead of SQLite's rowid."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from cpersona.storage.journal import OPS, ROWS, TABLES, JournalRepo
from cpersona.storage.postgres.dialect import qmark
from cpersona.storage.postgres.rows import scalar

DDL = {
    OPS: f"""CREATE TABLE IF NOT EXISTS {OPS} (
        id BIGSERIAL PRIMARY KEY,
        kind TEXT NOT NULL,
        phase TEXT NOT NULL DEFAULT 'writing',
        owner TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '{{}}',
        started_at TEXT NOT NULL DEFAULT cpersona_now())""",
    ROWS: f"""CREATE TABLE IF NOT EXISTS {ROWS} (
        seq BIGSERIAL PRIMARY KEY,
        op BIGINT NOT NULL,
        action TEXT NOT NULL,
        tbl TEXT NOT NULL,
        row_id BIGINT NOT NULL,
        prior TEXT)""",
    f"idx_{ROWS}_op": f"CREATE INDEX IF NOT EXISTS idx_{ROWS}_op ON {ROWS}(op, action)",
}


class PgJournalRepo(JournalRepo):
    """Journal reads and writes over one connection (inside the caller's transaction)."""

    KEY = "seq"

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))
        self.pg = conn

    def exists(self) -> bool:
        return scalar(self.pg, "SELECT to_regclass(%s)", (OPS,)) is not None

    def begin(self, kind: str, owner: str, detail: dict[str, Any]) -> int:
        """Open an operation in phase `writing`; returns its id."""
        return int(scalar(self.pg, f"INSERT INTO {OPS}(kind, owner, detail) VALUES (%s, %s, %s) RETURNING id",
                          (kind, owner, json.dumps(detail))))

    def _hold(self, table: str, row_id: int) -> None:
        """Lock the row (READ COMMITTED): a merge that copies it waits, or is waited for, so a
        claim never reads the journal between the merge's copy and its commit."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        self.pg.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE", (row_id,))
