"""The repository of the declared graph — entities, aliases, mentions, relations (SQLite:
storage/associations.py; PostgreSQL: storage/postgres/associations.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from cpersona.storage.records import Edge, Entity, EntityDraft, Graph, Mention, Relation
from cpersona.storage.scope import Scope


class Associations(Protocol):
    """Declarations as recorded; the rules of a declaration are the caller's. Reads take a
    recall `Scope`: the entity or relation, and each entity it names, must be inside it."""

    def resolve(self, agent: str, project: str, channel: str, normalized: str) -> int | None:
        """The entity of exactly this scope named or aliased `normalized` (lowest id), or None."""

    def insert_entity(self, d: EntityDraft) -> int:
        """Register an entity; its id."""

    def add_alias(self, entity_id: int, alias: str, normalized: str) -> None:
        """Attach an alias (nothing when attached already)."""

    def add_mention(self, entity_id: int, ref: str, declared_by: str, created_at: str) -> None:
        """Record that record `ref` mentions the entity (nothing when recorded already)."""

    def add_relation(self, r: Relation) -> int:
        """Record a relation (`r.id` ignored); the id of the row holding it (an equal one keeps its id)."""

    def record_exists(self, kind: str, row_id: int, agent: str) -> bool:
        """Whether record `kind:row_id` ("mem" / "ep") is the agent's."""

    def retract_relation(self, agent: str, relation_id: int) -> int:
        """Delete the agent's relation; rows deleted."""

    def retract_mention(self, agent: str, entity_id: int, ref: str) -> int:
        """Delete the mention of the agent's entity by `ref`; rows deleted."""

    def forget(self, agent: str) -> None:
        """Delete every entity and relation of `agent` (with the entities' aliases and mentions)."""

    def find(self, scope: Scope, normalized: str) -> list[int]:
        """Ids of the entities inside `scope` named or aliased `normalized`, lowest first."""

    def edges(self, scope: Scope, entity_ids: Iterable[int]) -> list[Edge]:
        """Entity → entity relations inside `scope` touching any of `entity_ids`; by id."""

    def entities(self, ids: Iterable[int]) -> dict[int, Entity]:
        """The entities of `ids` with their aliases."""

    def mentioning(self, entity_id: int, scope: Scope, source_id: str, episodes: bool,
                   limit: int) -> tuple[list[str], int]:
        """(refs of the readable records mentioning the entity, lowest id first, ≤ `limit`; how many in all)."""

    def relations_of(self, scope: Scope, refs: Iterable[str]) -> list[Relation]:
        """Relations inside `scope` naming any record of `refs` as subject, object or anchor; by id."""

    def with_predicate(self, scope: Scope, predicate: str, objects: Iterable[str]) -> list[Relation]:
        """Relations inside `scope` with this predicate whose object is a record of `objects`; by id."""

    def mentions_of(self, scope: Scope, refs: Iterable[str]) -> list[Mention]:
        """Mentions by the records `refs` of entities inside `scope`, by (ref, entity)."""

    def graph(self, agent: str | None) -> Graph:
        """Every declaration of `agent` (None = every agent)."""

    def count(self, agent: str | None) -> dict[str, int]:
        """{entities, mentions, relations} of `agent` (None = every agent)."""
