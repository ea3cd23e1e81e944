"""Plain values that cross the storage boundary: drafts to write, rows read back, and the
reference of a changed row. No SQL here; `storage/*.py` repositories produce and take them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class MemoryDraft:
    """A validated memory, ready to insert (`policy.drafts.prepare_memory` builds it)."""

    agent_id: str
    project_id: str
    channel: str
    msg_id: str
    content: str
    source: str  # JSON object text
    timestamp: str
    metadata: str  # JSON object text


@dataclass(frozen=True)
class EpisodeDraft:
    """A validated episode (caller-computed summary), ready to insert."""

    agent_id: str
    project_id: str
    channel: str
    summary: str
    keywords: str
    start_time: str | None
    end_time: str | None
    resolved: bool


@dataclass(frozen=True)
class RowRef:
    """Where a written or changed row lives: what the resident vector index and the task
    queue need to know about it."""

    id: int
    agent_id: str
    project_id: str
    channel: str
    created_at: str


class MemoryRow(NamedTuple):
    """A memory as recall sees it (`source` is the stored JSON text)."""

    id: int
    content: str
    timestamp: str
    created_at: str
    source: str
    msg_id: str


class EpisodeRow(NamedTuple):
    """An episode as recall sees it; `timestamp` is its start time, else its creation time."""

    id: int
    summary: str
    timestamp: str
    created_at: str
    resolved: int


class VectorRow(NamedTuple):
    """One stored vector with the axes the resident index filters on."""

    id: int
    agent_id: str
    project_id: str
    channel: str
    created_at: str
    embedding: bytes
