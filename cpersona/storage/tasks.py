"""The `pending_memory_tasks` table: the durable background work queue.

Columns beyond schema v13 (`status`, `last_error`, `updated_at`, `not_before`) keep a task
that cannot run, with its reason, instead of dropping it. An embed task's payload is
`{"table": "memories"|"episodes", "id": N}` in the canonical form of `embed_payload`
(equal to SQLite's json_object output), so the partial unique index sees one task per row.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

EMBED = "embed"
#: One task per database while a model change is being re-embedded (payload "{}").
REEMBED = "reembed"
#: Tables whose rows get embed tasks.
EMBEDDED_TABLES = ("memories", "episodes")
_RECENT_FAILURES = 5


def embed_payload(table: str, row_id: int) -> str:
    """Canonical payload text of an embed task."""
    return json.dumps({"table": table, "id": row_id}, separators=(",", ":"))


class TaskRepo:
    """Queue operations over one connection (writes inside the caller's transaction)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # ------------------------------------------------------------------ write
    def enqueue_embed(self, table: str, row_id: int, agent_id: str, project_id: str) -> None:
        """Queue the embedding of one row; a failed task for the same row starts afresh."""
        self.conn.execute(
            "INSERT INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
            "VALUES (?, ?, ?, ?, datetime('now')) "
            "ON CONFLICT(payload) WHERE task_type = 'embed' DO UPDATE SET status = 'pending', retries = 0, "
            "last_error = NULL, not_before = 0, updated_at = datetime('now')",
            (EMBED, agent_id, project_id, embed_payload(table, row_id)),
        )

    def drop_embed(self, table: str, row_id: int) -> int:
        """Remove the embed task of a row that got its vector or was deleted."""
        return self.conn.execute(
            "DELETE FROM pending_memory_tasks WHERE task_type = ? AND payload = ?",
            (EMBED, embed_payload(table, row_id)),
        ).rowcount

    def enqueue_missing(self) -> int:
        """Queue an embed task for every row without a vector that has none; returns how many."""
        added = 0
        for table in EMBEDDED_TABLES:
            added += self.conn.execute(
                "INSERT OR IGNORE INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
                f"SELECT ?, agent_id, project_id, json_object('table', ?, 'id', id), datetime('now') FROM {table} "
                "WHERE embedding IS NULL ORDER BY id",
                (EMBED, table),
            ).rowcount
        return added

    def enqueue_reembed(self) -> bool:
        """Queue the background re-embedding unless a task for it is already pending;
        True when one was added."""
        if self.conn.execute("SELECT 1 FROM pending_memory_tasks WHERE task_type = ? AND status = 'pending'",
                             (REEMBED,)).fetchone():
            return False
        self.conn.execute("INSERT INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
                          "VALUES (?, '', '', '{}', datetime('now'))", (REEMBED,))
        return True

    def delete(self, task_id: int) -> None:
        self.conn.execute("DELETE FROM pending_memory_tasks WHERE id = ?", (task_id,))

    def retry_later(self, task_id: int, error: str, not_before: float, max_retries: int) -> None:
        """Count one failed attempt; the task becomes `failed` at `max_retries` attempts."""
        self.conn.execute(
            "UPDATE pending_memory_tasks SET retries = retries + 1, last_error = ?, updated_at = datetime('now'), "
            "not_before = ?, status = CASE WHEN retries + 1 >= ? THEN 'failed' ELSE 'pending' END "
            "WHERE id = ? AND status = 'pending'",
            (error, not_before, max_retries, task_id),
        )

    def fail(self, task_id: int, error: str) -> None:
        """Mark a pending task failed with its reason (kept for inspection)."""
        self.conn.execute(
            "UPDATE pending_memory_tasks SET status = 'failed', last_error = ?, updated_at = datetime('now') "
            "WHERE id = ? AND status = 'pending'",
            (error, task_id),
        )

    # ------------------------------------------------------------------- read
    def due(self, now: float, with_embeds: bool, limit: int) -> list[tuple[int, str, str, str, int]]:
        """(id, task_type, agent_id, payload, retries) of pending tasks due at `now`, FIFO;
        embed and reembed tasks only when `with_embeds` (an embedding backend exists)."""
        return self.conn.execute(
            "SELECT id, task_type, agent_id, payload, retries FROM pending_memory_tasks "
            "WHERE status = 'pending' AND not_before <= ? AND (? OR task_type NOT IN (?, ?)) ORDER BY id LIMIT ?",
            (now, with_embeds, EMBED, REEMBED, limit),
        ).fetchall()

    def claim(self, now: float, with_embeds: bool, limit: int) -> list[tuple[int, str, str, str, int]]:
        """The tasks this worker runs now: on SQLite simply the due ones (`due`) — one
        process's worker serves the file, and a vector write is guarded by the row's text."""
        return self.due(now, with_embeds, limit)

    def release(self, task_ids: list[int]) -> None:
        """Give claimed tasks back: nothing to do on SQLite, where `claim` holds no lease."""

    def next_due(self, with_embeds: bool) -> float | None:
        """Earliest `not_before` of the pending tasks (None when there is none)."""
        return self.conn.execute(
            "SELECT MIN(not_before) FROM pending_memory_tasks WHERE status = 'pending' "
            "AND (? OR task_type NOT IN (?, ?))", (with_embeds, EMBED, REEMBED),
        ).fetchone()[0]

    def is_pending(self, task_id: int) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM pending_memory_tasks WHERE id = ? AND status = 'pending'", (task_id,)
        ).fetchone()
        return row is not None

    def count_pending(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM pending_memory_tasks WHERE status = 'pending'").fetchone()[0]

    def summary(self) -> dict[str, Any]:
        """{pending, retries, retrying, oldest (created_at), failed, recent_failures: [...]}."""
        pending, retries, retrying, oldest = self.conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(retries), 0), COALESCE(SUM(retries > 0), 0), MIN(created_at) "
            "FROM pending_memory_tasks WHERE status = 'pending'"
        ).fetchone()
        failed = self.conn.execute("SELECT COUNT(*) FROM pending_memory_tasks WHERE status = 'failed'").fetchone()[0]
        recent = self.conn.execute(
            "SELECT id, task_type, agent_id, retries, last_error, updated_at FROM pending_memory_tasks "
            "WHERE status = 'failed' ORDER BY id DESC LIMIT ?", (_RECENT_FAILURES,)
        ).fetchall()
        keys = ("id", "task_type", "agent_id", "retries", "error", "updated_at")
        return {"pending": pending, "retries": retries, "retrying": retrying, "oldest": oldest, "failed": failed,
                "recent_failures": [dict(zip(keys, r)) for r in recent]}
