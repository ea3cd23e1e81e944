"""Queries across tables by agent: the agent list, per-agent statistics, erasing an agent."""

from __future__ import annotations

import sqlite3

#: (count key, table) erased by `delete_agent`, in the order reported.
ERASED = (
    ("deleted_memories", "memories"),
    ("deleted_profiles", "profiles"),
    ("deleted_episodes", "episodes"),
    ("deleted_pending_tasks", "pending_memory_tasks"),
)
#: Erased by `delete_agent` too, not counted in its answer: the agent's declared graph (an
#: entity takes its aliases and mentions with it by trigger, a record its mentions and relations).
ALSO_ERASED = ("entities", "relations")
#: Agent ids owning a memory or an episode (portable SQL: the PostgreSQL backend runs it too).
IDS_QUERY = "SELECT agent_id FROM memories UNION SELECT agent_id FROM episodes ORDER BY 1"
#: One row per agent with STATS_COLUMNS (portable SQL: the PostgreSQL backend runs it too).
STATS_QUERY = """SELECT a.agent_id,
                 (SELECT COUNT(*) FROM memories m WHERE m.agent_id = a.agent_id),
                 (SELECT COUNT(*) FROM memories m WHERE m.agent_id = a.agent_id AND m.locked = 1),
                 (SELECT COUNT(*) FROM memories m WHERE m.agent_id = a.agent_id AND m.embedding IS NULL),
                 (SELECT COUNT(*) FROM episodes e WHERE e.agent_id = a.agent_id),
                 (SELECT COUNT(*) FROM profiles p WHERE p.agent_id = a.agent_id),
                 (SELECT MAX(created_at) FROM memories m WHERE m.agent_id = a.agent_id)
               FROM (SELECT agent_id FROM memories UNION SELECT agent_id FROM episodes
                     UNION SELECT agent_id FROM profiles) a ORDER BY a.agent_id"""
STATS_COLUMNS = ("agent_id", "memories", "locked", "without_vector", "episodes", "profiles", "last_memory")


class AgentRepo:
    """Per-agent queries over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def ids(self) -> list[str]:
        """Every agent id that owns a memory or an episode, sorted."""
        rows = self.conn.execute(IDS_QUERY)
        return [r[0] for r in rows]

    def stats(self) -> list[dict]:
        """One dict per agent (STATS_COLUMNS): counts of memories, locked, without vector,
        episodes, profiles, and the newest memory's created_at."""
        rows = self.conn.execute(STATS_QUERY).fetchall()
        return [dict(zip(STATS_COLUMNS, r)) for r in rows]

    def delete_agent_chunk(self, agent_id: str, limit: int) -> tuple[dict[str, int], bool]:
        """Delete up to `limit` memories (locked ones too, by design), profiles, episodes,
        queued tasks, entities and relations of `agent_id` (write transaction). Returns the
        count per table of ERASED and whether the agent has no row left (every table had
        fewer than `limit`)."""
        counts = {key: self._delete(table, agent_id, limit) for key, table in ERASED}
        graph = [self._delete(table, agent_id, limit) for table in ALSO_ERASED]
        return counts, all(n < limit for n in [*counts.values(), *graph])

    def _delete(self, table: str, agent_id: str, limit: int) -> int:
        return self.conn.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE agent_id = ? "
                                 "LIMIT ?)", (agent_id, limit)).rowcount
