"""The bulk-write journal (ours): what makes a large import or merge all-or-nothing although
it is written in many short transactions.

A bulk operation writes its rows in chunks of a few milliseconds each, so the write lock is
never held long (a recall, another process's store, the queue go on in between). Every
chunk records, in the same transaction, what it did (`cpersona_bulk_rows`):

    insert   (table, new row id)           undo: delete the row
    profile  (profiles, row id, prior)     undo: put the prior profile back (prior NULL: delete it)
    delete   (table, source row id)        a merge "move": delete this source row after the commit point

The commit point is one tiny statement: the operation's phase becomes `done` (or `deleting`
for a move). An operation found in phase `writing` whose process is gone (kill -9, power
loss) is undone chunk by chunk; one found in `deleting` is rolled forward. Journal rows of a
finished operation are removed afterwards, in chunks. Both tables are created on first use;
other tools (the original CPersona) ignore them. A write outside the operation that changes
one of its rows, or vouches for it (a store answered "already stored"), `claim`s the row
first: the undo then keeps it, and a row a move is about to delete refuses the write.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

OPS = "cpersona_bulk_ops"
ROWS = "cpersona_bulk_rows"
_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {OPS} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        phase TEXT NOT NULL DEFAULT 'writing',
        owner TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '{{}}',
        started_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    f"""CREATE TABLE IF NOT EXISTS {ROWS} (
        op INTEGER NOT NULL,
        action TEXT NOT NULL,
        tbl TEXT NOT NULL,
        row_id INTEGER NOT NULL,
        prior TEXT)""",
    f"CREATE INDEX IF NOT EXISTS idx_{ROWS}_op ON {ROWS}(op, action)",
    f"CREATE INDEX IF NOT EXISTS idx_{ROWS}_row ON {ROWS}(tbl, row_id)",
)
TABLES = ("memories", "episodes", "profiles")


@dataclass(frozen=True)
class Op:
    """One journaled bulk operation."""

    id: int
    kind: str
    phase: str  # writing | deleting | done
    owner: str
    detail: dict[str, Any]
    started_at: str


class JournalRepo:
    """Journal reads and writes over one connection (inside the caller's transaction)."""

    #: The column that orders a journal's rows (SQLite's implicit rowid).
    KEY = "rowid"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def exists(self) -> bool:
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                 (OPS,)).fetchone() is not None

    def begin(self, kind: str, owner: str, detail: dict[str, Any]) -> int:
        """Create the tables if needed and open an operation in phase `writing`."""
        for ddl in _DDL:
            self.conn.execute(ddl)
        cur = self.conn.execute(f"INSERT INTO {OPS}(kind, owner, detail) VALUES (?, ?, ?)",
                                (kind, owner, json.dumps(detail)))
        return int(cur.lastrowid or 0)

    def note(self, op: int, action: str, table: str, row_id: int, prior: dict[str, Any] | None = None) -> None:
        """Record one effect of `op` (see the module doc for the actions)."""
        self.conn.execute(f"INSERT INTO {ROWS}(op, action, tbl, row_id, prior) VALUES (?, ?, ?, ?, ?)",
                          (op, action, table, row_id, None if prior is None else json.dumps(prior)))

    def set_phase(self, op: int, phase: str) -> None:
        """The commit point (`done`, or `deleting` for a move)."""
        self.conn.execute(f"UPDATE {OPS} SET phase = ? WHERE id = ?", (phase, op))

    def ops(self) -> list[Op]:
        """Every journaled operation (none when the tables do not exist)."""
        if not self.exists():
            return []
        rows = self.conn.execute(f"SELECT id, kind, phase, owner, detail, started_at FROM {OPS} ORDER BY id")
        return [Op(r[0], r[1], r[2], r[3], json.loads(r[4] or "{}"), r[5]) for r in rows]

    def remaining(self, op: int, action: str) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM {ROWS} WHERE op = ? AND action = ?", (op, action)).fetchone()[0]

    def claim(self, table: str, row_id: int) -> bool:
        """A write outside any bulk operation is about to change row `row_id` of `table`, or
        has told its caller the row holds what it asked to store: an unfinished operation's
        undo must then leave the row as it is — its insert (or profile change) is forgotten
        here, in the caller's transaction. Returns False, claiming nothing, when a merge
        "move" is to delete the row after its commit point: the moved copy was taken
        already and would not carry the write (the caller refuses it)."""
        if not self.exists():
            return True
        self._hold(table, row_id)
        moving = self.conn.execute(f"SELECT 1 FROM {ROWS} WHERE tbl = ? AND row_id = ? AND action = 'delete' "
                                   "LIMIT 1", (table, row_id)).fetchone()
        if moving:
            return False
        self.conn.execute(f"DELETE FROM {ROWS} WHERE tbl = ? AND row_id = ? AND action IN ('insert', 'profile')",
                          (table, row_id))
        return True

    def _hold(self, table: str, row_id: int) -> None:
        """Keep other writers off the row until this transaction ends: SQLite's write
        transactions are serial already (PostgreSQL locks the row)."""

    def journaled(self, table: str, row_id: int) -> bool:
        """Whether an unfinished bulk operation wrote or is to delete row `row_id` of `table`."""
        return self.exists() and self.conn.execute(
            f"SELECT 1 FROM {ROWS} WHERE tbl = ? AND row_id = ? LIMIT 1", (table, row_id)).fetchone() is not None

    def claim_profile(self, agent_id: str) -> None:
        """`claim` the agent's profile row (update_profile is about to replace it)."""
        if self.exists():
            self.conn.execute(f"DELETE FROM {ROWS} WHERE tbl = 'profiles' AND action IN ('insert', 'profile') "
                              "AND row_id IN (SELECT id FROM profiles WHERE agent_id = ? AND user_id = '')",
                              (agent_id,))

    def undo(self, op: int, limit: int) -> list[tuple[str, int]]:
        """Undo up to `limit` inserts / profile changes of `op` (newest first) and forget
        them; returns the (table, id) of the rows removed."""
        rows = self.conn.execute(
            f"SELECT {self.KEY}, action, tbl, row_id, prior FROM {ROWS} WHERE op = ? "
            f"AND action IN ('insert', 'profile') ORDER BY {self.KEY} DESC LIMIT ?", (op, limit)).fetchall()
        removed: list[tuple[str, int]] = []
        for rowid, action, table, row_id, prior in rows:
            if table not in TABLES:
                raise ValueError(f"journal row {rowid} names an unknown table {table!r}")
            self._hold(table, row_id)  # then re-read: a write that claimed the row meanwhile keeps it
            if self.conn.execute(f"SELECT 1 FROM {ROWS} WHERE {self.KEY} = ?", (rowid,)).fetchone() is None:
                continue
            if action == "profile" and prior is not None:
                old = json.loads(prior)
                self.conn.execute("UPDATE profiles SET content = ?, updated_at = ?, project_id = ? WHERE id = ?",
                                  (old["content"], old["updated_at"], old["project_id"], row_id))
            else:
                self.conn.execute(f"DELETE FROM {table} WHERE id = ?", (row_id,))
                removed.append((table, row_id))
            self.conn.execute(f"DELETE FROM {ROWS} WHERE {self.KEY} = ?", (rowid,))
        return removed

    def redo_deletes(self, op: int, limit: int) -> list[tuple[str, int]]:
        """Delete up to `limit` source rows `op` still has to delete (a move past its
        commit point) and forget them; returns the (table, id) deleted."""
        rows = self.conn.execute(f"SELECT {self.KEY}, tbl, row_id FROM {ROWS} WHERE op = ? AND action = 'delete' "
                                 f"ORDER BY {self.KEY} LIMIT ?", (op, limit)).fetchall()
        for rowid, table, row_id in rows:
            if table not in TABLES:
                raise ValueError(f"journal row {rowid} names an unknown table {table!r}")
            self.conn.execute(f"DELETE FROM {table} WHERE id = ?", (row_id,))
            self.conn.execute(f"DELETE FROM {ROWS} WHERE {self.KEY} = ?", (rowid,))
        return [(table, row_id) for _, table, row_id in rows]

    def forget(self, op: int, limit: int) -> int:
        """Drop up to `limit` journal rows of a finished `op`; the op itself once none is
        left. Returns how many rows were dropped (0 = the op is gone)."""
        cur = self.conn.execute(f"DELETE FROM {ROWS} WHERE {self.KEY} IN (SELECT {self.KEY} FROM {ROWS} "
                                "WHERE op = ? LIMIT ?)", (op, limit))
        if cur.rowcount == 0:
            self.conn.execute(f"DELETE FROM {OPS} WHERE id = ?", (op,))
        return cur.rowcount
