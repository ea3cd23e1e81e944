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


# ------------------------------------------------------------ the declared graph
#: Record kinds a declaration names (`mem:<id>`, `ep:<id>`) and their tables.
RECORD_TABLES = {"mem": "memories", "ep": "episodes"}


@dataclass(frozen=True)
class Entity:
    """A declared entity: its name as written, the scope it was declared in, its aliases as
    written (in normalised order)."""

    id: int
    agent_id: str
    project_id: str
    channel: str
    name: str
    declared_by: str
    created_at: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mention:
    """Record `ref` (`mem:<id>` / `ep:<id>`) mentions entity `entity`."""

    entity: int
    ref: str
    declared_by: str
    created_at: str


@dataclass(frozen=True)
class Relation:
    """A declared subject –predicate→ object. An endpoint is an entity (`kind` "entity",
    `id` its entity id) or a record (`kind` "mem" / "ep", `id` its row id); `anchor_ref`
    is the record the declaration is evidenced by ('' = none). To record one, `id` is 0
    (its unique key is every field but `id`, `declared_by` and `declared_at`)."""

    id: int
    agent_id: str
    project_id: str
    channel: str
    subject_kind: str
    subject_id: int
    predicate: str
    object_kind: str
    object_id: int
    anchor_ref: str
    declared_by: str
    declared_at: str

    @property
    def subject_ref(self) -> str | None:
        """`mem:<id>` / `ep:<id>` when the subject is a record, else None."""
        return f"{self.subject_kind}:{self.subject_id}" if self.subject_kind in RECORD_TABLES else None

    @property
    def object_ref(self) -> str | None:
        """`mem:<id>` / `ep:<id>` when the object is a record, else None."""
        return f"{self.object_kind}:{self.object_id}" if self.object_kind in RECORD_TABLES else None


@dataclass(frozen=True)
class EntityDraft:
    """An entity to register: `normalized` is the lookup form of `name` (policy/associations.py)."""

    agent_id: str
    project_id: str
    channel: str
    name: str
    normalized: str
    declared_by: str
    created_at: str


@dataclass(frozen=True)
class Edge:
    """An entity → entity relation as a walk follows it."""

    id: int
    subject: int
    object: int
    predicate: str
    declared_at: str
    anchor_ref: str
    declared_by: str


@dataclass
class Graph:
    """Declarations as read from one store, keyed on the ids they have there."""

    entities: dict[int, Entity]
    mentions: list[Mention]
    relations: list[Relation]

    def __bool__(self) -> bool:
        return bool(self.entities or self.mentions or self.relations)

    def counts(self) -> dict[str, int]:
        """{entities, mentions, relations}."""
        return {"entities": len(self.entities), "mentions": len(self.mentions), "relations": len(self.relations)}
