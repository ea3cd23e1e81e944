"""The `profiles` table on PostgreSQL (the methods of `storage/profiles.py`)."""

from __future__ import annotations

import psycopg

from cpersona.util.time import utc_now_iso


class PgProfileRepo:
    """Queries on `profiles` over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def get(self, agent_id: str) -> str:
        """The agent's profile text ('' when none)."""
        row = self.conn.execute("SELECT content FROM profiles WHERE agent_id = %s AND user_id = ''",
                                (agent_id,)).fetchone()
        return row[0] if row else ""

    def upsert(self, agent_id: str, text: str) -> None:
        """Replace the agent profile (write transaction)."""
        self.conn.execute(
            "INSERT INTO profiles(agent_id, project_id, user_id, content, updated_at) VALUES (%s, '', '', %s, %s) "
            "ON CONFLICT (agent_id, user_id) DO UPDATE SET content = excluded.content, "
            "updated_at = excluded.updated_at",
            (agent_id, text, utc_now_iso()))

    def newest(self, agent_id: str, limit: int) -> list[str]:
        """Texts of the agent's profiles, newest first."""
        rows = self.conn.execute(
            "SELECT content FROM profiles WHERE agent_id = %s AND user_id = '' ORDER BY updated_at DESC LIMIT %s",
            (agent_id, limit)).fetchall()
        return [r[0] for r in rows]
