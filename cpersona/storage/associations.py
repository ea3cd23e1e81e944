"""The declared graph's tables (`entities`, `entity_aliases`, `entity_mentions`, `relations`:
storage/schema.py, the original CPersona 2.6's layout): recording a declaration, retracting
one, and the reads of traverse, of reconstruct's evidence and of export, import and merge.

The rules — what a name is compared as, which scopes a declaration reuses, what an endpoint
may be — are applied above (policy/associations.py, service/declaring.py); this repository
writes and reads what it is given. No foreign keys: the delete triggers of schema.py take a
declaration with the entity or record it names. Reads are scoped like recall's
(`storage/scope.py`): the agent exactly, a project with the global pool, a channel with the
channel-less rows — the entity, the relation and both of its ends each inside the scope.

Statements are portable SQL (the PostgreSQL repository, postgres/associations.py, reuses them
through dialect.py) except the inserts (`INSERT OR IGNORE`, `lastrowid`) and the mentions'
join to their records, which it writes for itself.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import replace

from cpersona.storage.memories import row_filter
from cpersona.storage.records import RECORD_TABLES, Edge, Entity, EntityDraft, Graph, Mention, Relation
from cpersona.storage.scope import Scope

#: Ids bound per statement (SQLite's default limit is 32,766 variables; two lists per edge query).
BATCH = 250
ENTITY_COLUMNS = "e.id, e.agent_id, e.project_id, e.channel, e.name, e.declared_by, e.created_at"
RELATION_COLUMNS = ("r.id, r.agent_id, r.project_id, r.channel, r.subject_kind, r.subject_id, r.predicate, "
                    "r.object_kind, r.object_id, r.anchor_ref, r.declared_by, r.declared_at")
_RELATION_KEY = ("agent_id", "project_id", "channel", "subject_kind", "subject_id", "predicate", "object_kind",
                 "object_id", "anchor_ref")


def batches(ids: Iterable, size: int = BATCH) -> Iterator[list]:
    """`ids` in lists of at most `size`."""
    items = list(ids)
    for start in range(0, len(items), size):
        yield items[start:start + size]


def marks(items: list) -> str:
    return ",".join("?" * len(items))


def by_kind(refs: Iterable[str]) -> dict[str, list[int]]:
    """Canonical record refs grouped by kind: {"mem": [ids], "ep": [ids]}."""
    out: dict[str, list[int]] = {}
    for ref in refs:
        kind, _, number = ref.partition(":")
        if kind in RECORD_TABLES and number.isdigit():
            out.setdefault(kind, []).append(int(number))
    return out


class AssociationRepo:
    """The declared graph over one connection (inside the caller's transaction)."""

    #: An insert that does nothing when a key is taken (head, tail of the statement).
    IGNORE = ("INSERT OR IGNORE INTO", "")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # ------------------------------------------------------------------ writes
    def resolve(self, agent: str, project: str, channel: str, normalized: str) -> int | None:
        """The entity of exactly this scope whose name or one of whose aliases normalises to
        `normalized` (the lowest id), or None."""
        found = self._matching("e.agent_id = ? AND e.project_id = ? AND e.channel = ?", [agent, project, channel],
                               normalized, 1)
        return found[0] if found else None

    def insert_entity(self, d: EntityDraft) -> int:
        """Register an entity (its scope holds none of that normalised name); its id."""
        cur = self.conn.execute(
            "INSERT INTO entities (agent_id, project_id, channel, name, normalized, declared_by, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (d.agent_id, d.project_id, d.channel, d.name, d.normalized, d.declared_by, d.created_at))
        return int(cur.lastrowid or 0)

    def add_alias(self, entity_id: int, alias: str, normalized: str) -> None:
        """Attach an alias (kept as written; nothing when the entity has it already)."""
        head, tail = self.IGNORE
        self.conn.execute(f"{head} entity_aliases (entity_id, alias, normalized) VALUES (?, ?, ?){tail}",
                          (entity_id, alias, normalized))

    def add_mention(self, entity_id: int, ref: str, declared_by: str, created_at: str) -> None:
        """Record `ref` as mentioning the entity (nothing when it is recorded already)."""
        head, tail = self.IGNORE
        self.conn.execute(f"{head} entity_mentions (entity_id, ref, declared_by, created_at) VALUES (?, ?, ?, ?){tail}",
                          (entity_id, ref, declared_by, created_at))

    def add_relation(self, r: Relation) -> int:
        """Record a relation (`r.id` ignored); the id of the row holding it — an equal
        relation (same key) already recorded keeps its id and its declaration time."""
        key = [getattr(r, name) for name in _RELATION_KEY]
        head, tail = self.IGNORE
        self.conn.execute(f"{head} relations ({', '.join(_RELATION_KEY)}, declared_by, declared_at) "
                          f"VALUES ({marks(key)}, ?, ?){tail}", (*key, r.declared_by, r.declared_at))
        return self._relation_id(key)

    def _relation_id(self, key: list) -> int:
        where = " AND ".join(f"{name} = ?" for name in _RELATION_KEY)
        return int(self.conn.execute(f"SELECT id FROM relations WHERE {where}", key).fetchone()[0])

    def record_exists(self, kind: str, row_id: int, agent: str) -> bool:
        """Whether record `kind:row_id` (kind "mem" / "ep") exists and belongs to `agent`."""
        return self.conn.execute(f"SELECT 1 FROM {RECORD_TABLES[kind]} WHERE id = ? AND agent_id = ?",
                                 (row_id, agent)).fetchone() is not None

    def retract_relation(self, agent: str, relation_id: int) -> int:
        """Delete the agent's relation `relation_id`; rows deleted (0: absent or another agent's)."""
        return self.conn.execute("DELETE FROM relations WHERE id = ? AND agent_id = ?", (relation_id, agent)).rowcount

    def retract_mention(self, agent: str, entity_id: int, ref: str) -> int:
        """Delete the mention of the agent's entity `entity_id` by `ref`; rows deleted."""
        return self.conn.execute(
            "DELETE FROM entity_mentions WHERE entity_id = ? AND ref = ? "
            "AND entity_id IN (SELECT id FROM entities WHERE agent_id = ?)", (entity_id, ref, agent)).rowcount

    def forget(self, agent: str) -> None:
        """Delete every entity (its aliases and mentions follow by trigger) and relation of `agent`."""
        for table in ("entities", "relations"):
            self.conn.execute(f"DELETE FROM {table} WHERE agent_id = ?", (agent,))

    # ------------------------------------------------------------------ reads
    def find(self, scope: Scope, normalized: str) -> list[int]:
        """Ids of the entities inside `scope` named or aliased `normalized`, lowest first."""
        where, params = scope.predicate("e")
        return self._matching(where, params, normalized, None)

    def _matching(self, where: str, params: list, normalized: str, limit: int | None) -> list[int]:
        tail = "" if limit is None else f" LIMIT {int(limit)}"
        rows = self.conn.execute(
            f"SELECT e.id FROM entities e WHERE {where} AND e.normalized = ? UNION "
            f"SELECT e.id FROM entity_aliases a JOIN entities e ON e.id = a.entity_id WHERE {where} "
            f"AND a.normalized = ? ORDER BY 1{tail}", [*params, normalized, *params, normalized])
        return [int(r[0]) for r in rows]

    def edges(self, scope: Scope, entity_ids: Iterable[int]) -> list[Edge]:
        """The entity → entity relations inside `scope` touching any of `entity_ids` (either
        end), both of whose entities are inside `scope` too; by id."""
        where = " AND ".join(scope.predicate(alias)[0] for alias in ("r", "s", "o"))
        params = [p for alias in ("r", "s", "o") for p in scope.predicate(alias)[1]]
        found: dict[int, Edge] = {}
        for batch in batches(entity_ids):
            for row in self.conn.execute(
                    "SELECT r.id, r.subject_id, r.object_id, r.predicate, r.declared_at, r.anchor_ref, r.declared_by "
                    "FROM relations r JOIN entities s ON s.id = r.subject_id JOIN entities o ON o.id = r.object_id "
                    f"WHERE r.subject_kind = 'entity' AND r.object_kind = 'entity' AND {where} "
                    f"AND (r.subject_id IN ({marks(batch)}) OR r.object_id IN ({marks(batch)}))",
                    [*params, *batch, *batch]):
                found[int(row[0])] = Edge(int(row[0]), int(row[1]), int(row[2]), *row[3:])
        return [found[i] for i in sorted(found)]

    def entities(self, ids: Iterable[int]) -> dict[int, Entity]:
        """The entities of `ids` (absent ones left out), each with its aliases."""
        out: dict[int, Entity] = {}
        wanted = list(ids)
        for batch in batches(wanted):
            rows = self.conn.execute(f"SELECT {ENTITY_COLUMNS} FROM entities e WHERE e.id IN ({marks(batch)})", batch)
            out.update({int(r[0]): Entity(int(r[0]), *r[1:]) for r in rows})
        return self._with_aliases(out)

    def _with_aliases(self, found: dict[int, Entity]) -> dict[int, Entity]:
        aliases: dict[int, list[str]] = {}
        for batch in batches(found):
            for entity_id, alias in self.conn.execute(
                    f"SELECT entity_id, alias FROM entity_aliases WHERE entity_id IN ({marks(batch)}) "
                    "ORDER BY entity_id, normalized", batch):
                aliases.setdefault(int(entity_id), []).append(alias)
        return {i: replace(e, aliases=tuple(aliases.get(i, ()))) for i, e in found.items()}

    #: The memory id a mention's ref names (SQLite's CAST reads a malformed ref as 0: no row).
    MEMORY_ID = "CAST(substr(x.ref, 5) AS INTEGER)"
    EPISODE_ID = "CAST(substr(x.ref, 4) AS INTEGER)"

    def _memory_filter(self, scope: Scope, source_id: str) -> tuple[str, list]:
        """The WHERE clause (alias `m`, `?` markers) of the memories a recall may read."""
        return row_filter(scope, source_id)

    def mentioning(self, entity_id: int, scope: Scope, source_id: str, episodes: bool,
                   limit: int) -> tuple[list[str], int]:
        """(refs of the records inside `scope` — memories also matching `source_id`, episodes
        only when `episodes` — that mention the entity, lowest id first and at most `limit`;
        how many there are in all). Reads ids only."""
        m_where, m_params = self._memory_filter(scope, source_id)
        e_where, e_params = scope.predicate("t")
        parts = [("mem", f"FROM entity_mentions x JOIN memories m ON m.id = {self.MEMORY_ID} "
                         f"WHERE x.entity_id = ? AND x.ref LIKE 'mem:%' AND {m_where}", [entity_id, *m_params], "m")]
        if episodes:
            parts.append(("ep", f"FROM entity_mentions x JOIN episodes t ON t.id = {self.EPISODE_ID} "
                                f"WHERE x.entity_id = ? AND x.ref LIKE 'ep:%' AND {e_where}", [entity_id, *e_params],
                          "t"))
        found: list[tuple[int, str]] = []
        total = 0
        for kind, body, params, alias in parts:
            ids = [int(r[0]) for r in self.conn.execute(f"SELECT {alias}.id {body} ORDER BY {alias}.id LIMIT ?",
                                                        [*params, limit])]
            found += [(i, kind) for i in ids]
            total += len(ids) if len(ids) < limit else int(
                self.conn.execute(f"SELECT COUNT(*) {body}", params).fetchone()[0])
        found.sort()
        return [f"{kind}:{i}" for i, kind in found[:limit]], total

    # ------------------------------------------- reads about records (reconstruct, supersedes)
    def relations_of(self, scope: Scope, refs: Iterable[str]) -> list[Relation]:
        """The relations inside `scope` naming any of the records `refs` as subject, object or
        anchor; by id."""
        where, params = scope.predicate("r")
        found: dict[int, Relation] = {}
        wanted = list(refs)
        for kind, ids in by_kind(wanted).items():
            for batch in batches(ids):
                for column in ("subject", "object"):
                    self._collect(found, f"{where} AND r.{column}_kind = ? AND r.{column}_id IN ({marks(batch)})",
                                  [*params, kind, *batch])
        for batch in batches(wanted):
            self._collect(found, f"{where} AND r.anchor_ref IN ({marks(batch)})", [*params, *batch])
        return [found[i] for i in sorted(found)]

    def with_predicate(self, scope: Scope, predicate: str, objects: Iterable[str]) -> list[Relation]:
        """The relations inside `scope` with this (normalised) predicate whose object is one of
        the records `objects` (index `idx_relations_predicate_object`); by id."""
        where, params = scope.predicate("r")
        found: dict[int, Relation] = {}
        for kind, ids in by_kind(objects).items():
            for batch in batches(ids):
                self._collect(found, f"r.predicate = ? AND r.object_kind = ? AND r.object_id IN ({marks(batch)}) "
                                     f"AND {where}", [predicate, kind, *batch, *params])
        return [found[i] for i in sorted(found)]

    def _collect(self, into: dict[int, Relation], where: str, params: list) -> None:
        for row in self.conn.execute(f"SELECT {RELATION_COLUMNS} FROM relations r WHERE {where}", params):
            into[int(row[0])] = Relation(*row)

    def mentions_of(self, scope: Scope, refs: Iterable[str]) -> list[Mention]:
        """The mentions by the records `refs` of entities inside `scope`, by (ref, entity)."""
        where, params = scope.predicate("e")
        out: list[Mention] = []
        for batch in batches(refs):
            out += [Mention(int(r[0]), *r[1:]) for r in self.conn.execute(
                "SELECT x.entity_id, x.ref, x.declared_by, x.created_at FROM entity_mentions x "
                f"JOIN entities e ON e.id = x.entity_id WHERE x.ref IN ({marks(batch)}) AND {where}",
                [*batch, *params])]
        return sorted(out, key=lambda m: (m.ref, m.entity))

    # ------------------------------------------------------------ whole graphs
    def graph(self, agent: str | None) -> Graph:
        """Every declaration of `agent` (None = of every agent): entities with their aliases,
        mentions by (entity, ref), relations by id."""
        where, params = ("", []) if agent is None else (" WHERE e.agent_id = ?", [agent])
        rows = self.conn.execute(f"SELECT {ENTITY_COLUMNS} FROM entities e{where} ORDER BY e.id", params)
        entities = self._with_aliases({int(r[0]): Entity(int(r[0]), *r[1:]) for r in rows})
        mentions = [Mention(int(r[0]), *r[1:]) for r in self.conn.execute(
            "SELECT x.entity_id, x.ref, x.declared_by, x.created_at FROM entity_mentions x "
            f"JOIN entities e ON e.id = x.entity_id{where} ORDER BY x.entity_id, x.ref", params)]
        r_where = where.replace("e.", "r.")
        relations = [Relation(*r) for r in self.conn.execute(
            f"SELECT {RELATION_COLUMNS} FROM relations r{r_where} ORDER BY r.id", params)]
        return Graph(entities, mentions, relations)

    def count(self, agent: str | None) -> dict[str, int]:
        """{entities, mentions, relations} of `agent` (None = every agent)."""
        where, params = ("", []) if agent is None else (" WHERE e.agent_id = ?", [agent])
        return {
            "entities": self._scalar(f"SELECT COUNT(*) FROM entities e{where}", params),
            "mentions": self._scalar(f"SELECT COUNT(*) FROM entity_mentions x JOIN entities e ON e.id = x.entity_id"
                                     f"{where}", params),
            "relations": self._scalar(f"SELECT COUNT(*) FROM relations r{where.replace('e.', 'r.')}", params)}

    def _scalar(self, sql: str, params: list) -> int:
        return int(self.conn.execute(sql, params).fetchone()[0])
