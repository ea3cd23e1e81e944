"""The `memories` table on PostgreSQL: the same methods and rules as `storage/memories.py`.

Edits put the ownership and lock conditions in the changing statement itself
(`… WHERE id = %s AND locked = 0 AND agent_id = %s`), so no interleaving — another thread,
another node — can change a locked row or another agent's row; only when the statement
changed nothing is the reason looked up, in the same transaction. The dedup unique
indexes are the backstop of concurrent stores on different nodes: `INSERT … ON CONFLICT
DO NOTHING` then inserts nothing and the caller answers "skipped".
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import psycopg

from cpersona.errors import Refused
from cpersona.storage.memories import LIST_COLUMNS, ROW_COLUMNS, refusal
from cpersona.storage.postgres import word_index
from cpersona.storage.postgres.paging import newest_first
from cpersona.storage.postgres.scope import predicate, row_filter
from cpersona.storage.records import MemoryDraft, MemoryRow, RowRef
from cpersona.storage.scope import Scope
from cpersona.util.words import canonical_forms


def md5_hex(text: str) -> str:
    """PostgreSQL's md5(text) of a UTF-8 database, computed here (the key of the dedup index)."""
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


class PgMemoryRepo:
    """Queries on `memories` over one connection (see `PgSession`)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    # ------------------------------------------------------------------ write
    def find_duplicate(self, d: MemoryDraft) -> tuple[str, int] | None:
        """(reason, existing id) when the memory is already visible to its own scope
        (msg_id: same agent, project ∈ {P, ''}; content: also channel ∈ {C, ''}, the same
        text in any Unicode normal form: NFC / NFD twins are one memory)."""
        if d.msg_id:
            row = self.conn.execute(
                "SELECT id FROM memories WHERE agent_id = %s AND project_id IN (%s, '') AND msg_id = %s "
                "ORDER BY id LIMIT 1", (d.agent_id, d.project_id, d.msg_id)).fetchone()
            if row:
                return "duplicate msg_id", row[0]
        forms = canonical_forms(d.content)
        row = self.conn.execute(
            "SELECT id FROM memories WHERE agent_id = %s AND project_id IN (%s, '') AND channel IN (%s, '') "
            "AND md5(content) = ANY(%s) AND content = ANY(%s) ORDER BY id LIMIT 1",
            (d.agent_id, d.project_id, d.channel, [md5_hex(f) for f in forms], forms)).fetchone()
        return ("duplicate content", row[0]) if row else None

    def insert(self, d: MemoryDraft, blob: bytes | None) -> RowRef | None:
        """Insert unless a dedup unique index refuses it; the new row's ref, or None."""
        row = self.conn.execute(
            "INSERT INTO memories (agent_id, project_id, msg_id, content, source, timestamp, metadata, embedding, "
            "channel) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id, created_at",
            (d.agent_id, d.project_id, d.msg_id, d.content, d.source, d.timestamp, d.metadata, blob, d.channel),
        ).fetchone()
        if row is None:
            return None
        word_index.put(self.conn, row[0], d.content)
        return RowRef(row[0], d.agent_id, d.project_id, d.channel, row[1])

    def _row(self, memory_id: int) -> tuple | None:
        return self.conn.execute(
            "SELECT agent_id, project_id, channel, created_at, locked FROM memories WHERE id = %s", (memory_id,)
        ).fetchone()

    def _why(self, memory_id: int, owner: str | None, *, lock_matters: bool) -> Refused:
        return refusal(self._row(memory_id), memory_id, owner, lock_matters=lock_matters)

    def check_writable(self, memory_id: int, owner: str | None) -> None:
        """Raise Refused when update/delete would be refused now (early answer)."""
        row = self._row(memory_id)
        if row is None or row[4] or (owner is not None and row[0] != owner):
            raise self._why(memory_id, owner, lock_matters=True)

    def update_content(self, memory_id: int, owner: str | None, content: str, blob: bytes | None) -> RowRef:
        """Replace the content (and its vector); Refused: not found / locked / not owned /
        another memory of the same agent, project and channel has this exact content."""
        row = self._row(memory_id)
        if row is not None:
            clash = self.conn.execute(
                "SELECT id FROM memories WHERE agent_id = %s AND project_id = %s AND channel = %s "
                "AND md5(content) = md5(%s) AND content = %s AND id <> %s LIMIT 1",
                (row[0], row[1], row[2], content, content, memory_id)).fetchone()
            if clash and not row[4] and (owner is None or row[0] == owner):
                raise Refused(
                    f"memory {clash[0]} of the same agent, project and channel already has exactly this content; "
                    f"delete memory {memory_id} instead of updating it")
        try:
            with self.conn.transaction():  # a savepoint: the backstop error must not end the transaction
                cur = self.conn.execute(
                    "UPDATE memories SET content = %s, embedding = %s WHERE id = %s AND locked = 0 "
                    "AND (%s::text IS NULL OR agent_id = %s)", (content, blob, memory_id, owner, owner))
        except psycopg.errors.UniqueViolation as err:
            raise Refused(f"memory {memory_id}: the new content collides with another memory ({err})") from None
        if cur.rowcount == 0 or row is None:
            raise self._why(memory_id, owner, lock_matters=True)
        word_index.put(self.conn, memory_id, content)
        return RowRef(memory_id, row[0], row[1], row[2], row[3])

    def delete(self, memory_id: int, owner: str | None) -> RowRef:
        """Delete an unlocked memory (of `owner` when given). Raises Refused otherwise."""
        row = self.conn.execute(
            "DELETE FROM memories WHERE id = %s AND locked = 0 AND (%s::text IS NULL OR agent_id = %s) "
            "RETURNING agent_id, project_id, channel, created_at", (memory_id, owner, owner)).fetchone()
        if row is None:
            raise self._why(memory_id, owner, lock_matters=True)
        return RowRef(memory_id, *row)

    def set_locked(self, memory_id: int, owner: str | None, locked: bool) -> None:
        """Lock or unlock; idempotent. Raises Refused (not found / not owned)."""
        cur = self.conn.execute(
            "UPDATE memories SET locked = %s WHERE id = %s AND (%s::text IS NULL OR agent_id = %s)",
            (int(locked), memory_id, owner, owner))
        if cur.rowcount == 0:
            raise self._why(memory_id, owner, lock_matters=False)

    # ------------------------------------------------------------------- read
    def fetch(self, ids: list[int], scope: Scope, source_id: str = "") -> dict[int, MemoryRow]:
        """Rows by id, re-applying scope and source filter (vanished rows are left out)."""
        if not ids:
            return {}
        where, params = row_filter(scope, source_id)
        sql = f"SELECT {ROW_COLUMNS} FROM memories m WHERE m.id = ANY(%s) AND {where}"
        return {r[0]: MemoryRow._make(r) for r in self.conn.execute(sql, [list(ids), *params])}

    def newest(self, scope: Scope, source_id: str, limit: int) -> list[MemoryRow]:
        """The newest `limit` memories in scope (recall with a blank query)."""
        where, params = row_filter(scope, source_id)
        sql = f"SELECT {ROW_COLUMNS} FROM memories m WHERE {where} ORDER BY m.created_at DESC, m.id DESC LIMIT %s"
        return [MemoryRow._make(r) for r in self.conn.execute(sql, [*params, limit])]

    def texts(self, before_id: int | None, limit: int) -> list[tuple[int, str]]:
        """(id, content) of up to `limit` memories of every agent with an id below `before_id`
        (None: from the newest), highest id first (`MemoryRepo.texts`)."""
        below = "" if before_id is None else "WHERE id < %s "
        sql = f"SELECT id, content FROM memories {below}ORDER BY id DESC LIMIT %s"
        return self.conn.execute(sql, [*([] if before_id is None else [before_id]), limit]).fetchall()

    def ids_with_source(self, scope: Scope, source_id: str) -> list[int]:
        """Ids of in-scope memories whose source.id starts with `source_id`."""
        where, params = row_filter(scope, source_id)
        return [r[0] for r in self.conn.execute(f"SELECT m.id FROM memories m WHERE {where}", params)]

    def listing(self, scope: Scope, limit: int, before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
        """Newest first: dicts with LIST_COLUMNS; `before` = (created_at, id) of the last row
        already listed: only older rows (the next page, keyset pagination)."""
        return newest_first(self.conn, "memories", LIST_COLUMNS, scope, limit, before)

    def owned(self, memory_id: int, agent_id: str) -> tuple[str, str, str, str] | None:
        """(content, source JSON, timestamp, msg_id) of the memory if `agent_id` owns it."""
        return self.conn.execute(
            "SELECT content, source, timestamp, msg_id FROM memories WHERE id = %s AND agent_id = %s",
            (memory_id, agent_id)).fetchone()

    # ------------------------------------------------------ recall bookkeeping
    def timestamp_span(self, scope: Scope) -> tuple[float, float] | None:
        """(min, max) Julian day of the parseable timestamps in scope, or None."""
        where, params = predicate(scope)
        row = self.conn.execute(
            f"SELECT MIN(cpersona_julianday(timestamp)), MAX(cpersona_julianday(timestamp)) FROM memories "
            f"WHERE {where}", params).fetchone()
        return None if row is None or row[0] is None else (row[0], row[1])

    def recall_stats(self, ids: list[int]) -> dict[int, tuple[int, str | None]]:
        """memory id → (recall_count, last_recalled_at)."""
        if not ids:
            return {}
        rows = self.conn.execute("SELECT id, recall_count, last_recalled_at FROM memories WHERE id = ANY(%s)",
                                 (list(ids),))
        return {r[0]: (r[1] or 0, r[2]) for r in rows}

    def bump_recalled(self, ids: list[int]) -> None:
        """recall_count + 1 and last_recalled_at = now (write transaction)."""
        if ids:
            self.conn.execute(
                "UPDATE memories SET recall_count = recall_count + 1, last_recalled_at = %s WHERE id = ANY(%s)",
                (datetime.now(UTC).isoformat(), list(ids)))
