"""Carrying declarations along with the records they name, when an import or a merge gives
those records new ids (and perhaps a new agent): one `carry` for both.

A declaration names its records by `mem:<id>` / `ep:<id>` — the ids they had where the graph
was read (the export file, the source agent). `refs` maps each such ref to the ref of the same
record here: the row written for it, or the equal row that was already here (a duplicate
skipped). A mention or relation naming a record the map does not hold — it did not come along
— is left out and counted, and so is one whose record is not its agent's. Each entity lands in
its own scope (its agent replaced by `agent` when given): on the entity of exactly that scope
its name already resolves to, or registered there with its name, author and time; its aliases
follow, except one that already names another entity its reader sees. Mentions and relations
already present are not written twice, so carrying a graph twice writes it once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpersona.policy import associations as rules
from cpersona.service.declaring import Declarer
from cpersona.storage.ports import Associations
from cpersona.storage.records import Graph, Relation


@dataclass
class Carried:
    """What `carry` wrote, and what it left out."""

    entities: int = 0
    mentions: int = 0
    relations: int = 0
    #: Entities, mentions and relations not written: malformed, or naming what did not come along.
    dropped: int = 0
    #: Aliases refused: each already names another entity of the same reader.
    aliases_dropped: int = 0
    entity_map: dict[int, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {"entities": self.entities, "mentions": self.mentions, "relations": self.relations}

    def notes(self) -> list[str]:
        """What an answer says about what was left out."""
        out = []
        if self.dropped:
            out.append(f"{self.dropped} declared associations were not carried: they are malformed, or name a "
                       "record or entity that did not come along")
        if self.aliases_dropped:
            out.append(f"{self.aliases_dropped} aliases were not carried: each already names another entity in "
                       "its scope")
        return out


@dataclass
class _Carry:
    repo: Associations
    refs: dict[str, str]
    agent: str
    now: str
    out: Carried = field(default_factory=Carried)
    owners: dict[int, str] = field(default_factory=dict)

    def record(self, owner: str, ref: str) -> tuple[str, int] | None:
        """(kind, id) here of the record `ref` named where the graph was read, when it came along
        and is `owner`'s."""
        here = rules.parse_ref(self.refs.get(rules.canonical_ref(ref) or ""))
        if here is None or not self.repo.record_exists(here[0], here[1], owner):
            return None
        return here

    def entities(self, graph: Graph) -> None:
        for old_id, entity in graph.entities.items():
            owner = self.agent or entity.agent_id
            name = rules.text(entity.name)
            if name is None or not owner or entity.declared_by not in rules.DECLARED_BY:
                self.out.dropped += 1
                continue
            declarer = Declarer(self.repo, owner, entity.project_id, entity.channel, entity.declared_by, self.now)
            new_id, _ = declarer.register(name, exact=True, created_at=entity.created_at)
            self.out.entity_map[old_id] = new_id
            self.owners[old_id] = owner
            self.out.entities += 1
            for alias in entity.aliases:
                clean = rules.text(alias)
                if clean is None or declarer.alias(new_id, clean) is not None:
                    self.out.aliases_dropped += 1

    def mentions(self, graph: Graph) -> None:
        for mention in graph.mentions:
            entity = self.out.entity_map.get(mention.entity)
            here = self.record(self.owners[mention.entity], mention.ref) if entity is not None else None
            if entity is None or here is None or mention.declared_by not in rules.DECLARED_BY:
                self.out.dropped += 1
                continue
            self.repo.add_mention(entity, f"{here[0]}:{here[1]}", mention.declared_by, mention.created_at or self.now)
            self.out.mentions += 1

    def end(self, owner: str, kind: str, end_id: int) -> tuple[str, int] | None:
        if kind == "entity":
            mapped = self.out.entity_map.get(end_id)
            return None if mapped is None else ("entity", mapped)
        return self.record(owner, f"{kind}:{end_id}") if kind in ("mem", "ep") else None

    def anchor(self, owner: str, ref: str) -> str | None:
        """The anchor here: '' for none, the record's ref here, None when it did not come along."""
        if not ref:
            return ""
        here = self.record(owner, ref)
        return None if here is None else f"{here[0]}:{here[1]}"

    def relations(self, graph: Graph) -> None:
        for r in graph.relations:
            owner = self.agent or r.agent_id
            predicate = rules.text(r.predicate)
            subject, obj = self.end(owner, r.subject_kind, r.subject_id), self.end(owner, r.object_kind, r.object_id)
            anchor = self.anchor(owner, r.anchor_ref)
            if subject is None or obj is None or anchor is None or predicate is None or not owner \
                    or r.declared_by not in rules.DECLARED_BY:
                self.out.dropped += 1
                continue
            self.repo.add_relation(Relation(0, owner, r.project_id, r.channel, *subject, rules.normalize(predicate),
                                            *obj, anchor, r.declared_by, r.declared_at or self.now))
            self.out.relations += 1


def carry(repo: Associations, graph: Graph, refs: dict[str, str], now: str, agent: str = "") -> Carried:
    """Write `graph` with its record refs mapped through `refs` (module doc), every declaration
    under `agent` when given; what was written and left out. Inside the caller's transaction."""
    run = _Carry(repo, refs, agent, now)
    run.entities(graph)
    run.mentions(graph)
    run.relations(graph)
    return run.out
