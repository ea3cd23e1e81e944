"""The repositories of the store's upkeep: the task queue, the key-value record, the stored
vectors and per-agent totals (SQLite: storage/tasks.py, meta.py, vectors.py, agents.py;
PostgreSQL: the same names under storage/postgres/)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from cpersona.storage.meta import VectorState
from cpersona.storage.records import VectorRow

#: A task as claimed: (id, task_type, agent_id, payload JSON, failed attempts so far).
ClaimedTask = tuple[int, str, str, str, int]
#: A row to embed: (id, text, agent_id, project_id, channel, created_at).
TextRow = tuple[int, str, str, str, str, str]


class Tasks(Protocol):
    """The queue `pending_memory_tasks`: embeddings to compute, the background re-embedding."""

    def enqueue_embed(self, table: str, row_id: int, agent_id: str, project_id: str) -> None:
        """Queue the embedding of one row (a failed task for it starts afresh)."""

    def drop_embed(self, table: str, row_id: int) -> int:
        """Remove the embed task of a row that got its vector or was deleted."""

    def enqueue_missing(self) -> int:
        """Queue an embed task for every row without a vector that has none; how many."""

    def enqueue_reembed(self) -> bool:
        """Queue the background re-embedding unless one is pending; True when one was added."""

    def delete(self, task_id: int) -> None:
        """Remove a finished task."""

    def retry_later(self, task_id: int, error: str, not_before: float, max_retries: int) -> None:
        """Count one failed attempt; the task fails for good at `max_retries` attempts."""

    def fail(self, task_id: int, error: str) -> None:
        """Mark a pending task failed, with its reason."""

    def claim(self, now: float, with_embeds: bool, limit: int) -> list[ClaimedTask]:
        """The due tasks this worker runs now (on PostgreSQL leased to this node)."""

    def release(self, task_ids: list[int]) -> None:
        """Give claimed tasks back."""

    def next_due(self, with_embeds: bool) -> float | None:
        """Earliest `not_before` of the pending tasks (None when there is none)."""

    def is_pending(self, task_id: int) -> bool:
        """The task is still pending (on PostgreSQL: and held by no other node)."""

    def count_pending(self) -> int:
        """Pending tasks."""

    def summary(self) -> dict[str, Any]:
        """{pending, retries, retrying, oldest (created_at), failed, recent_failures: [...]}."""


class Meta(Protocol):
    """The key-value table `cpersona_meta` (JSON values): vector identity, calibration record."""

    def get(self, key: str) -> Any | None:
        """The decoded value of `key`; None when absent, {} when unreadable."""

    def lock(self, key: str) -> None:
        """Hold `key` against other writers until COMMIT (read-merge-write)."""

    def put(self, key: str, value: Any) -> None:
        """Store `value` (JSON) under `key`."""

    def vector_state(self) -> VectorState:
        """The recorded vector identity; an empty VectorState when none (or unreadable)."""

    def put_vector_state(self, state: VectorState) -> None:
        """Record the vector identity."""

    def max_ids(self) -> dict[str, int]:
        """Largest id of memories and episodes (the boundary of a re-embedding)."""

    def count_in_range(self, table: str, lo: int, hi: int) -> int:
        """Rows of `table` with id in (lo, hi]."""


class Vectors(Protocol):
    """Stored vectors. "Embedded by the active model": a vector of `dim` floats outside the
    `stale` id range (lo, hi] that a re-embedding has still to replace."""

    def embedded_rows(self, table: str, dim: int, stale: tuple[int, int], ordered: bool = True) -> Iterator[VectorRow]:
        """Every row of `table` embedded by the active model, oldest first when `ordered`."""

    def rows_by_id(self, table: str, ids: list[int], dim: int, stale: tuple[int, int]) -> list[VectorRow]:
        """The listed rows of `table` that are embedded by the active model."""

    def embedded_memory_ids(self, dim: int, stale: tuple[int, int], agent_id: str | None) -> list[int]:
        """Ids of the memories (of `agent_id`, None = all) embedded by the active model."""

    def count_embedded(self, table: str, dim: int, stale: tuple[int, int]) -> int:
        """Rows of `table` embedded by the active model."""

    def newest_memories(self, dim: int, stale: tuple[int, int], agent_id: str | None, n: int) -> list[tuple[int, str]]:
        """(id, timestamp) of the n embedded memories with the greatest timestamp."""

    def dated_memories(self, dim: int, stale: tuple[int, int], agent_id: str) -> list[tuple[int, str, str, bytes]]:
        """(id, content, timestamp, vector bytes) of the agent's embedded memories with a timestamp."""

    def embedded_counts(self, dim: int, stale: tuple[int, int], minimum: int) -> dict[str, int]:
        """agent → memories embedded by the active model, for agents owning at least `minimum`."""

    def memory_blobs(self, ids: list[int]) -> dict[int, bytes]:
        """id → vector bytes of the listed memories (rows without one left out)."""

    def rows_in_range(self, table: str, lo: int, hi: int, limit: int) -> list[TextRow]:
        """Rows with id in (lo, hi], in id order (re-embedding batches)."""

    def rows_without_vector(self, table: str, after: int, limit: int) -> list[TextRow]:
        """Rows without a vector with id > `after`, in id order."""

    def count_without_vector(self) -> int:
        """Rows of both tables without a vector."""

    def census(self) -> dict[int, int]:
        """Stored vectors of both tables by dimension: {dim: rows}."""

    def model_labels(self) -> dict[str, int]:
        """The original CPersona 2.6's per-row model labels of embedded rows: {label: rows}."""

    def spread_sample(self, n: int) -> list[tuple[str, bytes]]:
        """(text, vector bytes) of up to `n` embedded memories spread evenly over the ids (then
        episodes when there are too few memories): a deterministic sample."""

    def pending_row(self, table: str, row_id: int) -> tuple[str, str, str, str, str, bool] | None:
        """(text, agent_id, project_id, channel, created_at, has no vector) of one row."""

    def has_vector(self, table: str, row_id: int) -> bool | None:
        """Whether the row has a vector; None when the row is gone."""

    def clear(self, table: str, row_id: int) -> None:
        """Drop the row's vector (it is embedded again later)."""

    def set_if_text(self, table: str, row_id: int, text: str, blob: bytes, only_if_missing: bool) -> bool:
        """Write the row's vector if its text still reads `text` (and, with `only_if_missing`,
        it has none); True when written."""


class Agents(Protocol):
    """Per-agent totals and the erasure of an agent."""

    def ids(self) -> list[str]:
        """Every agent id that owns a memory or an episode, sorted."""

    def stats(self) -> list[dict]:
        """One dict per agent (storage/agents.py: STATS_COLUMNS)."""

    def delete_agent_chunk(self, agent_id: str, limit: int) -> tuple[dict[str, int], bool]:
        """Delete up to `limit` rows per table of `agent_id` (locked ones too): the count per
        table, and whether the agent has no row left."""
