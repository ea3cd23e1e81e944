"""Stored vectors: float32 little-endian BLOBs (spec storage.md §6) and the resident
indexes built from them."""

from __future__ import annotations

import sqlite3

import numpy as np

from cpersona.core.vector_index import VectorIndex

_DTYPE = np.dtype("<f4")

#: table → SQL selecting (id, agent_id, project_id, channel, created_at, embedding) of
#: rows embedded at dimension ? (byte length 4·dim) outside the stale id range (?, ?],
#: oldest first.
_LOAD_SQL = {
    table: f"SELECT id, agent_id, project_id, channel, created_at, embedding FROM {table} "
    "WHERE embedding IS NOT NULL AND length(embedding) = ? AND NOT (id > ? AND id <= ?) ORDER BY created_at, id"
    for table in ("memories", "episodes")
}


def to_blob(vector: np.ndarray) -> bytes:
    """(dim,) float vector → 4·dim bytes, little-endian float32."""
    return np.asarray(vector, dtype=_DTYPE).tobytes()


def from_blob(blob: bytes) -> np.ndarray | None:
    """BLOB → (dim,) float32, or None when its length is not a multiple of 4."""
    if not blob or len(blob) % 4:
        return None
    return np.frombuffer(blob, dtype=_DTYPE).astype(np.float32)


def load_index(conn: sqlite3.Connection, table: str, dim: int, stale: tuple[int, int] = (0, 0)) -> VectorIndex:
    """Build the resident index of `table` from every stored vector of dimension `dim`,
    leaving out ids in the stale range (watermark, boundary] of another model."""
    index = VectorIndex(dim)
    for row_id, agent, project, channel, created, blob in conn.execute(_LOAD_SQL[table], (4 * dim, *stale)):
        index.add(row_id, agent, project, channel, created, from_blob(blob))
    return index
