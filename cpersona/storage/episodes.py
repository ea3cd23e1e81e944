"""The `episodes` table: session summaries (no dedup, no lock)."""

from __future__ import annotations

import sqlite3
from typing import Any

from cpersona.errors import Refused
from cpersona.storage import paging, session_memo, text_columns
from cpersona.storage.records import EpisodeDraft, EpisodeRow, RowRef
from cpersona.storage.scope import Scope

#: Columns of an `EpisodeRow`, for a table aliased `e` (timestamp = start time, else creation).
ROW_COLUMNS = "e.id, e.summary, COALESCE(NULLIF(e.start_time, ''), e.created_at, ''), e.created_at, e.resolved"
#: ROW_COLUMNS on SQLite: text columns read as text whatever another program stored there
#: (storage/text_columns.py).
READ_COLUMNS = ", ".join(["e.id", *(text_columns.text(c) for c in (
    "e.summary", "COALESCE(NULLIF(e.start_time, ''), e.created_at, '')", "e.created_at")), "e.resolved"])
LIST_COLUMNS = ("id", "agent_id", "project_id", "summary", "keywords", "start_time", "end_time", "resolved", "channel",
                "created_at")


class EpisodeRepo:
    """Queries on `episodes` over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._memo: dict = {}  # storage/session_memo.py

    def insert(self, d: EpisodeDraft, blob: bytes | None) -> RowRef:
        """Plain INSERT; the new row's ref."""
        cur = self.conn.execute(
            "INSERT INTO episodes (agent_id, project_id, summary, keywords, embedding, start_time, end_time, resolved, "
            "channel) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (d.agent_id, d.project_id, d.summary, d.keywords, blob, d.start_time, d.end_time, int(d.resolved),
             d.channel),
        )
        row_id = int(cur.lastrowid or 0)
        created = self.conn.execute("SELECT created_at FROM episodes WHERE id = ?", (row_id,)).fetchone()[0]
        return RowRef(row_id, d.agent_id, d.project_id, d.channel, created)

    def delete(self, episode_id: int, owner: str | None) -> str:
        """Delete an episode (of `owner` when given); returns its agent. Raises Refused."""
        row = self.conn.execute("SELECT agent_id FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        cur = self.conn.execute(
            "DELETE FROM episodes WHERE id = ? AND (? IS NULL OR agent_id = ?)", (episode_id, owner, owner)
        )
        if cur.rowcount == 0 or row is None:
            if row is None:
                raise Refused(f"episode {episode_id} not found")
            raise Refused(f"episode {episode_id} is not owned by agent {owner!r}")
        return row[0]

    def fetch(self, ids: list[int], scope: Scope) -> dict[int, EpisodeRow]:
        """Rows by id inside `scope` (vanished rows are left out)."""
        if not ids:
            return {}
        where, params = scope.predicate("e", use_index=False)
        marks = ",".join("?" * len(ids))
        sql = f"SELECT {READ_COLUMNS} FROM episodes e WHERE e.id IN ({marks}) AND {where}"
        return {row[0]: EpisodeRow._make(row) for row in self.conn.execute(sql, [*ids, *params])}

    def listing(self, scope: Scope, limit: int, before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
        """Newest first: dicts with LIST_COLUMNS. `before` = (created_at, id) of the last row already listed: only
        older rows (the next page; storage/paging.py)."""
        return paging.newest_first(self.conn, "episodes", LIST_COLUMNS, scope, limit, before)

    def owned(self, episode_id: int, agent_id: str) -> EpisodeRow | None:
        """The episode if `agent_id` owns it."""
        row = self.conn.execute(
            f"SELECT {READ_COLUMNS} FROM episodes e WHERE e.id = ? AND e.agent_id = ?", (episode_id, agent_id)
        ).fetchone()
        return EpisodeRow._make(row) if row else None

    def latest_created(self, scope: Scope) -> str | None:
        """created_at of the newest episode inside `scope` (the episode boundary); read once
        per session (storage/session_memo.py)."""
        where, params = scope.predicate()
        return session_memo.once(self.conn, self._memo, ("latest", scope), lambda: self.conn.execute(
            f"SELECT MAX(created_at) FROM episodes WHERE {where}", params).fetchone()[0])

    def dated(self, scope: Scope) -> list[tuple[int, str]]:
        """(id, time) of every episode inside `scope`: its start time, else its creation time
        (`EpisodeRow.timestamp`), as stored — compared after parsing (zones differ)."""
        where, params = scope.predicate("e")
        sql = f"SELECT e.id, COALESCE(NULLIF(e.start_time, ''), e.created_at, '') FROM episodes e WHERE {where}"
        return [tuple(r) for r in self.conn.execute(sql, params)]
