"""The `pending_memory_tasks` table on PostgreSQL: the queue shared by every node.

Same methods as `storage/tasks.py`, plus leases: `claim` takes due tasks with
`FOR UPDATE SKIP LOCKED` (https://www.postgresql.org/docs/15/sql-select.html#SQL-FOR-UPDATE-SHARE)
and marks them `lease_owner = <node>`, `lease_until = now + LEASE_SECONDS`, so two nodes
never take the same task, and a task whose node died mid-work becomes due again when its
lease runs out — none is lost. Completing checks the lease (`is_pending` locks the row and
requires it to be this node's), so a node that outlived its lease writes nothing twice.
"""

from __future__ import annotations

from typing import Any

import psycopg

from cpersona.storage.postgres.rows import one, scalar
from cpersona.storage.tasks import EMBED, EMBEDDED_TABLES, REEMBED, embed_payload

#: Seconds a claimed task belongs to its node: longer than one batch of embeddings can take
#: (32 texts, CPERSONA_EMBEDDING_TIMEOUT_SECS ≤ 600 s per call, plus the probe).
LEASE_SECONDS = 900.0
_RECENT_FAILURES = 5
_NOW = "cpersona_now()"


class PgTaskRepo:
    """Queue operations over one connection; `node` owns the leases it takes."""

    def __init__(self, conn: psycopg.Connection, node: str) -> None:
        self.conn = conn
        self.node = node

    # ------------------------------------------------------------------ write
    def enqueue_embed(self, table: str, row_id: int, agent_id: str, project_id: str) -> None:
        """Queue the embedding of one row; a failed task for the same row starts afresh."""
        self.conn.execute(
            "INSERT INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
            f"VALUES (%s, %s, %s, %s, {_NOW}) "
            "ON CONFLICT (payload) WHERE task_type = 'embed' DO UPDATE SET status = 'pending', retries = 0, "
            f"last_error = NULL, not_before = 0, lease_owner = NULL, lease_until = 0, updated_at = {_NOW}",
            (EMBED, agent_id, project_id, embed_payload(table, row_id)))

    def drop_embed(self, table: str, row_id: int) -> int:
        """Remove the embed task of a row that got its vector or was deleted."""
        return self.conn.execute("DELETE FROM pending_memory_tasks WHERE task_type = %s AND payload = %s",
                                 (EMBED, embed_payload(table, row_id))).rowcount

    def enqueue_missing(self) -> int:
        """Queue an embed task for every row without a vector that has none; returns how many."""
        added = 0
        for table in EMBEDDED_TABLES:
            added += self.conn.execute(
                "INSERT INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
                f"SELECT %s, agent_id, project_id, '{{\"table\":\"' || %s || '\",\"id\":' || id || '}}', {_NOW} "
                f"FROM {table} WHERE embedding IS NULL ORDER BY id "
                "ON CONFLICT (payload) WHERE task_type = 'embed' DO NOTHING", (EMBED, table)).rowcount
        return added

    def enqueue_reembed(self) -> bool:
        """Queue the background re-embedding unless a task for it is already pending; True when
        one was added. Nodes deciding it at once add one: the check runs under a
        transaction-scoped advisory lock (SQLite's write transaction excludes the others)."""
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':reembed'))")
        if self.conn.execute("SELECT 1 FROM pending_memory_tasks WHERE task_type = %s AND status = 'pending'",
                             (REEMBED,)).fetchone():
            return False
        self.conn.execute("INSERT INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
                          f"VALUES (%s, '', '', '{{}}', {_NOW})", (REEMBED,))
        return True

    def claim(self, now: float, with_embeds: bool, limit: int) -> list[tuple[int, str, str, str, int]]:
        """Take up to `limit` due tasks no other node holds (FIFO) for LEASE_SECONDS (this
        node's own leases are taken again); returns (id, task_type, agent_id, payload,
        retries) like `due`."""
        rows = self.conn.execute(
            "UPDATE pending_memory_tasks t SET lease_owner = %s, lease_until = %s FROM ("
            "SELECT id FROM pending_memory_tasks WHERE status = 'pending' AND not_before <= %s "
            "AND (lease_until <= %s OR lease_owner = %s) AND (%s OR task_type NOT IN (%s, %s)) ORDER BY id LIMIT %s "
            "FOR UPDATE SKIP LOCKED) c WHERE t.id = c.id RETURNING t.id, t.task_type, t.agent_id, t.payload, t.retries",
            (self.node, now + LEASE_SECONDS, now, now, self.node, with_embeds, EMBED, REEMBED, limit)).fetchall()
        return sorted(rows)

    def release(self, task_ids: list[int]) -> None:
        """Give back this node's leases on tasks it could not run now (its embedding backend
        is unavailable): another node may take them at once."""
        self.conn.execute("UPDATE pending_memory_tasks SET lease_owner = NULL, lease_until = 0 "
                          "WHERE id = ANY(%s) AND lease_owner = %s", (list(task_ids), self.node))

    def delete(self, task_id: int) -> None:
        self.conn.execute("DELETE FROM pending_memory_tasks WHERE id = %s", (task_id,))

    def retry_later(self, task_id: int, error: str, not_before: float, max_retries: int) -> None:
        """Count one failed attempt (and release the lease); `failed` at `max_retries`."""
        self.conn.execute(
            f"UPDATE pending_memory_tasks SET retries = retries + 1, last_error = %s, updated_at = {_NOW}, "
            "not_before = %s, lease_owner = NULL, lease_until = 0, "
            "status = CASE WHEN retries + 1 >= %s THEN 'failed' ELSE 'pending' END "
            "WHERE id = %s AND status = 'pending'",
            (error, not_before, max_retries, task_id))

    def fail(self, task_id: int, error: str) -> None:
        """Mark a pending task failed with its reason (kept for inspection)."""
        self.conn.execute(
            f"UPDATE pending_memory_tasks SET status = 'failed', last_error = %s, updated_at = {_NOW}, "
            "lease_owner = NULL, lease_until = 0 WHERE id = %s AND status = 'pending'", (error, task_id))

    # ------------------------------------------------------------------- read
    def due(self, now: float, with_embeds: bool, limit: int) -> list[tuple[int, str, str, str, int]]:
        """(id, task_type, agent_id, payload, retries) of pending tasks due at `now` that no
        other node holds, FIFO; embed and reembed tasks only when `with_embeds`."""
        return self.conn.execute(
            "SELECT id, task_type, agent_id, payload, retries FROM pending_memory_tasks "
            "WHERE status = 'pending' AND not_before <= %s AND (lease_until <= %s OR lease_owner = %s) "
            "AND (%s OR task_type NOT IN (%s, %s)) ORDER BY id LIMIT %s",
            (now, now, self.node, with_embeds, EMBED, REEMBED, limit)).fetchall()

    def next_due(self, with_embeds: bool) -> float | None:
        """Earliest time a pending task becomes due (its retry time or its lease's end)."""
        return scalar(self.conn, "SELECT MIN(GREATEST(not_before, lease_until)) FROM pending_memory_tasks "
                      "WHERE status = 'pending' AND (%s OR task_type NOT IN (%s, %s))", (with_embeds, EMBED, REEMBED))

    def is_pending(self, task_id: int) -> bool:
        """True when the task is still pending and not held by another node; inside a write
        transaction the row stays locked until COMMIT, so no node claims it meanwhile."""
        row = self.conn.execute(
            "SELECT 1 FROM pending_memory_tasks WHERE id = %s AND status = 'pending' "
            "AND (lease_owner IS NULL OR lease_owner = %s) FOR UPDATE", (task_id, self.node)).fetchone()
        return row is not None

    def count_pending(self) -> int:
        return scalar(self.conn, "SELECT COUNT(*) FROM pending_memory_tasks WHERE status = 'pending'")

    def summary(self) -> dict[str, Any]:
        """{pending, retries, retrying, oldest (created_at), failed, recent_failures: [...]}."""
        pending, retries, retrying, oldest = one(
            self.conn,
            "SELECT COUNT(*), COALESCE(SUM(retries), 0), COUNT(*) FILTER (WHERE retries > 0), MIN(created_at) "
            "FROM pending_memory_tasks WHERE status = 'pending'")
        failed = scalar(self.conn, "SELECT COUNT(*) FROM pending_memory_tasks WHERE status = 'failed'")
        recent = self.conn.execute(
            "SELECT id, task_type, agent_id, retries, last_error, updated_at FROM pending_memory_tasks "
            "WHERE status = 'failed' ORDER BY id DESC LIMIT %s", (_RECENT_FAILURES,)).fetchall()
        keys = ("id", "task_type", "agent_id", "retries", "error", "updated_at")
        return {"pending": pending, "retries": int(retries), "retrying": retrying, "oldest": oldest, "failed": failed,
                "recent_failures": [dict(zip(keys, r)) for r in recent]}
