"""The `profiles` table: one caller-computed profile text per agent (user_id '')."""

from __future__ import annotations

import sqlite3

from cpersona.util.time import utc_now_iso


class ProfileRepo:
    """Queries on `profiles` over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, agent_id: str) -> str:
        """The agent's profile text ('' when none)."""
        row = self.conn.execute(
            "SELECT CAST(content AS TEXT) FROM profiles WHERE agent_id = ? AND user_id = ''", (agent_id,)
        ).fetchone()
        return row[0] if row else ""

    def upsert(self, agent_id: str, text: str) -> None:
        """Replace the agent profile (write transaction)."""
        self.conn.execute(
            "INSERT INTO profiles(agent_id, project_id, user_id, content, updated_at) VALUES (?, '', '', ?, ?) "
            "ON CONFLICT(agent_id, user_id) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
            (agent_id, text, utc_now_iso()),
        )

    def newest(self, agent_id: str, limit: int) -> list[str]:
        """Texts of the agent's profiles, newest first."""
        rows = self.conn.execute(
            "SELECT CAST(content AS TEXT) FROM profiles WHERE agent_id = ? AND user_id = '' ORDER BY updated_at DESC "
            "LIMIT ?",
            (agent_id, limit),
        ).fetchall()
        return [r[0] for r in rows]
