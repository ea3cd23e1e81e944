"""Resident vector index: the scan window's vectors kept in memory as numpy matrices.

One `VectorIndex` per table (memories, episodes). Rows are partitioned by agent_id, because
every recall filters on one exact agent; each partition is a growable float32 matrix plus
row metadata (id, project code, channel code) kept in (created_at, id) order, so the scan
window — the newest `window` embedded rows that satisfy the scope —
is the tail of the masked partition. A search is one matrix–vector product over the
agent's rows: no per-query BLOB scan of the table.

The index is updated by the write path (add / remove) and reloaded wholesale by the
owner when another process changed the file (see `index.resident.ResidentIndexes`).
Thread-safe: every public method holds the index's own lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from cpersona.index.partitions import Codes, Partition
from cpersona.index.scan import matvec
from cpersona.storage.scope import Scope


@dataclass
class WindowStats:
    """Count, mean and standard deviation of the cosines one search scored (the query's
    cosine distribution over its scan window), accumulated over partitions."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def add(self, scores: np.ndarray) -> None:
        self.n += int(scores.size)
        self.total += float(scores.sum(dtype=np.float64))
        self.squares += float(np.dot(scores.astype(np.float64), scores))

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def std(self) -> float:
        return max(self.squares / self.n - self.mean**2, 0.0) ** 0.5 if self.n else 0.0


