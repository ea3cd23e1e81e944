"""One agent's rows of a resident vector index (`vector_index.VectorIndex`): a growable float32
matrix and the rows' metadata in (created_at, id) order, and the interning of project and channel
strings to small ints for vectorised scope filters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_INITIAL_CAPACITY = 64


class Codes:
    """Interns strings (project_id, channel) to small ints for vectorised filters."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {"": 0}

    def code(self, value: str) -> int:
        return self._codes.setdefault(value, len(self._codes))

    def lookup(self, value: str) -> int:
        """Code of `value`, or -1 if it was never interned (matches nothing)."""
        return self._codes.get(value, -1)


@dataclass
class Partition:
    """Rows of one agent. Arrays are allocated to `capacity`; rows [0, n) are live."""

    dim: int
    n: int = 0
    ids: np.ndarray = field(default_factory=lambda: np.zeros(_INITIAL_CAPACITY, np.int64))
    keys: list[str] = field(default_factory=list)
    projects: np.ndarray = field(default_factory=lambda: np.zeros(_INITIAL_CAPACITY, np.int32))
    channels: np.ndarray = field(default_factory=lambda: np.zeros(_INITIAL_CAPACITY, np.int32))
    matrix: np.ndarray = field(init=False)  # (capacity, dim), allocated in __post_init__
    ordered: bool = True
    #: row id → its position among rows [0, n): built when first asked, kept until the rows move
    #: (`_compact`: a removal, a re-sort), extended by `append`. A recall looks up a few dozen
    #: ids three times; `np.isin` over every row cost ~65 µs each time at 9k rows.
    at: dict[int, int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.matrix = np.zeros((_INITIAL_CAPACITY, self.dim), np.float32)

    @classmethod
    def of(cls, ids: np.ndarray, keys: list[str], projects: np.ndarray, channels: np.ndarray,
           matrix: np.ndarray) -> Partition:
        """A partition holding these rows, already in (created_at, id) order: `ids` int64,
        `projects` / `channels` int32 codes, `matrix` (rows, dim) float32 — taken, not copied."""
        part = cls(matrix.shape[1], len(ids), ids, keys, projects, channels)
        part.matrix = matrix
        return part

    def positions(self, row_ids: list[int]) -> np.ndarray:
        """The ascending positions of the listed ids among rows [0, n), each once; ids this
        partition does not hold are skipped (= `np.flatnonzero(np.isin(ids[:n], row_ids))`)."""
        if self.at is None:
            self.at = dict(zip(self.ids[: self.n].tolist(), range(self.n)))
        at = self.at
        return np.array(sorted({at[i] for i in row_ids if i in at}), np.int64)

    def _grow(self) -> None:
        cap = len(self.ids) * 2
        self.ids = np.resize(self.ids, cap)
        self.projects = np.resize(self.projects, cap)
        self.channels = np.resize(self.channels, cap)
        grown = np.zeros((cap, self.dim), np.float32)
        grown[: self.n] = self.matrix[: self.n]
        self.matrix = grown

    def append(self, row_id: int, key: str, project: int, channel: int, vector: np.ndarray) -> None:
        if self.n == len(self.ids):
            self._grow()
        if self.keys and (key, row_id) < (self.keys[-1], int(self.ids[self.n - 1])):
            self.ordered = False
        i = self.n
        self.ids[i], self.projects[i], self.channels[i] = row_id, project, channel
        self.matrix[i] = vector
        self.keys.append(key)
        self.n += 1
        if self.at is not None:
            self.at[int(row_id)] = i

    def remove(self, row_id: int) -> bool:
        hits = np.flatnonzero(self.ids[: self.n] == row_id)
        if hits.size == 0:
            return False
        i = int(hits[0])
        keep = np.ones(self.n, bool)
        keep[i] = False
        self._compact(np.flatnonzero(keep))
        return True

    def _compact(self, order: np.ndarray) -> None:
        m = len(order)
        self.ids[:m] = self.ids[order]
        self.projects[:m] = self.projects[order]
        self.channels[:m] = self.channels[order]
        self.matrix[:m] = self.matrix[order]
        self.keys = [self.keys[j] for j in order]
        self.n = m
        self.at = None

    def sort(self) -> None:
        if not self.ordered:
            order = np.array(sorted(range(self.n), key=lambda j: (self.keys[j], int(self.ids[j]))), np.int64)
            self._compact(order)
            self.ordered = True
