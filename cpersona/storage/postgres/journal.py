"""The bulk-write journal on PostgreSQL: the same tables, phases and undo / roll-forward as
`storage/journal.py` (whose module doc explains them), created by the migration (not on
first use: two nodes creating a table at once would collide in the catalog)."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from cpersona.storage.journal import OPS, ROWS, TABLES, Op
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


class PgJournalRepo:
    """Journal reads and writes over one connection (inside the caller's transaction)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def exists(self) -> bool:
        return scalar(self.conn, "SELECT to_regclass(%s)", (OPS,)) is not None

    def begin(self, kind: str, owner: str, detail: dict[str, Any]) -> int:
        """Open an operation in phase `writing`; returns its id."""
        return int(scalar(self.conn, f"INSERT INTO {OPS}(kind, owner, detail) VALUES (%s, %s, %s) RETURNING id",
                          (kind, owner, json.dumps(detail))))

    def note(self, op: int, action: str, table: str, row_id: int, prior: dict[str, Any] | None = None) -> None:
        self.conn.execute(f"INSERT INTO {ROWS}(op, action, tbl, row_id, prior) VALUES (%s, %s, %s, %s, %s)",
                          (op, action, table, row_id, None if prior is None else json.dumps(prior)))

    def set_phase(self, op: int, phase: str) -> None:
        self.conn.execute(f"UPDATE {OPS} SET phase = %s WHERE id = %s", (phase, op))

    def ops(self) -> list[Op]:
        """Every journaled operation."""
        if not self.exists():
            return []
        rows = self.conn.execute(f"SELECT id, kind, phase, owner, detail, started_at FROM {OPS} ORDER BY id")
        return [Op(r[0], r[1], r[2], r[3], json.loads(r[4] or "{}"), r[5]) for r in rows]

    def remaining(self, op: int, action: str) -> int:
        return scalar(self.conn, f"SELECT COUNT(*) FROM {ROWS} WHERE op = %s AND action = %s", (op, action))

    def undo(self, op: int, limit: int) -> list[tuple[str, int]]:
        """Undo up to `limit` inserts / profile changes of `op` (newest first) and forget
        them; returns the (table, id) of the rows removed."""
        rows = self.conn.execute(
            f"SELECT seq, action, tbl, row_id, prior FROM {ROWS} WHERE op = %s AND action IN ('insert', 'profile') "
            "ORDER BY seq DESC LIMIT %s", (op, limit)).fetchall()
        removed: list[tuple[str, int]] = []
        for seq, action, table, row_id, prior in rows:
            _check(seq, table)
            if action == "profile" and prior is not None:
                old = json.loads(prior)
                self.conn.execute("UPDATE profiles SET content = %s, updated_at = %s, project_id = %s WHERE id = %s",
                                  (old["content"], old["updated_at"], old["project_id"], row_id))
            else:
                self.conn.execute(f"DELETE FROM {table} WHERE id = %s", (row_id,))
                removed.append((table, row_id))
            self.conn.execute(f"DELETE FROM {ROWS} WHERE seq = %s", (seq,))
        return removed

    def redo_deletes(self, op: int, limit: int) -> list[tuple[str, int]]:
        """Delete up to `limit` source rows `op` still has to delete and forget them."""
        rows = self.conn.execute(f"SELECT seq, tbl, row_id FROM {ROWS} WHERE op = %s AND action = 'delete' "
                                 "ORDER BY seq LIMIT %s", (op, limit)).fetchall()
        for seq, table, row_id in rows:
            _check(seq, table)
            self.conn.execute(f"DELETE FROM {table} WHERE id = %s", (row_id,))
            self.conn.execute(f"DELETE FROM {ROWS} WHERE seq = %s", (seq,))
        return [(table, row_id) for _, table, row_id in rows]

    def forget(self, op: int, limit: int) -> int:
        """Drop up to `limit` journal rows of a finished `op`; the op itself once none is left."""
        n = self.conn.execute(f"DELETE FROM {ROWS} WHERE seq IN (SELECT seq FROM {ROWS} WHERE op = %s LIMIT %s)",
                              (op, limit)).rowcount
        if n == 0:
            self.conn.execute(f"DELETE FROM {OPS} WHERE id = %s", (op,))
        return n


def _check(seq: int, table: str) -> None:
    if table not in TABLES:
        raise ValueError(f"journal row {seq} names an unknown table {table!r}")
