"""Stored vectors on PostgreSQL: the methods of `storage/vectors.py` with its one "embedded by
the active model" predicate, every vector of a table streamed by a server-side cursor."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg

from cpersona.storage.postgres.dialect import qmark
from cpersona.storage.records import VectorRow
from cpersona.storage.vectors import TEXT_COLUMN, VectorRepo

_EMBEDDED = "embedding IS NOT NULL AND length(embedding) = %s AND NOT (id > %s AND id <= %s)"
#: Rows fetched per round trip when streaming every vector of a table.
_STREAM_ROWS = 2000


def _embedded(dim: int, stale: tuple[int, int]) -> tuple[str, list]:
    return _EMBEDDED, [4 * dim, stale[0], stale[1]]


class PgVectorRepo(VectorRepo):
    """Vector reads and writes over one connection (the predicate of storage/vectors.py);
    the portable statements are VectorRepo's (postgres/dialect.py)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))
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

    def set_if_text(self, table: str, row_id: int, text: str, blob: bytes, only_if_missing: bool) -> bool:
        """Write the row's vector if its text is still `text` (and, with `only_if_missing`,
        it has none yet). True when written."""
        extra = " AND embedding IS NULL" if only_if_missing else ""
        query = f"UPDATE {table} SET embedding = %s WHERE id = %s AND {TEXT_COLUMN[table]} = %s{extra}"
        return self.conn.execute(query, (blob, row_id, text)).rowcount > 0
