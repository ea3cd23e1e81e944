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

import numpy as np

from cpersona.index.vector_index import VectorIndex
from cpersona.storage import Database
from cpersona.storage.codec import from_blob
from cpersona.storage.meta import TABLES, VectorState
from cpersona.storage.records import RowRef

Indexes = dict[str, VectorIndex]


def load_index(db: Database, table: str, dim: int, stale: tuple[int, int]) -> VectorIndex:
    """A `VectorIndex` of every vector of `table` embedded by the active model."""
    index = VectorIndex(dim)
    with db.read() as s:
        for row in s.vectors.embedded_rows(table, dim, stale):
            vec = from_blob(row.embedding)
            if vec is not None:
                index.add(row.id, row.agent_id, row.project_id, row.channel, row.created_at, vec)
    return index


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
