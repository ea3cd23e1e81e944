"""Whole-row writes for import and merge on PostgreSQL: `storage/bulk.py`'s probes and
profile writes (portable statements), with the inserts and the channel-axis repair
written for PostgreSQL (`ON CONFLICT DO NOTHING … RETURNING` instead of `INSERT OR IGNORE`
and `lastrowid`; jsonb instead of SQLite's JSON functions). Every inserted memory gets its
word-index row in the same transaction (postgres/word_index.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from cpersona.storage.bulk import _EPISODE, _MEMORY, BRIDGE_CHANNEL, BulkRepo, _sqlite_now
from cpersona.storage.postgres import word_index
from cpersona.storage.postgres.dialect import qmark
from cpersona.storage.records import RowRef

#: The `session_id` of a memory's metadata (NULL when the metadata is not a JSON object).
_SESSION = "cpersona_json_field(metadata, 'session_id')"
_RECOVERABLE = f"channel = 'discord' AND COALESCE({_SESSION} ~ '^[0-9].*:', false)"


class PgBulkRepo(BulkRepo):
    """Whole-row writes and exact probes over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))
        self.pg = conn

    def insert_memory(self, row: Mapping[str, Any], blob: bytes | None) -> RowRef | None:
        """Insert a memory with all its fields (created_at kept, now when absent); None when
        a unique index refused it."""
        created = row.get("created_at") or _sqlite_now()
        got = self.pg.execute(
            f"INSERT INTO memories ({', '.join(_MEMORY)}, embedding, created_at) "
            f"VALUES ({', '.join(['%s'] * (len(_MEMORY) + 2))}) ON CONFLICT DO NOTHING RETURNING id",
            [row[k] for k in _MEMORY] + [blob, created]).fetchone()
        if got is None:
            return None
        word_index.put(self.pg, got[0], row["content"])
        return RowRef(got[0], row["agent_id"], row["project_id"], row["channel"], created)

    def insert_episode(self, row: Mapping[str, Any], blob: bytes | None) -> RowRef:
        """Insert an episode with all its fields (created_at kept, now when absent)."""
        created = row.get("created_at") or _sqlite_now()
        got = self.pg.execute(
            f"INSERT INTO episodes ({', '.join(_EPISODE)}, embedding, created_at) "
            f"VALUES ({', '.join(['%s'] * (len(_EPISODE) + 2))}) RETURNING id",
            [row[k] for k in _EPISODE] + [blob, created]).fetchone()
        return RowRef(int(got[0]) if got else 0, row["agent_id"], row["project_id"], row["channel"], created)

    def bridge_channel_rows(self, agent: str | None) -> tuple[list[tuple[int, str, str]], list[tuple[int, bool]]]:
        """Memories filed under the bridge channel 'discord': (recoverable [(id, channel,
        session_id)], unrecoverable [(id, metadata is valid JSON)])."""
        where, params = ("", []) if agent is None else (" AND agent_id = %s", [agent])
        recoverable = self.pg.execute(
            f"SELECT id, split_part({_SESSION}, ':', 1), {_SESSION} FROM memories WHERE {_RECOVERABLE}{where} "
            "ORDER BY id", params).fetchall()
        rest = self.pg.execute(
            f"SELECT id, cpersona_json_valid(metadata) FROM memories WHERE channel = %s AND NOT ({_RECOVERABLE})"
            f"{where} ORDER BY id", [BRIDGE_CHANNEL, *params]).fetchall()
        return [tuple(r) for r in recoverable], [(r[0], bool(r[1])) for r in rest]

    def set_channel(self, memory_id: int, channel: str) -> bool:
        """Set one memory's channel unless that collides with the content unique index
        (then skipped); True when changed."""
        try:
            with self.pg.transaction():  # a savepoint: the refused update must not end the transaction
                return self.pg.execute("UPDATE memories SET channel = %s WHERE id = %s",
                                       (channel, memory_id)).rowcount > 0
        except psycopg.errors.UniqueViolation:
            return False
