"""Counts and row lists for the health checks beyond the text defects: stored vectors of
the wrong length or missing, queue rows that are stale or failed, the statistics of a
report, and the per-agent reads of the deep check (the SQL behind `cpersona/health/`).
`agent` '' means every agent."""

from __future__ import annotations

import sqlite3

from cpersona.storage.repairs import USER_SENTINEL, agent_filter
from cpersona.storage.tasks import EMBEDDED_TABLES
from cpersona.storage.text_columns import text
from cpersona.storage.vectors import TEXT_COLUMN


class InventoryRepo:
    """Vector, queue, statistics and deep-check queries over one connection."""

    #: The current time as the text form of `created_at` / `updated_at` (naive UTC).
    NOW = "datetime('now')"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _agent(self, agent: str, alias: str = "") -> tuple[str, list[str]]:
        return agent_filter(agent, alias)

    # --------------------------------------------------------------- vectors
    def bad_vectors(self, table: str, expected_bytes: int | None, stale: tuple[int, int],
                    agent: str) -> list[tuple[int, int]]:
        """(id, byte length) of stored vectors that cannot belong to the active model:
        length ≠ `expected_bytes`, or — when no length is known — empty or not a multiple
        of 4 (float32). Rows in the stale range (lo, hi] awaiting re-embedding are left out."""
        where, params = self._agent(agent)
        if expected_bytes is None:
            bad, bad_params = "(length(embedding) = 0 OR length(embedding) % 4 != 0)", []
        else:
            bad, bad_params = "length(embedding) != ?", [expected_bytes]
        sql = (f"SELECT id, length(embedding) FROM {table} WHERE embedding IS NOT NULL AND {bad} "
               f"AND NOT (id > ? AND id <= ?) AND {where} ORDER BY id")
        return self.conn.execute(sql, [*bad_params, stale[0], stale[1], *params]).fetchall()

    def drop_vectors(self, table: str, ids: list[int]) -> int:
        """Set the vector of the listed rows to NULL (locked memories included: a vector
        is derived data, and a wrong one is never used)."""
        done = 0
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            sql = f"UPDATE {table} SET embedding = NULL WHERE id IN ({','.join('?' * len(chunk))})"
            done += self.conn.execute(sql, chunk).rowcount
        return done

    def vector_counts(self, table: str, agent: str) -> tuple[int, int, int]:
        """(rows, rows without a vector, of those locked) of `table` (episodes have no lock)."""
        where, params = self._agent(agent)
        locked = "locked" if table == "memories" else "0"
        sql = (f"SELECT COUNT(*), COALESCE(SUM(embedding IS NULL), 0), "
               f"COALESCE(SUM(embedding IS NULL AND {locked}), 0) FROM {table} WHERE {where}")
        return self.conn.execute(sql, params).fetchone()

    def rows_without_vector(self, table: str, agent: str, limit: int,
                            skip_queued: bool = False) -> list[tuple[int, str]]:
        """(id, text) of unlocked rows without a vector, oldest id first; with `skip_queued`,
        not those with a pending embed task (the task queue embeds them)."""
        where, params = self._agent(agent)
        unlocked = " AND locked = 0" if table == "memories" else ""
        queued = f" AND NOT {self._queued(table)}" if skip_queued else ""
        sql = (f"SELECT id, {text(TEXT_COLUMN[table])} FROM {table} WHERE embedding IS NULL{unlocked}{queued} "
               f"AND {where} ORDER BY id LIMIT ?")
        return self.conn.execute(sql, [*params, limit]).fetchall()

    def queued_without_vector(self, table: str, agent: str) -> tuple[int, int]:
        """(rows of `table` without a vector that have a pending embed task, of those locked)."""
        where, params = self._agent(agent)
        locked = "locked" if table == "memories" else "0"
        sql = (f"SELECT COUNT(*), COALESCE(SUM(CASE WHEN {locked} = 1 THEN 1 ELSE 0 END), 0) FROM {table} "
               f"WHERE embedding IS NULL AND {self._queued(table)} AND {where}")
        row = self.conn.execute(sql, params).fetchone()
        return int(row[0]), int(row[1])

    def _queued(self, table: str) -> str:
        """SQL: the row of `table` (unaliased) has a pending embed task — its payload in the
        canonical form of `tasks.embed_payload`, looked up by the payload's unique index."""
        if table not in EMBEDDED_TABLES:
            raise ValueError(f"no embed tasks for table {table!r}")
        pending = " AND p.status = 'pending'" if self._queue_status_known() else ""
        return (f"EXISTS (SELECT 1 FROM pending_memory_tasks p WHERE p.task_type = 'embed' AND "
                f"""p.payload = '{{"table":"{table}","id":' || {table}.id || '}}'{pending})""")

    # ----------------------------------------------------------------- queue
    def _queue_status_known(self) -> bool:
        return any(r[1] == "status" for r in self.conn.execute("PRAGMA table_info(pending_memory_tasks)"))

    def old_tasks(self, agent: str, seconds: int) -> list[tuple[int, str, str]]:
        """(id, task_type, payload) of pending (not failed) queue rows queued more than
        `seconds` ago."""
        where, params = self._agent(agent)
        pending = " AND status = 'pending'" if self._queue_status_known() else ""
        sql = (f"SELECT id, task_type, payload FROM pending_memory_tasks WHERE created_at <= datetime('now', ?)"
               f"{pending} AND {where} ORDER BY id")
        return self.conn.execute(sql, [f"-{int(seconds)} seconds", *params]).fetchall()

    def failed_tasks(self, agent: str) -> list[tuple[int, str, str, str | None]] | None:
        """(id, task_type, payload, last_error) of failed queue rows; None when the file
        predates the failure columns (written by another release, not migrated)."""
        if not self._queue_status_known():
            return None
        where, params = self._agent(agent)
        sql = (f"SELECT id, task_type, payload, last_error FROM pending_memory_tasks WHERE status = 'failed' "
               f"AND {where} ORDER BY id")
        return self.conn.execute(sql, params).fetchall()

    def delete_task(self, task_id: int) -> bool:
        return self.conn.execute("DELETE FROM pending_memory_tasks WHERE id = ?", (task_id,)).rowcount > 0

    def requeue_task(self, task_id: int) -> bool:
        """Give a failed task a fresh start (retries 0, due now)."""
        return self.conn.execute(
            "UPDATE pending_memory_tasks SET status = 'pending', retries = 0, last_error = NULL, not_before = 0, "
            f"updated_at = {self.NOW} WHERE id = ? AND status = 'failed'", (task_id,)).rowcount > 0

    # ------------------------------------------------------------ statistics
    def counts(self) -> dict[str, int]:
        """Rows of memories, episodes, profiles and queue tasks."""
        tables = (("memories", "memories"), ("episodes", "episodes"), ("profiles", "profiles"),
                  ("pending_tasks", "pending_memory_tasks"))
        return {key: self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for key, table in tables}

    def agent_counts(self, agent: str) -> dict[str, int]:
        """The agent's memories and episodes."""
        return {f"agent_{t}": self.conn.execute(f"SELECT COUNT(*) FROM {t} WHERE agent_id = ?", (agent,)).fetchone()[0]
                for t in ("memories", "episodes")}

    def axis(self, column: str, agent: str, top: int) -> dict[str, int]:
        """{value: memories} of `project_id` / `channel`, largest first, at most `top`."""
        if column not in ("project_id", "channel"):
            raise ValueError(column)
        where, params = self._agent(agent)
        sql = f"SELECT {column}, COUNT(*) FROM memories WHERE {where} GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?"
        return {value: n for value, n in self.conn.execute(sql, [*params, top])}

    def memory_agents(self) -> list[str]:
        """Distinct agent ids owning memories."""
        return [r[0] for r in self.conn.execute("SELECT DISTINCT agent_id FROM memories ORDER BY 1")]

    # ------------------------------------------------------------ deep check
    def user_sentinel_rows(self, agent: str) -> list[tuple[int, str, str, int]]:
        """(id, content, source, locked) of the agent's memories whose source is the
        anonymous User sentinel {type: User, id: "", name: ""}."""
        sql = (f"SELECT id, content, source, locked FROM memories WHERE agent_id = ? AND CASE WHEN json_valid(source) "
               f"THEN {USER_SENTINEL} ELSE 0 END ORDER BY id")
        return self.conn.execute(sql, (agent,)).fetchall()

    def short_rows(self, agent: str, max_chars: int) -> list[tuple[int, str, int]]:
        """(id, content, locked) of the agent's memories whose trimmed content has at most
        `max_chars` characters."""
        sql = "SELECT id, content, locked FROM memories WHERE agent_id = ? AND length(trim(content)) <= ? ORDER BY id"
        return self.conn.execute(sql, (agent, max_chars)).fetchall()

    def profile_updated(self, agent: str) -> str | None:
        """updated_at of the agent's newest profile row, or None."""
        return self.conn.execute("SELECT MAX(updated_at) FROM profiles WHERE agent_id = ?", (agent,)).fetchone()[0]

    def memory_days(self, agent: str) -> list[float]:
        """Julian days of the agent's parseable memory timestamps, ascending."""
        sql = ("SELECT julianday(timestamp) AS d FROM memories WHERE agent_id = ? AND d IS NOT NULL ORDER BY d")
        return [r[0] for r in self.conn.execute(sql, (agent,))]

    def episode_spans(self, agent: str) -> list[tuple[int, str, str, str, float, float, float | None]]:
        """(id, summary, start_time, end_time, start day, end day, archived day) of the
        agent's episodes with a parseable start and end (julian days; archived = created_at)."""
        sql = ("SELECT id, summary, start_time, end_time, julianday(start_time), julianday(end_time), "
               "julianday(created_at) FROM episodes "
               "WHERE agent_id = ? AND julianday(start_time) IS NOT NULL AND julianday(end_time) IS NOT NULL "
               "ORDER BY id")
        return self.conn.execute(sql, (agent,)).fetchall()

    def newest_vectors(self, agent: str, limit: int) -> list[tuple[int, str, bytes]]:
        """(id, content, vector bytes) of the agent's newest memories with a vector."""
        sql = ("SELECT id, content, embedding FROM memories WHERE agent_id = ? AND embedding IS NOT NULL "
               "ORDER BY created_at DESC, id DESC LIMIT ?")
        return self.conn.execute(sql, (agent, limit)).fetchall()

    def embedded_memories(self, agent: str) -> int:
        """The agent's ('' = all) memories with a vector."""
        where, params = self._agent(agent)
        return self.conn.execute(f"SELECT COUNT(*) FROM memories WHERE embedding IS NOT NULL AND {where}",
                                 params).fetchone()[0]