class VectorIndex:
    """Vectors of one table, dimension `dim`, partitioned by agent.

    Args:
        dim: vector dimension of the active embedding model; vectors of another
            dimension are refused by `add` (they belong to another model).
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._parts: dict[str, Partition] = {}
        self._where: dict[int, str] = {}
        self._projects = Codes()
        self._channels = Codes()
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._where)

    def agent_version(self, agent_id: str, rows: int | None = None) -> tuple[int, int, int]:
        """(rows of the agent, id of its oldest row, id of its `rows`-th oldest row — the
        newest when None) in (created_at, id) order: a cache key for statistics of the
        agent's oldest `rows` rows, which changes whenever one of them is added or removed;
        (0, 0, 0) for no rows."""
        with self._lock:
            part = self._parts.get(agent_id)
            if part is None or part.n == 0:
                return (0, 0, 0)
            part.sort()
            last = part.n if rows is None else max(1, min(rows, part.n))
            return (part.n, int(part.ids[0]), int(part.ids[last - 1]))

    def add(
        self, row_id: int, agent_id: str, project_id: str, channel: str, created_at: str, vector: np.ndarray
    ) -> bool:
        """Insert or replace row `row_id`. Returns False (and stores nothing) on a dim mismatch."""
        if vector.shape != (self.dim,):
            return False
        with self._lock:
            return self._add(row_id, agent_id, project_id, channel, created_at, vector)

    def fill(self, ids: np.ndarray, agents: list[str], projects: list[str], channels: list[str],
             keys: list[str], matrix: np.ndarray) -> None:
        """Load rows into this EMPTY index at once: the index `add` would build from them one
        by one in (created_at, id) order (the same partitions, order and codes), with array
        operations instead of a Python step per row (a reload of 9,138 rows: `resident.py`).

        Args:
            ids: (n,) int64 row ids, each once; `agents`, `projects`, `channels`, `keys`
                (created_at): n strings each; matrix: (n, dim) float32, in any row order.

        Raises:
            ValueError: the index already holds rows, or `matrix` is not (n, dim).
        """
        if matrix.shape != (len(ids), self.dim):
            raise ValueError(f"fill needs a ({len(ids)}, {self.dim}) matrix, got {matrix.shape}")
        with self._lock:
            if self._where:
                raise ValueError("fill loads an empty index only")
            order = sorted(range(len(ids)), key=lambda i: (keys[i], int(ids[i])))
            groups: dict[str, list[int]] = {}
            project_codes, channel_codes = np.zeros(len(ids), np.int32), np.zeros(len(ids), np.int32)
            for i in order:  # interned in the order `add` would meet them
                groups.setdefault(agents[i], []).append(i)
                project_codes[i], channel_codes[i] = self._projects.code(projects[i]), self._channels.code(channels[i])
            for agent, rows in groups.items():
                at = np.array(rows, np.int64)
                self._parts[agent] = Partition.of(ids[at], [keys[i] for i in rows], project_codes[at],
                                                  channel_codes[at], np.ascontiguousarray(matrix[at], np.float32))
                self._where.update(dict.fromkeys(ids[at].tolist(), agent))

    def _add(self, row_id, agent_id, project_id, channel, created_at, vector) -> bool:
        self.remove(row_id)
        part = self._parts.get(agent_id)
        if part is None:
            part = self._parts[agent_id] = Partition(self.dim)
        part.append(row_id, created_at, self._projects.code(project_id), self._channels.code(channel), vector)
        self._where[row_id] = agent_id
        return True

    def remove(self, row_id: int) -> None:
        """Forget `row_id` if present."""
        with self._lock:
            agent = self._where.pop(row_id, None)
            if agent is not None:
                self._parts[agent].remove(row_id)

    def remove_agent(self, agent_id: str) -> None:
        """Forget every row of `agent_id`."""
        with self._lock:
            part = self._parts.pop(agent_id, None)
            if part is not None:
                for row_id in part.ids[: part.n].tolist():
                    self._where.pop(row_id, None)

    def search(
        self,
        query: np.ndarray,
        scope: Scope,
        window: int,
        threshold: float,
        limit: int,
        allowed_ids: np.ndarray | None = None,
        stats: WindowStats | None = None,
    ) -> list[tuple[int, float]]:
        """Cosine search inside the scan window.

        Args:
            query: L2-normalised float32 vector of shape (dim,).
            scope: isolation axes; rows outside it are never scored.
            window: CPERSONA_MAX_MEMORIES — only the newest `window` in-scope rows count.
            threshold: minimum cosine kept.
            limit: maximum rows returned.
            allowed_ids: optional extra filter (e.g. rows matching a source_id prefix).
            stats: when given, receives the count, sum and sum of squares of the cosines of
                every row scored (the query's background distribution; no extra pass).

        Returns:
            [(row_id, cosine)] best first; ties broken by scan position (newest first).
        """
        if query.shape != (self.dim,) or limit <= 0:
            return []
        hits: list[tuple[float, int, int]] = []
        with self._lock:
            agents = [scope.agent_id] if scope.agent_id is not None else list(self._parts)
            for agent in agents:
                part = self._parts.get(agent)
                if part is not None and part.n:
                    hits.extend(self._search_part(part, query, scope, window, threshold, limit, allowed_ids, stats))
        hits.sort(key=lambda h: (-h[0], h[1]))
        return [(row_id, cos) for cos, _, row_id in hits[:limit]]

    def pair_cosines(self, agent_id: str, pairs: int, rows: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Cosines of `pairs` row pairs of one agent that are neighbours in time (rows i and
        i + 1 in (created_at, id) order) and of as many pairs drawn at random, among its
        oldest `rows` rows (all when None); the sample is seeded by that count and its first
        and last ids, so the same rows always give the same arrays.

        Returns:
            (neighbour cosines, random-pair cosines), each of shape (pairs,) or shorter when
            the agent has few rows; None when the agent has fewer than 3 rows.
        """
        with self._lock:
            part = self._parts.get(agent_id)
            if part is None or part.n < 3:
                return None
            part.sort()
            n = part.n if rows is None else max(3, min(rows, part.n))
            rng = np.random.default_rng([n, int(part.ids[0]), int(part.ids[n - 1])])
            m = min(pairs, n - 1)
            first = rng.choice(n - 1, m, replace=False) if m < n - 1 else np.arange(n - 1)
            a, b = rng.integers(0, n, m), rng.integers(0, n - 1, m)
            b = b + (b >= a)  # a row is never paired with itself
            matrix = part.matrix
            near = np.einsum("ij,ij->i", matrix[first], matrix[first + 1])
            far = np.einsum("ij,ij->i", matrix[a], matrix[b])
        return near, far

    def _by_agent(self, row_ids: list[int]) -> dict[str, list[int]]:
        """The listed ids the index holds, grouped by agent (caller holds the lock)."""
        by_agent: dict[str, list[int]] = {}
        for row_id in row_ids:
            agent = self._where.get(row_id)
            if agent is not None:
                by_agent.setdefault(agent, []).append(row_id)
        return by_agent

    def neighbours(self, row_ids: list[int], scope: Scope,
                   max_gap_s: float | None = None) -> dict[int, tuple[int, ...]]:
        """The rows just before and just after each listed row among its agent's in-scope
        rows, in (created_at, id) order — the turns around a turn of one conversation; with
        `max_gap_s`, only those stored at most that many seconds from the row.

        Returns:
            {row_id: (neighbour ids)}; rows the index does not hold are left out.
        """
        out: dict[int, tuple[int, ...]] = {}
        with self._lock:
            for agent, ids in self._by_agent(row_ids).items():
                part = self._parts[agent]
                part.sort()
                rows = self._scope_rows(part, Scope(agent, scope.project_id, scope.channel), None)
                in_scope = part.ids[rows]
                held = part.positions(ids)  # ascending, as `rows` is: their places in `rows`
                places = np.minimum(np.searchsorted(rows, held), max(len(rows) - 1, 0))
                for pos in (places[rows[places] == held] if len(rows) else places[:0]).tolist():
                    lo, hi = max(pos - 1, 0), min(pos + 2, len(in_scope))
                    out[int(in_scope[pos])] = tuple(
                        int(in_scope[j]) for j in range(lo, hi)
                        if j != pos and _within(part.keys[rows[pos]], part.keys[rows[j]], max_gap_s))
        return out

    def cosines(self, query: np.ndarray, row_ids: list[int]) -> dict[int, float]:
        """Cosine of each listed row that the index holds, regardless of the scan window.

        Args:
            query: L2-normalised float32 vector of shape (dim,).
            row_ids: ids of this table; unknown ids (no vector, a stale model's vector,
                another dimension) are left out of the result.

        Returns:
            {row_id: cosine}.
        """
        if query.shape != (self.dim,) or not row_ids:
            return {}
        found: dict[int, float] = {}
        with self._lock:
            for agent, ids in self._by_agent(row_ids).items():
                part = self._parts[agent]
                pos = part.positions(ids)
                scores = np.clip(part.matrix[pos] @ query, -1.0, 1.0)
                found.update(zip(part.ids[pos].tolist(), scores.tolist()))
        return found

    def _search_part(self, part, query, scope, window, threshold, limit, allowed_ids, stats=None):
        part.sort()
        rows = self._scope_rows(part, scope, allowed_ids)[-window:]
        if rows.size == 0:
            return []
        # One pass over the slice spanning the in-scope rows (a view, no copy), then pick
        # them: cheaper than gathering a sub-matrix, and the scan window bounds the slice.
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        scores = matvec(part.matrix[lo:hi], query)[rows - lo]
        np.clip(scores, -1.0, 1.0, out=scores)  # float32 rounding: |u·v| may exceed 1 by ~1e-7
        if stats is not None:
            stats.add(scores)
        keep = np.flatnonzero(scores >= threshold)
        if keep.size > limit:
            keep = keep[np.argpartition(-scores[keep], limit - 1)[:limit]]
        picked = rows[keep]
        newest_first = part.n - 1 - picked
        return [(float(s), int(pos), int(i)) for s, pos, i in zip(scores[keep], newest_first, part.ids[picked])]

    def _scope_rows(self, part: Partition, scope: Scope, allowed_ids: np.ndarray | None) -> np.ndarray:
        mask = np.ones(part.n, bool)
        if scope.project_id is not None:
            code = self._projects.lookup(scope.project_id)
            mask &= (part.projects[: part.n] == code) | (part.projects[: part.n] == 0)
        if scope.channel:
            code = self._channels.lookup(scope.channel)
            mask &= (part.channels[: part.n] == code) | (part.channels[: part.n] == 0)
        if allowed_ids is not None:
            mask &= np.isin(part.ids[: part.n], allowed_ids)
        return np.flatnonzero(mask)


def _stamp(key: str) -> datetime | None:
    """A created_at key as an aware datetime (naive = UTC); None when it does not parse."""
    try:
        t = datetime.fromisoformat(key)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _within(a: str, b: str, max_gap_s: float | None) -> bool:
    """Whether two created_at keys are at most `max_gap_s` apart (None, or unparsable: yes)."""
    if max_gap_s is None or a == b:
        return True
    ta, tb = _stamp(a), _stamp(b)
    return ta is None or tb is None or abs((ta - tb).total_seconds()) <= max_gap_s
