"""The `episodes` table on PostgreSQL (the methods of `storage/episodes.py`)."""

from __future__ import annotations

from typing import Any

import psycopg

from cpersona.errors import Refused
from cpersona.storage.episodes import LIST_COLUMNS, ROW_COLUMNS
from cpersona.storage.postgres.paging import newest_first
from cpersona.storage.postgres.rows import one, scalar
from cpersona.storage.postgres.scope import predicate
from cpersona.storage.records import EpisodeDraft, EpisodeRow, RowRef
from cpersona.storage.scope import Scope


class PgEpisodeRepo:
    """Queries on `episodes` over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def insert(self, d: EpisodeDraft, blob: bytes | None) -> RowRef:
        """Plain INSERT; the new row's ref."""
        row_id, created = one(
            self.conn,
            "INSERT INTO episodes (agent_id, project_id, summary, keywords, embedding, start_time, end_time, resolved, "
            "channel) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id, created_at",
            (d.agent_id, d.project_id, d.summary, d.keywords, blob, d.start_time, d.end_time, int(d.resolved),
             d.channel))
        return RowRef(row_id, d.agent_id, d.project_id, d.channel, created)

    def delete(self, episode_id: int, owner: str | None) -> str:
        """Delete an episode (of `owner` when given); returns its agent. Raises Refused."""
        row = self.conn.execute(
            "DELETE FROM episodes WHERE id = %s AND (%s::text IS NULL OR agent_id = %s) RETURNING agent_id",
            (episode_id, owner, owner)).fetchone()
        if row is not None:
            return row[0]
        if self.conn.execute("SELECT 1 FROM episodes WHERE id = %s", (episode_id,)).fetchone() is None:
            raise Refused(f"episode {episode_id} not found")
        raise Refused(f"episode {episode_id} is not owned by agent {owner!r}")

    def fetch(self, ids: list[int], scope: Scope) -> dict[int, EpisodeRow]:
        """Rows by id inside `scope` (vanished rows are left out)."""
        if not ids:
            return {}
        where, params = predicate(scope, "e")
        sql = f"SELECT {ROW_COLUMNS} FROM episodes e WHERE e.id = ANY(%s) AND {where}"
        return {r[0]: EpisodeRow._make(r) for r in self.conn.execute(sql, [list(ids), *params])}

    def listing(self, scope: Scope, limit: int, before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
        """Newest first: dicts with LIST_COLUMNS; `before` = (created_at, id) of the last row
        already listed: only older rows (the next page, keyset pagination)."""
        return newest_first(self.conn, "episodes", LIST_COLUMNS, scope, limit, before)

    def owned(self, episode_id: int, agent_id: str) -> EpisodeRow | None:
        """The episode if `agent_id` owns it."""
        row = self.conn.execute(f"SELECT {ROW_COLUMNS} FROM episodes e WHERE e.id = %s AND e.agent_id = %s",
                                (episode_id, agent_id)).fetchone()
        return EpisodeRow._make(row) if row else None

    def latest_created(self, scope: Scope) -> str | None:
        """created_at of the newest episode inside `scope` (the episode boundary)."""
        where, params = predicate(scope)
        return scalar(self.conn, f"SELECT MAX(created_at) FROM episodes WHERE {where}", params)

    def dated(self, scope: Scope) -> list[tuple[int, str]]:
        """(id, time) of every episode inside `scope`: its start time, else its creation time."""
        where, params = predicate(scope, "e")
        sql = f"SELECT e.id, COALESCE(NULLIF(e.start_time, ''), e.created_at, '') FROM episodes e WHERE {where}"
        return [tuple(r) for r in self.conn.execute(sql, params)]
