"""Stored vectors: which rows carry a vector of the active model, and writing vectors.

"Embedded by the active model" always means the one predicate `_EMBEDDED`: a vector of
4·dim bytes (float32) outside the stale id range (watermark, boundary] that a model change
left to re-embed. Every reader of vectors — the resident index, calibration samples — uses it,
so rows of two models are never mixed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from cpersona.storage.records import VectorRow
from cpersona.storage.text_columns import SAME_TEXT, text

#: table → the column holding the embedded text.
TEXT_COLUMN = {"memories": "content", "episodes": "summary"}
#: The embedded column read as text whatever another program stored in it (text_columns.py).
_READ = {table: text(column) for table, column in TEXT_COLUMN.items()}
_EMBEDDED = "embedding IS NOT NULL AND length(embedding) = ? AND NOT (id > ? AND id <= ?)"
_CHUNK = 500


def _embedded(dim: int, stale: tuple[int, int]) -> tuple[str, list]:
    return _EMBEDDED, [4 * dim, stale[0], stale[1]]


class VectorRepo:
    """Vector reads and writes over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # ------------------------------------------------------------------- read
    def embedded_rows(self, table: str, dim: int, stale: tuple[int, int], ordered: bool = True) -> Iterator[VectorRow]:
        """Every row of `table` embedded by the active model, oldest first (created_at, id);
        in storage order when not `ordered` (half the time at 10k rows: no sort of the blobs)."""
        where, params = _embedded(dim, stale)
        sql = (f"SELECT id, agent_id, project_id, channel, created_at, embedding FROM {table} WHERE {where}"
               + (" ORDER BY created_at, id" if ordered else ""))
        return (VectorRow._make(r) for r in self.conn.execute(sql, params))

    def rows_by_id(self, table: str, ids: list[int], dim: int, stale: tuple[int, int]) -> list[VectorRow]:
        """The listed rows of `table` that are embedded by the active model."""
        where, params = _embedded(dim, stale)
        out: list[VectorRow] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            sql = (f"SELECT id, agent_id, project_id, channel, created_at, embedding FROM {table} "
                   f"WHERE id IN ({','.join('?' * len(chunk))}) AND {where} ORDER BY created_at, id")
            out.extend(VectorRow._make(r) for r in self.conn.execute(sql, [*chunk, *params]))
        return out

    def embedded_memory_ids(self, dim: int, stale: tuple[int, int], agent_id: str | None) -> list[int]:
        """Ids of the memories (of `agent_id`, None = all) embedded by the active model."""
        where, params = _embedded(dim, stale)
        if agent_id is not None:
            where, params = where + " AND agent_id = ?", [*params, agent_id]
        return [r[0] for r in self.conn.execute(f"SELECT id FROM memories WHERE {where} ORDER BY id", params)]

    def count_embedded(self, table: str, dim: int, stale: tuple[int, int]) -> int:
        """Rows of `table` embedded by the active model (what its resident index must hold)."""
        where, params = _embedded(dim, stale)
        return self.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", params).fetchone()[0]

    def newest_memories(self, dim: int, stale: tuple[int, int], agent_id: str | None, n: int) -> list[tuple[int, str]]:
        """(id, timestamp) of the n embedded memories with the greatest timestamp."""
        where, params = _embedded(dim, stale)
        if agent_id is not None:
            where, params = where + " AND agent_id = ?", [*params, agent_id]
        sql = f"SELECT id, timestamp FROM memories WHERE {where} ORDER BY timestamp DESC, id DESC LIMIT ?"
        return self.conn.execute(sql, [*params, n]).fetchall()

    def dated_memories(self, dim: int, stale: tuple[int, int], agent_id: str) -> list[tuple[int, str, str, bytes]]:
        """(id, content, timestamp, embedding) of the agent's embedded memories with a timestamp."""
        where, params = _embedded(dim, stale)
        sql = f"SELECT id, content, timestamp, embedding FROM memories WHERE {where} AND agent_id = ? " \
              "AND timestamp != '' ORDER BY id"
        return self.conn.execute(sql, [*params, agent_id]).fetchall()

    def embedded_counts(self, dim: int, stale: tuple[int, int], minimum: int) -> dict[str, int]:
        """agent → memories embedded by the active model, for agents owning at least `minimum`."""
        where, params = _embedded(dim, stale)
        sql = f"SELECT agent_id, COUNT(*) FROM memories WHERE {where} GROUP BY agent_id HAVING COUNT(*) >= ?"
        return {r[0]: r[1] for r in self.conn.execute(sql, [*params, minimum])}

    def memory_blobs(self, ids: list[int]) -> dict[int, bytes]:
        """id → stored vector bytes of the listed memories (rows without one are left out)."""
        out: dict[int, bytes] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT id, embedding FROM memories WHERE id IN ({marks}) AND embedding IS NOT NULL"
            out.update(self.conn.execute(sql, chunk).fetchall())
        return out

    def texts_in_range(self, table: str, lo: int, hi: int, limit: int) -> list[tuple[int, str]]:
        """(id, text) of rows with id in (lo, hi], in id order (re-embedding batches)."""
        sql = f"SELECT id, {_READ[table]} FROM {table} WHERE id > ? AND id <= ? ORDER BY id LIMIT ?"
        return self.conn.execute(sql, (lo, hi, limit)).fetchall()

    def rows_in_range(self, table: str, lo: int, hi: int, limit: int) -> list[tuple[int, str, str, str, str, str]]:
        """(id, text, agent_id, project_id, channel, created_at) of rows with id in (lo, hi],
        in id order (re-embedding batches)."""
        sql = (f"SELECT id, {_READ[table]}, agent_id, project_id, channel, created_at FROM {table} "
               "WHERE id > ? AND id <= ? ORDER BY id LIMIT ?")
        return self.conn.execute(sql, (lo, hi, limit)).fetchall()

    def rows_without_vector(self, table: str, after: int, limit: int) -> list[tuple[int, str, str, str, str, str]]:
        """(id, text, agent_id, project_id, channel, created_at) of rows without a vector
        with id > `after`, in id order (the embedding batches of `cpersona reembed`)."""
        sql = (f"SELECT id, {_READ[table]}, agent_id, project_id, channel, created_at FROM {table} "
               "WHERE embedding IS NULL AND id > ? ORDER BY id LIMIT ?")
        return self.conn.execute(sql, (after, limit)).fetchall()

    def count_without_vector(self) -> int:
        """Rows of both tables without a vector."""
        return sum(self.conn.execute(f"SELECT COUNT(*) FROM {t} WHERE embedding IS NULL").fetchone()[0]
                   for t in TEXT_COLUMN)

    def census(self) -> dict[int, int]:
        """Stored vectors of both tables by dimension: {dim: rows} (blob length / 4)."""
        out: dict[int, int] = {}
        for table in TEXT_COLUMN:
            sql = f"SELECT length(embedding) / 4, COUNT(*) FROM {table} WHERE embedding IS NOT NULL GROUP BY 1"
            for dim, count in self.conn.execute(sql):
                out[dim] = out.get(dim, 0) + count
        return out

    def model_labels(self) -> dict[str, int]:
        """The original CPersona 2.6's per-row `embedding_model` labels of embedded rows
        ({label: rows}); {} when the column does not exist (2.5 and older, or ours)."""
        out: dict[str, int] = {}
        for table in TEXT_COLUMN:
            columns = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
            if "embedding_model" not in columns:
                continue
            sql = (f"SELECT embedding_model, COUNT(*) FROM {table} WHERE embedding IS NOT NULL "
                   "AND embedding_model != '' GROUP BY 1")
            for label, count in self.conn.execute(sql):
                out[label] = out.get(label, 0) + count
        return out

    def spread_sample(self, n: int) -> list[tuple[str, bytes]]:
        """(text, embedding) of up to `n` embedded memories spread evenly over the id range
        (then episodes when there are too few memories): a deterministic sample."""
        out: list[tuple[str, bytes]] = []
        for table, column in TEXT_COLUMN.items():
            total = self.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE embedding IS NOT NULL").fetchone()[0]
            step = max(1, total // max(1, n - len(out)))
            sql = (f"SELECT {text(column)}, embedding FROM (SELECT {column}, embedding, "
                   f"ROW_NUMBER() OVER (ORDER BY id) AS k FROM {table} WHERE embedding IS NOT NULL) AS numbered "
                   "WHERE (k - 1) % ? = 0 LIMIT ?")
            out.extend(self.conn.execute(sql, (step, n - len(out))).fetchall())
            if len(out) >= n:
                break
        return out

    def pending_row(self, table: str, row_id: int) -> tuple[str, str, str, str, str, bool] | None:
        """(text, agent_id, project_id, channel, created_at, has no vector) of one row."""
        sql = (f"SELECT {_READ[table]}, agent_id, project_id, channel, created_at, embedding IS NULL "
               f"FROM {table} WHERE id = ?")
        return self.conn.execute(sql, (row_id,)).fetchone()

    def has_vector(self, table: str, row_id: int) -> bool | None:
        """True / False whether the row has a vector; None when the row is gone."""
        row = self.conn.execute(f"SELECT embedding IS NOT NULL FROM {table} WHERE id = ?", (row_id,)).fetchone()
        return None if row is None else bool(row[0])

    # ------------------------------------------------------------------ write
    def clear(self, table: str, row_id: int) -> None:
        """Drop the row's vector (it is embedded again later)."""
        self.conn.execute(f"UPDATE {table} SET embedding = NULL WHERE id = ?", (row_id,))

    def set_if_text(self, table: str, row_id: int, text: str, blob: bytes, only_if_missing: bool) -> bool:
        """Write the row's vector if its text still reads as `text` (and, with
        `only_if_missing`, it has none yet). True when written. A value another program stored
        as bytes reads as text (text_columns.py): compared as it reads, or its task would
        find it "changed" forever."""
        extra = " AND embedding IS NULL" if only_if_missing else ""
        column = TEXT_COLUMN[table]
        sql = f"UPDATE {table} SET embedding = ? WHERE id = ? AND {SAME_TEXT.format(col=column)}{extra}"
        return self.conn.execute(sql, (blob, row_id, text, text)).rowcount > 0
