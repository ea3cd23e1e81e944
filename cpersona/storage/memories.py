"""The `memories` table: dedup probes, insert, guarded edits, listing, recall bookkeeping.

Edits (update / delete / lock) put the ownership and lock conditions in the changing
statement itself (`… WHERE id = ? AND locked = 0 AND agent_id = ?`), so no interleaving —
another thread, another process on the same file — can change a locked row or another
agent's row. Only when the statement changed nothing is the reason looked up, in the same
transaction, to answer precisely; the refusal raises `Refused` and the caller's
transaction rolls back. `owner=None` means "no ownership check".
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from cpersona.errors import Refused
from cpersona.storage import paging, text_columns, word_index
from cpersona.storage.records import MemoryDraft, MemoryRow, RowRef
from cpersona.storage.scope import Scope, source_id_predicate
from cpersona.util.words import canonical_forms

#: Columns of a `MemoryRow`, for a table aliased `m`.
ROW_COLUMNS = "m.id, m.content, m.timestamp, m.created_at, m.source, m.msg_id"
#: ROW_COLUMNS on SQLite: text columns read as text whatever another program stored there
#: (storage/text_columns.py).
READ_COLUMNS = ", ".join(["m.id", *(text_columns.text(f"m.{c}")
                                      for c in ("content", "timestamp", "created_at", "source", "msg_id"))])
LIST_COLUMNS = ("id", "agent_id", "project_id", "content", "source", "timestamp", "created_at", "locked", "channel")


def row_filter(scope: Scope, source_id: str = "", use_index: bool = True) -> tuple[str, list[Any]]:
    """WHERE clause (table alias `m`) of the memories a recall may see."""
    where, params = scope.predicate("m", use_index)
    if source_id:
        src_sql, src_params = source_id_predicate(source_id, "m")
        where, params = f"{where} AND {src_sql}", params + src_params
    return where, params


def refusal(row: tuple | None, memory_id: int, owner: str | None, *, lock_matters: bool) -> Refused:
    """Why a guarded statement on memory `memory_id` changed nothing, from its
    (agent_id, project_id, channel, created_at, locked) row (None = absent)."""
    if row is None:
        return Refused(f"memory {memory_id} not found")
    if owner is not None and row[0] != owner:  # ownership first: another agent's lock is none of the caller's business
        return Refused(f"memory {memory_id} is not owned by agent {owner!r}")
    if lock_matters and row[4]:
        return Refused(f"memory {memory_id} is locked; call unlock_memory first")
    return Refused(f"memory {memory_id} was not changed")  # unreachable inside one transaction


class MemoryRepo:
    """Queries on `memories` over one connection (see `storage.session.Session`)."""

    def __init__(self, conn: sqlite3.Connection, word_index: bool = False) -> None:
        self.conn = conn
        self.word_index = word_index  # keep `memories_words` in step (schema.WORD_TABLES)

    def _index_words(self, memory_id: int, content: str, replace: bool = False) -> None:
        if self.word_index:
            word_index.put(self.conn, memory_id, content, replace)

    # ------------------------------------------------------------------ write
    def find_duplicate(self, d: MemoryDraft) -> tuple[str, int] | None:
        """(reason, existing id) when the memory is already visible to its own scope.

        msg_id: same agent, project ∈ {P, ''}, any channel. content: same agent,
        project ∈ {P, ''}, channel ∈ {C, ''}, the same text in any Unicode normal form
        (NFC / NFD twins are one memory). A global write never collides with a bucket copy.
        """
        projects = (d.project_id, "")
        if d.msg_id:
            row = self.conn.execute(
                "SELECT id FROM memories WHERE agent_id = ? AND project_id IN (?, ?) AND msg_id = ? "
                "ORDER BY id LIMIT 1",
                (d.agent_id, *projects, d.msg_id),
            ).fetchone()
            if row:
                return "duplicate msg_id", row[0]
        forms = canonical_forms(d.content)
        row = self.conn.execute(
            "SELECT id FROM memories WHERE agent_id = ? AND project_id IN (?, ?) AND channel IN (?, ?) "
            f"AND content IN ({','.join('?' * len(forms))}) ORDER BY id LIMIT 1",
            (d.agent_id, *projects, d.channel, "", *forms),
        ).fetchone()
        return ("duplicate content", row[0]) if row else None

    def insert(self, d: MemoryDraft, blob: bytes | None) -> RowRef | None:
        """INSERT OR IGNORE; the new row's ref, or None when a unique index refused it."""
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO memories (agent_id, project_id, msg_id, content, source, timestamp, metadata, "
            "embedding, channel) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (d.agent_id, d.project_id, d.msg_id, d.content, d.source, d.timestamp, d.metadata, blob, d.channel),
        )
        if cur.rowcount == 0 or cur.lastrowid is None:
            return None
        self._index_words(cur.lastrowid, d.content)
        created = self.conn.execute("SELECT created_at FROM memories WHERE id = ?", (cur.lastrowid,)).fetchone()[0]
        return RowRef(cur.lastrowid, d.agent_id, d.project_id, d.channel, created)

    def _row(self, memory_id: int) -> tuple | None:
        return self.conn.execute(
            "SELECT agent_id, project_id, channel, created_at, locked FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()

    def _why(self, memory_id: int, owner: str | None, *, lock_matters: bool) -> Refused:
        """Explain why a guarded statement on memory `memory_id` changed nothing."""
        return refusal(self._row(memory_id), memory_id, owner, lock_matters=lock_matters)

    def check_writable(self, memory_id: int, owner: str | None) -> None:
        """Raise Refused when update/delete would be refused now (a cheap early answer
        before embedding; the authoritative check is the guarded statement)."""
        row = self._row(memory_id)
        if row is None or row[4] or (owner is not None and row[0] != owner):
            raise self._why(memory_id, owner, lock_matters=True)

    def update_content(self, memory_id: int, owner: str | None, content: str, blob: bytes | None) -> RowRef:
        """Replace the content (and its vector; None = NULL until the queue embeds it).

        msg_id, timestamp, source, channel and project are kept; FTS follows by trigger.
        Raises Refused: not found / locked / not owned / another memory of the same agent,
        project and channel already has this exact content (the dedup unique index).
        """
        row = self._row(memory_id)
        if row is not None:
            clash = self.conn.execute(
                "SELECT id FROM memories WHERE agent_id = ? AND project_id = ? AND channel = ? AND content = ? "
                "AND id <> ? LIMIT 1",
                (row[0], row[1], row[2], content, memory_id),
            ).fetchone()
            if clash and not row[4] and (owner is None or row[0] == owner):
                raise Refused(
                    f"memory {clash[0]} of the same agent, project and channel already has exactly this content; "
                    f"delete memory {memory_id} instead of updating it"
                )
        try:
            cur = self.conn.execute(
                "UPDATE memories SET content = ?, embedding = ? WHERE id = ? AND locked = 0 "
                "AND (? IS NULL OR agent_id = ?)",
                (content, blob, memory_id, owner, owner),
            )
        except sqlite3.IntegrityError as err:  # backstop; the probe above answers first
            raise Refused(f"memory {memory_id}: the new content collides with another memory ({err})") from None
        if cur.rowcount == 0 or row is None:
            raise self._why(memory_id, owner, lock_matters=True)
        self._index_words(memory_id, content, replace=True)
        return RowRef(memory_id, row[0], row[1], row[2], row[3])

    def delete(self, memory_id: int, owner: str | None) -> RowRef:
        """Delete an unlocked memory (of `owner` when given). Raises Refused otherwise."""
        row = self._row(memory_id)
        cur = self.conn.execute(
            "DELETE FROM memories WHERE id = ? AND locked = 0 AND (? IS NULL OR agent_id = ?)",
            (memory_id, owner, owner),
        )
        if cur.rowcount == 0 or row is None:
            raise self._why(memory_id, owner, lock_matters=True)
        return RowRef(memory_id, row[0], row[1], row[2], row[3])

    def set_locked(self, memory_id: int, owner: str | None, locked: bool) -> None:
        """Lock (protect from update/delete/repairs) or unlock; idempotent. Not a ranking boost."""
        cur = self.conn.execute(
            "UPDATE memories SET locked = ? WHERE id = ? AND (? IS NULL OR agent_id = ?)",
            (int(locked), memory_id, owner, owner),
        )
        if cur.rowcount == 0:
            raise self._why(memory_id, owner, lock_matters=False)

    # ------------------------------------------------------------------- read
    def fetch(self, ids: list[int], scope: Scope, source_id: str = "") -> dict[int, MemoryRow]:
        """Rows by id, re-applying scope and source filter (vanished rows are left out)."""
        if not ids:
            return {}
        where, params = row_filter(scope, source_id, use_index=False)
        marks = ",".join("?" * len(ids))
        sql = f"SELECT {READ_COLUMNS} FROM memories m WHERE m.id IN ({marks}) AND {where}"
        return {row[0]: MemoryRow._make(row) for row in self.conn.execute(sql, [*ids, *params])}

    def newest(self, scope: Scope, source_id: str, limit: int) -> list[MemoryRow]:
        """The newest `limit` memories in scope (recall with a blank query)."""
        where, params = row_filter(scope, source_id)
        sql = f"SELECT {READ_COLUMNS} FROM memories m WHERE {where} ORDER BY m.created_at DESC, m.id DESC LIMIT ?"
        return [MemoryRow._make(r) for r in self.conn.execute(sql, [*params, limit])]

    def texts(self, before_id: int | None, limit: int) -> list[tuple[int, str]]:
        """(id, content) of up to `limit` memories of every agent with an id below `before_id`
        (None: from the newest), highest id first: keyset pages of the whole table, for the
        word-token sets held in memory (index/token_sets.py). Content reads as `fetch` reads it."""
        below = "" if before_id is None else "WHERE m.id < ? "
        sql = f"SELECT m.id, {text_columns.text('m.content')} FROM memories m {below}ORDER BY m.id DESC LIMIT ?"
        return self.conn.execute(sql, [*([] if before_id is None else [before_id]), limit]).fetchall()

    def ids_with_source(self, scope: Scope, source_id: str) -> list[int]:
        """Ids of in-scope memories whose source.id starts with `source_id`."""
        where, params = row_filter(scope, source_id)
        return [r[0] for r in self.conn.execute(f"SELECT m.id FROM memories m WHERE {where}", params)]

    def listing(self, scope: Scope, limit: int, before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
        """Newest first: dicts with LIST_COLUMNS (`source` as stored JSON text). `before` =
        (created_at, id) of the last row already listed: only older rows (the next page;
        storage/paging.py)."""
        return paging.newest_first(self.conn, "memories", LIST_COLUMNS, scope, limit, before)

    def owned(self, memory_id: int, agent_id: str) -> tuple[str, str, str, str] | None:
        """(content, source JSON, timestamp, msg_id) of the memory if `agent_id` owns it."""
        return self.conn.execute(
            f"SELECT {text_columns.select_list(('content', 'source', 'timestamp', 'msg_id'))} FROM memories "
            "WHERE id = ? AND agent_id = ?",
            (memory_id, agent_id),
        ).fetchone()

    # ------------------------------------------------------ recall bookkeeping
    def timestamp_span(self, scope: Scope) -> tuple[float, float] | None:
        """(min, max) Julian day of the parseable timestamps in scope, or None."""
        where, params = scope.predicate()
        row = self.conn.execute(
            f"SELECT MIN(julianday(timestamp)), MAX(julianday(timestamp)) FROM memories "
            f"WHERE {where} AND julianday(timestamp) IS NOT NULL", params,
        ).fetchone()
        return None if row is None or row[0] is None else (row[0], row[1])

    def recall_stats(self, ids: list[int]) -> dict[int, tuple[int, str | None]]:
        """memory id → (recall_count, last_recalled_at)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        sql = f"SELECT id, recall_count, last_recalled_at FROM memories WHERE id IN ({marks})"
        return {r[0]: (r[1] or 0, r[2]) for r in self.conn.execute(sql, ids)}

    def bump_recalled(self, ids: list[int]) -> None:
        """recall_count + 1 and last_recalled_at = now (write transaction)."""
        if ids:
            marks = ",".join("?" * len(ids))
            self.conn.execute(
                f"UPDATE memories SET recall_count = recall_count + 1, last_recalled_at = ? WHERE id IN ({marks})",
                [datetime.now(UTC).isoformat(), *ids],
            )
