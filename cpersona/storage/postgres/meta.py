"""`cpersona_meta` (key → JSON text), per-agent queries and stored vectors on PostgreSQL:
the same methods as `storage/meta.py`, `storage/agents.py` and `storage/vectors.py`."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import psycopg

from cpersona.storage.agents import ERASED, IDS_QUERY, STATS_COLUMNS, STATS_QUERY
from cpersona.storage.meta import TABLES, VECTORS_KEY, VectorState, decode
from cpersona.storage.postgres.portable import portable
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.records import VectorRow
from cpersona.storage.vectors import TEXT_COLUMN, VectorRepo

log = logging.getLogger(__name__)

_EMBEDDED = "embedding IS NOT NULL AND length(embedding) = %s AND NOT (id > %s AND id <= %s)"
#: Rows fetched per round trip when streaming every vector of a table.
_STREAM_ROWS = 2000


class PgMetaRepo:
    """Reads and writes of `cpersona_meta` over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def get(self, key: str) -> Any | None:
        """The decoded JSON value of `key`; None when absent, {} when unreadable."""
        row = self.conn.execute("SELECT value FROM cpersona_meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else decode(key, row[0])

    def lock(self, key: str) -> None:
        """Hold `key` against other nodes' writers until COMMIT (a transaction-scoped advisory
        lock: it also covers a key that has no row yet)."""
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':meta:' || %s))", (key,))

    def put(self, key: str, value: Any) -> None:
        self._put(key, json.dumps(value))

    def _put(self, key: str, text: str) -> None:
        self.conn.execute("INSERT INTO cpersona_meta(key, value) VALUES (%s, %s) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, text))

    def vector_state(self) -> VectorState:
        """The recorded vector identity; an empty VectorState when none (or unreadable)."""
        return VectorState.from_value(self.get(VECTORS_KEY))

    def put_vector_state(self, state: VectorState) -> None:
        self._put(VECTORS_KEY, state.to_json())

    def max_ids(self) -> dict[str, int]:
        """Largest id of memories and episodes (the boundary of a re-embedding)."""
        return {t: scalar(self.conn, f"SELECT COALESCE(MAX(id), 0) FROM {t}") for t in TABLES}

    def count_in_range(self, table: str, lo: int, hi: int) -> int:
        """Rows of `table` with id in (lo, hi]."""
        return scalar(self.conn, f"SELECT COUNT(*) FROM {table} WHERE id > %s AND id <= %s", (lo, hi))


class PgAgentRepo:
    """Per-agent queries over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def ids(self) -> list[str]:
        """Every agent id that owns a memory or an episode, sorted."""
        rows = self.conn.execute(IDS_QUERY)
        return [r[0] for r in rows]

    def stats(self) -> list[dict]:
        """One dict per agent (STATS_COLUMNS of storage/agents.py)."""
        rows = self.conn.execute(STATS_QUERY).fetchall()
        return [dict(zip(STATS_COLUMNS, r)) for r in rows]

    def delete_agent_chunk(self, agent_id: str, limit: int) -> tuple[dict[str, int], bool]:
        """Delete up to `limit` memories (locked ones too), profiles, episodes and queued
        tasks of `agent_id`; the count per table and whether the agent has no row left."""
        counts = {key: self.conn.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE agent_id = %s LIMIT %s)",
            (agent_id, limit)).rowcount for key, table in ERASED}
        return counts, all(n < limit for n in counts.values())


def _embedded(dim: int, stale: tuple[int, int]) -> tuple[str, list]:
    return _EMBEDDED, [4 * dim, stale[0], stale[1]]


class PgVectorRepo(VectorRepo):
    """Vector reads and writes over one connection (the predicate of storage/vectors.py);
    the portable statements are VectorRepo's (postgres/portable.py)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(portable(conn))
        self.pg = conn

    def model_labels(self) -> dict[str, int]:
        """{}: the per-row `embedding_model` column of the original CPersona 2.6 is never
        created on PostgreSQL (`cpersona migrate` does not copy it)."""
        return {}

    def embedded_rows(self, table: str, dim: int, stale: tuple[int, int], ordered: bool = True) -> Iterator[VectorRow]:
        """Every row of `table` embedded by the active model, oldest first (in storage order
        when not `ordered`), streamed."""
        where, params = _embedded(dim, stale)
        query = (f"SELECT id, agent_id, project_id, channel, created_at, embedding FROM {table} WHERE {where}"
                 + (" ORDER BY created_at, id" if ordered else ""))
        return (VectorRow._make(r) for r in self.pg.cursor().stream(query, params, size=_STREAM_ROWS))

    def rows_by_id(self, table: str, ids: list[int], dim: int, stale: tuple[int, int]) -> list[VectorRow]:
        """The listed rows of `table` that are embedded by the active model."""
        where, params = _embedded(dim, stale)
        query = (f"SELECT id, agent_id, project_id, channel, created_at, embedding FROM {table} "
                 f"WHERE id = ANY(%s) AND {where} ORDER BY created_at, id")
        return [VectorRow._make(r) for r in self.conn.execute(query, [list(ids), *params])]

    def _agent(self, dim: int, stale: tuple[int, int], agent_id: str | None) -> tuple[str, list]:
        where, params = _embedded(dim, stale)
        if agent_id is not None:
            where, params = where + " AND agent_id = %s", [*params, agent_id]
        return where, params

    def embedded_memory_ids(self, dim: int, stale: tuple[int, int], agent_id: str | None) -> list[int]:
        """Ids of the memories (of `agent_id`, None = all) embedded by the active model."""
        where, params = self._agent(dim, stale, agent_id)
        return [r[0] for r in self.conn.execute(f"SELECT id FROM memories WHERE {where} ORDER BY id", params)]

    def newest_memories(self, dim: int, stale: tuple[int, int], agent_id: str | None, n: int) -> list[tuple[int, str]]:
        """(id, timestamp) of the n embedded memories with the greatest timestamp."""
        where, params = self._agent(dim, stale, agent_id)
        query = f"SELECT id, timestamp FROM memories WHERE {where} ORDER BY timestamp DESC, id DESC LIMIT %s"
        return [tuple(r) for r in self.conn.execute(query, [*params, n])]

    def dated_memories(self, dim: int, stale: tuple[int, int], agent_id: str) -> list[tuple[int, str, str, bytes]]:
        """(id, content, timestamp, embedding) of the agent's embedded memories with a timestamp."""
        where, params = self._agent(dim, stale, agent_id)
        query = f"SELECT id, content, timestamp, embedding FROM memories WHERE {where} AND timestamp <> '' ORDER BY id"
        return [tuple(r) for r in self.conn.execute(query, params)]

    def embedded_counts(self, dim: int, stale: tuple[int, int], minimum: int) -> dict[str, int]:
        """agent → memories embedded by the active model, for agents owning at least `minimum`."""
        where, params = _embedded(dim, stale)
        query = f"SELECT agent_id, COUNT(*) FROM memories WHERE {where} GROUP BY agent_id HAVING COUNT(*) >= %s"
        return {r[0]: int(r[1]) for r in self.conn.execute(query, [*params, minimum])}

    def memory_blobs(self, ids: list[int]) -> dict[int, bytes]:
        """id → stored vector bytes of the listed memories (rows without one are left out)."""
        if not ids:
            return {}
        rows = self.conn.execute("SELECT id, embedding FROM memories WHERE id = ANY(%s) AND embedding IS NOT NULL",
                                 (list(ids),))
        return {r[0]: r[1] for r in rows}

    def texts_in_range(self, table: str, lo: int, hi: int, limit: int) -> list[tuple[int, str]]:
        """(id, text) of rows with id in (lo, hi], in id order (re-embedding batches)."""
        query = f"SELECT id, {TEXT_COLUMN[table]} FROM {table} WHERE id > %s AND id <= %s ORDER BY id LIMIT %s"
        return [tuple(r) for r in self.conn.execute(query, (lo, hi, limit))]

    def pending_row(self, table: str, row_id: int) -> tuple[str, str, str, str, str, bool] | None:
        """(text, agent_id, project_id, channel, created_at, has no vector) of one row."""
        query = (f"SELECT {TEXT_COLUMN[table]}, agent_id, project_id, channel, created_at, embedding IS NULL "
                 f"FROM {table} WHERE id = %s")
        return self.conn.execute(query, (row_id,)).fetchone()

    def has_vector(self, table: str, row_id: int) -> bool | None:
        """True / False whether the row has a vector; None when the row is gone."""
        row = self.conn.execute(f"SELECT embedding IS NOT NULL FROM {table} WHERE id = %s", (row_id,)).fetchone()
        return None if row is None else bool(row[0])

    def set_if_text(self, table: str, row_id: int, text: str, blob: bytes, only_if_missing: bool) -> bool:
        """Write the row's vector if its text is still `text` (and, with `only_if_missing`,
        it has none yet). True when written."""
        extra = " AND embedding IS NULL" if only_if_missing else ""
        query = f"UPDATE {table} SET embedding = %s WHERE id = %s AND {TEXT_COLUMN[table]} = %s{extra}"
        return self.conn.execute(query, (blob, row_id, text)).rowcount > 0
