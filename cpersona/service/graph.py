"""Reading the declared graph: the traverse tool, and the reads other services build on —
the declared relations touching a set of records with the roles of their predicates
(reconstruct's evidence), the rows a `supersedes` declaration names as replaced, the walk
from entities to the records that mention what they reach.

Every read is scoped as recall is (storage/scope.py): the agent exactly, `project_id` None =
every project, '' = the global pool only, 'X' = X and the global pool; `channel` 'X' = X
and the channel-less rows ('' = every channel) — each entity and relation, and both ends of
a relation, inside that scope; a record listed only when the call could read it directly
(its memory also matching `source_id`; episodes only without `source_id` or with a channel,
as recall returns them). Nothing is inferred: with nothing declared every read is empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cpersona.policy import associations as rules
from cpersona.policy import validate
from cpersona.retrieval.neighbourhood import Neighbourhood, walk
from cpersona.retrieval.retrievers import Query
from cpersona.service.outcomes import Report
from cpersona.service.steps import Steps
from cpersona.storage import Database, Session
from cpersona.storage.records import Relation
from cpersona.storage.scope import Scope

#: traverse's bounds: relations followed from the entity, entities (and refs per entity) returned.
MAX_HOPS = 5
MAX_LIMIT = 100
#: Predicates a record → record declaration may carry that reconstruct reads as roles: what the
#: SUBJECT record is to the OBJECT record ("mem:9 supersedes mem:4": mem:9 replaces mem:4).
ROLES = ("supports", "supersedes", "corrects", "qualifies", "contradicts", "temporal_predecessor")


def role(predicate: str) -> str | None:
    """The role a (normalised) predicate names, or None for any other predicate."""
    return predicate if predicate in ROLES else None


@dataclass(frozen=True)
class Link:
    """A declared record → record relation: `subject` is to `object` what `role` says (None:
    a predicate outside ROLES, kept verbatim in `predicate`)."""

    relation_id: int
    subject: str
    predicate: str
    object: str
    role: str | None
    anchor_ref: str
    declared_at: str


@dataclass(frozen=True)
class Evidence:
    """The declarations touching a set of records (`GraphService.evidence`).

    `links`: record → record relations with at least one end in the set (the other end may be
    outside it: the caller decides whether to follow), by relation id. `mentions`: each record
    of the set → the entities it mentions (declared mentions and, through `anchored`, the
    entity → entity relations anchored on it). `anchored`: each record → the relations whose
    `anchor_ref` it is.
    """

    links: list[Link] = field(default_factory=list)
    mentions: dict[str, list[int]] = field(default_factory=dict)
    anchored: dict[str, list[Relation]] = field(default_factory=dict)


def scope_of(agent_id: str, project_id: str | None, channel: str) -> Scope:
    """The recall scope of a graph read."""
    return Scope(agent_id, project_id, channel)


@dataclass(frozen=True, eq=False)
class GraphService:
    """traverse and the graph reads of other services, over the database."""

    db: Database
    steps: Steps

    # ------------------------------------------------------------- traverse
    def traverse(self, agent_id: object, entity: object, max_hops: object = 1, limit: object = 20,
                 channel: object = "", project_id: object = None, source_id: object = "") -> Report:
        """The neighbourhood of a declared entity (module doc for the scope): the entities named
        or aliased `entity` (all of them are starts), breadth first over entity → entity
        relations in either direction up to `max_hops` (0..5), at most `limit` (1..100)
        entities ordered by hops, then the most recent relation that reached them, then id; each
        with its aliases and the refs of the readable records mentioning it (lowest id first,
        ≤ `limit`); the relations between them, most recently declared first. Returns {ok, entity,
        max_hops, limit, entities: [{id, name, hops, aliases?, mentions?, mentions_omitted?}],
        relations: [{id, subject, predicate, object, declared_by, declared_at, anchor_ref?}],
        entities_omitted?, bounds?: {omitted: [max_hops | limit]}, reason?: "no_such_entity"}.
        Raises InvalidArgument."""
        return self.steps.gated("traverse", agent_id, project_id, False, lambda project: self._traverse(
            agent_id, entity, max_hops, limit, channel, project, source_id))

    def _traverse(self, agent_id: object, entity: object, max_hops: object, limit: object, channel: object,
                  project_id: object, source_id: object) -> Report:
        name = validate.text("entity", entity, max_chars=4 * rules.MAX_TEXT)
        hops = validate.limit("max_hops", max_hops, maximum=MAX_HOPS, minimum=0)
        cap = validate.limit("limit", limit, maximum=MAX_LIMIT)
        scope = scope_of(validate.identifier("agent_id", agent_id),
                         validate.identifier("project_id", project_id, allow_none=True),
                         validate.identifier("channel", channel))
        source = validate.identifier("source_id", source_id)
        out: Report = {"ok": True, "entity": name, "max_hops": hops, "limit": cap, "entities": [], "relations": []}
        self.steps.refresh_if_changed()
        with self.db.snapshot() as s:
            starts = s.associations.find(scope, rules.normalize(name)) if rules.normalize(name) else []
            if not starts:
                return {**out, "reason": "no_such_entity"}
            found = walk(starts, hops, lambda ids: s.associations.edges(scope, ids))
            order = found.order()
            kept = order[:cap]
            cut = self._entities(s, found, kept, scope, source, cap, out)
        omitted = ["max_hops"] if found.unexpanded() else []
        if len(order) > len(kept):
            out["entities_omitted"] = len(order) - len(kept)
        if len(order) > len(kept) or cut:
            omitted.append("limit")
        if omitted:
            out["bounds"] = {"omitted": omitted}
        return out

    @staticmethod
    def _entities(s: Session, found: Neighbourhood, kept: list[int], scope: Scope, source: str, cap: int,
                  out: Report) -> bool:
        """Fill `entities` and `relations` of `out`; whether a mention list was cut."""
        named = s.associations.entities(kept)
        episodes = Query("", scope, cap, source).episodes_allowed
        cut = False
        for entity_id in kept:
            entry: dict[str, Any] = {"id": entity_id, "name": named[entity_id].name, "hops": found.distance[entity_id]}
            if named[entity_id].aliases:
                entry["aliases"] = list(named[entity_id].aliases)
            refs, total = s.associations.mentioning(entity_id, scope, source, episodes, cap)
            if refs:
                entry["mentions"] = refs
            if total > len(refs):
                entry["mentions_omitted"] = total - len(refs)
                cut = True
            out["entities"].append(entry)
        for edge in found.newest_first(set(kept)):
            relation = {"id": edge.id, "subject": edge.subject, "predicate": edge.predicate, "object": edge.object,
                        "declared_by": edge.declared_by, "declared_at": edge.declared_at}
            if edge.anchor_ref:
                relation["anchor_ref"] = edge.anchor_ref
            out["relations"].append(relation)
        return cut

    # ------------------------------------------------ reads for other services
    def evidence(self, scope: Scope, refs: Iterable[str]) -> Evidence:
        """The declarations touching the records `refs` (canonical `mem:<id>` / `ep:<id>`) inside
        `scope` — the evidence reconstruct walks (see `Evidence`). One snapshot."""
        wanted = sorted({r for r in (rules.canonical_ref(ref) for ref in refs) if r})
        out = Evidence()
        with self.db.snapshot() as s:
            for relation in s.associations.relations_of(scope, wanted):
                if relation.subject_ref and relation.object_ref:
                    out.links.append(Link(relation.id, relation.subject_ref, relation.predicate, relation.object_ref,
                                          role(relation.predicate), relation.anchor_ref, relation.declared_at))
                if relation.anchor_ref in wanted:
                    out.anchored.setdefault(relation.anchor_ref, []).append(relation)
            for mention in s.associations.mentions_of(scope, wanted):
                out.mentions.setdefault(mention.ref, []).append(mention.entity)
        return out

    def superseded(self, scope: Scope, refs: Iterable[str]) -> dict[str, list[str]]:
        """Of the records `refs`, those a declared `supersedes` relation inside `scope` names as
        replaced: old ref → the refs of the records declared to supersede it (by relation id).
        One index range per batch of refs (`idx_relations_predicate_object`)."""
        wanted = [r for r in (rules.canonical_ref(ref) for ref in refs) if r]
        out: dict[str, list[str]] = {}
        with self.db.read() as s:
            for relation in s.associations.with_predicate(scope, "supersedes", wanted):
                if relation.subject_ref and relation.object_ref:
                    out.setdefault(relation.object_ref, []).append(relation.subject_ref)
        return out

    def neighbourhood(self, scope: Scope, entity_ids: Iterable[int], max_hops: int) -> Neighbourhood:
        """The walk from `entity_ids` over entity → entity relations inside `scope`
        (retrieval/neighbourhood.py: order, bounds)."""
        with self.db.snapshot() as s:
            return walk(entity_ids, max_hops, lambda ids: s.associations.edges(scope, ids))

    def records_mentioning(self, scope: Scope, entity_ids: Iterable[int], source_id: str = "",
                           per_entity: int = MAX_LIMIT) -> dict[int, tuple[list[str], int]]:
        """entity → (refs of the records inside `scope` the call could read that mention it,
        lowest id first, at most `per_entity`; how many there are)."""
        episodes = Query("", scope, per_entity, source_id).episodes_allowed
        with self.db.snapshot() as s:
            return {e: s.associations.mentioning(e, scope, source_id, episodes, per_entity) for e in entity_ids}
