"""Writing whole rows — every field carried over, not only what `store` sets — for import and
merge, with the exact-bucket duplicate probes they use, and the channel-axis repair.

Dedup is exact (same agent, project, channel / message id), unlike `store`'s probes which
also look into the global pool: an export holds a global row and a project row with the
same text as two rows, and an import must bring back both. The unique indexes are the
backstop (`INSERT OR IGNORE`: a row they refuse is reported as skipped).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from cpersona.storage import word_index
from cpersona.storage.records import RowRef
from cpersona.util.time import utc_now_iso

_MEMORY = ("agent_id", "project_id", "msg_id", "content", "source", "timestamp", "metadata", "channel", "locked",
           "recall_count", "last_recalled_at")
_EPISODE = ("agent_id", "project_id", "summary", "keywords", "start_time", "end_time", "resolved", "channel")
#: A bridge-type channel the original CPersona stored before channels were concrete.
BRIDGE_CHANNEL = "discord"
_SESSION = "CASE WHEN json_valid(metadata) THEN json_extract(metadata, '$.session_id') END"
_RECOVERABLE = f"channel = 'discord' AND COALESCE({_SESSION} GLOB '[0-9]*:*', 0)"


class BulkRepo:
    """Whole-row writes and exact probes over one connection."""

    def __init__(self, conn: sqlite3.Connection, word_index: bool = False) -> None:
        self.conn = conn
        self.word_index = word_index  # keep `memories_words` in step (storage.word_index)

    # ---------------------------------------------------------------- probes
    def msg_id_taken(self, agent: str, project: str, msg_id: str) -> bool:
        return self.memory_with_msg_id(agent, project, msg_id) is not None

    def content_taken(self, agent: str, project: str, channel: str, content: str) -> bool:
        return self.memory_with_content(agent, project, channel, content) is not None

    def episode_taken(self, agent: str, project: str, channel: str, summary: str) -> bool:
        return self.episode_with_summary(agent, project, channel, summary) is not None

    def memory_with_msg_id(self, agent: str, project: str, msg_id: str) -> int | None:
        # `msg_id != ''` lets SQLite use the partial unique index (agent, project, msg_id)
        return self._id("SELECT id FROM memories WHERE agent_id = ? AND project_id = ? AND msg_id = ? "
                        "AND msg_id != ''", (agent, project, msg_id))

    def memory_with_content(self, agent: str, project: str, channel: str, content: str) -> int | None:
        return self._id("SELECT id FROM memories WHERE agent_id = ? AND project_id = ? AND channel = ? AND content = ?",
                        (agent, project, channel, content))

    def episode_with_summary(self, agent: str, project: str, channel: str, summary: str) -> int | None:
        return self._id("SELECT id FROM episodes WHERE agent_id = ? AND project_id = ? AND channel = ? AND summary = ? "
                        "ORDER BY id LIMIT 1", (agent, project, channel, summary))

    def _id(self, sql: str, params: tuple) -> int | None:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else int(row[0])

    def profile(self, agent: str, user_id: str) -> dict[str, Any] | None:
        """{id, content, updated_at, project_id} of the (agent, user_id) profile, or None."""
        row = self.conn.execute("SELECT id, content, updated_at, project_id FROM profiles WHERE agent_id = ? "
                                "AND user_id = ?", (agent, user_id)).fetchone()
        return None if row is None else dict(zip(("id", "content", "updated_at", "project_id"), row))

    # ---------------------------------------------------------------- writes
    def insert_memory(self, row: Mapping[str, Any], blob: bytes | None) -> RowRef | None:
        """INSERT OR IGNORE a memory with all its fields (created_at kept, now when absent);
        None when a unique index refused it."""
        created = row.get("created_at") or _sqlite_now()
        cur = self.conn.execute(
            f"INSERT OR IGNORE INTO memories ({', '.join(_MEMORY)}, embedding, created_at) "
            f"VALUES ({', '.join('?' * (len(_MEMORY) + 2))})",
            [row[k] for k in _MEMORY] + [blob, created])
        if cur.rowcount == 0 or cur.lastrowid is None:
            return None
        if self.word_index:
            word_index.put(self.conn, cur.lastrowid, row["content"])
        return RowRef(cur.lastrowid, row["agent_id"], row["project_id"], row["channel"], created)

    def insert_episode(self, row: Mapping[str, Any], blob: bytes | None) -> RowRef:
        """INSERT an episode with all its fields (created_at kept, now when absent)."""
        created = row.get("created_at") or _sqlite_now()
        cur = self.conn.execute(
            f"INSERT INTO episodes ({', '.join(_EPISODE)}, embedding, created_at) "
            f"VALUES ({', '.join('?' * (len(_EPISODE) + 2))})",
            [row[k] for k in _EPISODE] + [blob, created])
        return RowRef(int(cur.lastrowid or 0), row["agent_id"], row["project_id"], row["channel"], created)

    def put_profile(self, agent: str, user_id: str, content: str, updated_at: str | None, project_id: str) -> int:
        """Insert or overwrite the (agent, user_id) profile; returns its row id."""
        self.conn.execute(
            "INSERT INTO profiles(agent_id, user_id, content, updated_at, project_id) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(agent_id, user_id) DO UPDATE SET content = excluded.content, "
            "updated_at = excluded.updated_at, project_id = excluded.project_id",
            (agent, user_id, content, updated_at or utc_now_iso(), project_id))
        return self.conn.execute("SELECT id FROM profiles WHERE agent_id = ? AND user_id = ?",
                                 (agent, user_id)).fetchone()[0]

    def delete_pending_tasks(self, agent: str) -> int:
        return self.conn.execute("DELETE FROM pending_memory_tasks WHERE agent_id = ?", (agent,)).rowcount

    def left(self, agent: str) -> dict[str, int]:
        """{memories, episodes, profiles} the agent still owns."""
        return {t: self.conn.execute(f"SELECT COUNT(*) FROM {t} WHERE agent_id = ?", (agent,)).fetchone()[0]
                for t in ("memories", "episodes", "profiles")}

    # ------------------------------------------------------ channel-axis repair
    def bridge_channel_rows(self, agent: str | None) -> tuple[list[tuple[int, str, str]], list[tuple[int, bool]]]:
        """Memories filed under the bridge channel 'discord': (recoverable [(id, channel,
        session_id)], unrecoverable [(id, metadata is valid JSON)])."""
        where, params = ("", []) if agent is None else (" AND agent_id = ?", [agent])
        recoverable = self.conn.execute(
            f"SELECT id, substr({_SESSION}, 1, instr({_SESSION}, ':') - 1), {_SESSION} "
            f"FROM memories WHERE {_RECOVERABLE}{where} ORDER BY id", params).fetchall()
        rest = self.conn.execute(
            f"SELECT id, json_valid(metadata) FROM memories WHERE channel = ? AND NOT ({_RECOVERABLE}){where} "
            "ORDER BY id", [BRIDGE_CHANNEL, *params]).fetchall()
        return recoverable, [(r[0], bool(r[1])) for r in rest]

    def set_channel(self, memory_id: int, channel: str) -> bool:
        """UPDATE OR IGNORE one memory's channel (a collision with the content unique index
        is skipped); True when changed."""
        return self.conn.execute("UPDATE OR IGNORE memories SET channel = ? WHERE id = ?",
                                 (channel, memory_id)).rowcount > 0


def _sqlite_now() -> str:
    """SQLite `datetime('now')` text (naive UTC), the form of created_at."""
    return utc_now_iso()[:19].replace("T", " ")
