"""`ResidentIndexes`: the two `VectorIndex`es (memories, episodes) of one process, loaded
from storage on first use and kept in step with the file.

* Writes of this process update them after COMMIT (`add` / `remove`, registered with
  `Session.after`), in commit order.
* Another process (or, on PostgreSQL, another node) committing is noticed through the
  database's data version (`changed_elsewhere`). When the backend can say which rows
  changed (PostgreSQL's change feed) exactly those rows are re-read; otherwise (SQLite's
  `PRAGMA data_version` says only that something changed) the indexes are dropped and
  reloaded on next use.
Thread-safe: one re-entrant lock guards loading and every change.
"""

from __future__ import annotations

import threading
from itertools import islice

import numpy as np

from cpersona.index.vector_index import VectorIndex
from cpersona.storage import Database
from cpersona.storage.codec import BLOB_DTYPE, from_blob
from cpersona.storage.meta import TABLES, VectorState
from cpersona.storage.records import RowRef, VectorRow

Indexes = dict[str, VectorIndex]
#: Rows `load_index` reads per step (~2 MB of 512-d vectors).
LOAD_CHUNK = 1024


def load_index(db: Database, table: str, dim: int, stale: tuple[int, int]) -> VectorIndex:
    """A `VectorIndex` of every vector of `table` embedded by the active model, read in storage
    order, LOAD_CHUNK rows at a time, and built in one pass (`VectorIndex.fill`: the index `add`
    builds row by row). A vector that is not `dim` float32 values or holds a non-finite one is
    left out, as `codec.from_blob` leaves it out (measured:
    benchmarks/rounds/2026-12-02-round-13-vector-scan.md)."""
    with db.read() as s:
        rows = _Rows(dim, s.vectors.count_embedded(table, dim, stale))  # sized once: no doubling
        stream = s.vectors.embedded_rows(table, dim, stale, ordered=False)
        while chunk := list(islice(stream, LOAD_CHUNK)):
            rows.add(chunk)
    index = VectorIndex(dim)
    index.fill(*rows.finite())
    return index


def _as_text(value: object) -> str:
    """A created_at as the text it sorts by: another program may have stored a BLOB (or a
    number, on a file without the column's affinity) where we write ISO text; one such row must
    not fail the load of every agent's vectors (found by a break-it tester)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


class _Rows:
    """The rows `load_index` reads: metadata lists and their vectors in a matrix of `expected`
    rows, grown by doubling only if more arrive (a write between the count and the read)."""

    def __init__(self, dim: int, expected: int) -> None:
        self.dim, self.n = dim, 0
        self.matrix = np.empty((max(expected, 1), dim), np.float32)
        self.ids: list[int] = []
        self.agents: list[str] = []
        self.projects: list[str] = []
        self.channels: list[str] = []
        self.keys: list[str] = []

    def add(self, chunk: list[VectorRow]) -> None:
        good = [r for r in chunk if isinstance(r.embedding, (bytes, bytearray, memoryview))
                and len(r.embedding) == 4 * self.dim]
        while self.n + len(good) > len(self.matrix):
            self.matrix = np.concatenate([self.matrix, np.empty_like(self.matrix)])
        vectors = np.frombuffer(b"".join(bytes(r.embedding) for r in good), BLOB_DTYPE)
        self.matrix[self.n: self.n + len(good)] = vectors.reshape(len(good), self.dim)
        self.n += len(good)
        self.ids.extend(r.id for r in good)
        self.agents.extend(r.agent_id for r in good)
        self.projects.extend(r.project_id for r in good)
        self.channels.extend(r.channel for r in good)
        self.keys.extend(map(_as_text, (r.created_at for r in good)))

    def finite(self) -> tuple[np.ndarray, list[str], list[str], list[str], list[str], np.ndarray]:
        """The columns `VectorIndex.fill` takes, without the rows holding a NaN or an infinity."""
        matrix, ids = self.matrix[: self.n], np.array(self.ids, np.int64)
        finite = np.isfinite(matrix).all(axis=1)
        if finite.all():  # the usual case: no copy of the matrix (fill copies each agent's rows once)
            return ids, self.agents, self.projects, self.channels, self.keys, matrix
        keep = np.flatnonzero(finite).tolist()
        agents, projects, channels, keys = ([col[i] for i in keep]
                                            for col in (self.agents, self.projects, self.channels, self.keys))
        return ids[keep], agents, projects, channels, keys, matrix[keep]


class ResidentIndexes:
    """The loaded indexes (or none yet) and the file version they reflect."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.lock = threading.RLock()
        self._indexes: Indexes | None = None
        self._stale: dict[str, tuple[int, int]] = {}
        self._data_version = db.data_version() or 0

    def get(self, dim: int, state: VectorState) -> Indexes:
        """The indexes for dimension `dim`, loading them (outside `state`'s stale ranges)
        when absent or built for another dimension."""
        with self.lock:
            if self._indexes is None or self._indexes["memories"].dim != dim:
                self._stale = {t: state.stale_range(t) for t in TABLES}
                self._indexes = {t: load_index(self.db, t, dim, self._stale[t]) for t in TABLES}
            return self._indexes

    def loaded(self) -> dict[str, tuple[int, int]] | None:
        """{table: (vectors held, dimension)} of the loaded indexes; None when not loaded."""
        with self.lock:
            if self._indexes is None:
                return None
            return {t: (len(index), index.dim) for t, index in self._indexes.items()}

    def invalidate(self) -> None:
        """Drop the indexes; the next `get` reloads them."""
        with self.lock:
            self._indexes = None

    def changed_elsewhere(self) -> bool:
        """True when another connection committed; the changed rows are applied to the
        loaded indexes, or the indexes are dropped when the backend cannot say which.
        Never waits for this process's own writer: while it holds the SQLite write lock
        nothing else can commit, and the next call looks again."""
        with self.lock:
            version = self.db.data_version(wait=False)
            if version is None or version == self._data_version:
                return False
            changes = self.db.changes_since(self._data_version)
            self._data_version = version
            if changes is None:
                self.invalidate()
            elif self._indexes is not None:
                self._apply(changes)
            return True

    def _apply(self, changes: list) -> None:
        """Re-read the rows other nodes changed: (table, ids) pairs; other tables are ignored."""
        assert self._indexes is not None
        touched: dict[str, set[int]] = {}
        for table, ids in changes:
            if table in self._indexes:
                touched.setdefault(table, set()).update(ids)
        for table, ids in touched.items():
            index = self._indexes[table]
            with self.db.read() as s:
                rows = s.vectors.rows_by_id(table, sorted(ids), index.dim, self._stale.get(table, (0, 0)))
            for row_id in ids:
                index.remove(row_id)
            for row in rows:
                vec = from_blob(row.embedding)
                if vec is not None:
                    index.add(row.id, row.agent_id, row.project_id, row.channel, row.created_at, vec)

    def add(self, table: str, ref: RowRef, vec: np.ndarray) -> None:
        """Put one freshly written vector into the loaded index (no-op when not loaded)."""
        with self.lock:
            if self._indexes is not None:
                self._indexes[table].add(ref.id, ref.agent_id, ref.project_id, ref.channel, ref.created_at, vec)

    def remove(self, table: str, row_id: int) -> None:
        """Forget one row's vector: deleted, or its text changed."""
        with self.lock:
            if self._indexes is not None:
                self._indexes[table].remove(row_id)

    def remove_agent(self, agent_id: str) -> None:
        """Forget every vector of `agent_id`."""
        with self.lock:
            if self._indexes is not None:
                for index in self._indexes.values():
                    index.remove_agent(agent_id)
