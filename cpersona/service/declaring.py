"""Writing declarations inside one write transaction: `Declarer` registers entities, aliases,
mentions and relations of one scope by the rules of policy/associations.py; `declare` and
`retract` run a whole call's object through it. Used by declare_associations, by
`store(associations=…)` and (entity registration, aliases) by import and merge
(service/carrying.py).

Rules (the original CPersona 2.6's):

* an entity is unique per (agent, project, channel) on its normalised name; names and aliases
  are one namespace, so a declaration reuses the entity its reader already resolves — searched
  in its own scope, then the wider ones it sees (`visible_scopes`); an entity declared WITH
  aliases is registered in its own scope (an alias added to a wider scope's entity would be
  read in every scope that entity is);
* an alias resolves to at most one entity a reader sees: a second claim is dropped;
* `anchor_ref` (a record of this agent) is recorded as a mention of every entity named and is
  the anchor of every relation;
* a relation's subject and object are each an entity name (registered when new) or a record
  ref of this agent; an equal relation (same ends, predicate, anchor, scope) is recorded once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpersona.policy import associations as rules
from cpersona.policy.associations import Dropped
from cpersona.storage.ports import Associations
from cpersona.storage.records import EntityDraft, Relation

#: What a declaration reports: {entities: [{id, name, created}], mentions, relations: [ids], dropped}.
Report = dict[str, Any]
NOT_A_RECORD = "is not a record of this agent"


def empty_report() -> Report:
    return {"entities": [], "mentions": 0, "relations": [], "dropped": []}


@dataclass
class Declarer:
    """Declarations of one agent in one (project, channel) scope, at one time, by one author."""

    repo: Associations
    agent: str
    project: str
    channel: str
    declared_by: str
    now: str
    dropped: list[Dropped] = field(default_factory=list)

    # ------------------------------------------------------------ entities
    def resolve(self, normalized: str, exact: bool = False) -> int | None:
        """The entity `normalized` names for a reader of this scope (most specific scope
        first), or — `exact` — in this scope alone."""
        scopes = rules.visible_scopes(self.project, self.channel)
        for project, channel in scopes[:1] if exact else scopes:
            found = self.repo.resolve(self.agent, project, channel, normalized)
            if found is not None:
                return found
        return None

    def register(self, name: str, exact: bool = False, created_at: str = "") -> tuple[int, bool]:
        """(the entity `name` resolves to, registered in this scope when there is none; created)."""
        normalized = rules.normalize(name)
        found = self.resolve(normalized, exact)
        if found is not None:
            return found, False
        draft = EntityDraft(self.agent, self.project, self.channel, name, normalized, self.declared_by,
                            created_at or self.now)
        return self.repo.insert_entity(draft), True

    def alias(self, entity_id: int, alias: str, write: bool = True) -> str | None:
        """Attach `alias` to the entity (unless `write` is False); why it cannot be, or None."""
        normalized = rules.normalize(alias)
        owner = self.resolve(normalized)
        if owner is not None and owner != entity_id:
            return "already names another entity in this scope"
        if write:
            self.repo.add_alias(entity_id, alias, normalized)
        return None

    # --------------------------------------------------------------- records
    def record(self, value: Any) -> tuple[str, int] | None:
        """(kind, id) when `value` is a ref of a record of this agent, else None."""
        parsed = rules.parse_ref(value)
        if parsed is None or not self.repo.record_exists(parsed[0], parsed[1], self.agent):
            return None
        return parsed

    def anchor(self, value: Any) -> str:
        """The canonical ref of `anchor_ref` ('' when none given or when it names no record of
        this agent — reported)."""
        if not isinstance(value, str) or not value.strip():
            return ""
        if self.record(value) is None:
            self.dropped.append(Dropped("anchor_ref", f"{value.strip()} {NOT_A_RECORD}"))
            return ""
        return rules.canonical_ref(value) or ""

    def endpoint(self, value: Any) -> tuple[str, int] | str:
        """A relation end: (kind, id) of a record of this agent, or ("entity", id) of the
        entity the name resolves to (registered when new); else why not."""
        if rules.looks_like_ref(value):
            found = self.record(value)
            return found if found is not None else f"{value.strip()} {NOT_A_RECORD}"
        name = rules.text(value)
        if name is None:
            return "endpoint must be an entity name or a record ref"
        return "entity", self.register(name)[0]

    # ----------------------------------------------------------- one call
    def entities(self, items: Any, anchor: str, report: Report) -> None:
        for index, item in rules.bounded(items, "entities", self.dropped):
            checked = rules.entity_item(index, item, self.dropped)
            if checked is None:
                continue
            entity_id, created = self.register(checked.name, exact=checked.carries_aliases)
            label = f"entities[{index}].aliases"
            for a_index, alias in rules.bounded(checked.aliases, label, self.dropped, rules.MAX_ALIASES):
                clean = rules.text(alias)
                reason = rules.NOT_TEXT if clean is None else self.alias(entity_id, clean)
                if reason:
                    self.dropped.append(Dropped(f"{label}[{a_index}]", reason))
            if anchor:
                self.repo.add_mention(entity_id, anchor, self.declared_by, self.now)
                report["mentions"] += 1
            report["entities"].append({"id": entity_id, "name": checked.name, "created": created})

    def relations(self, items: Any, anchor: str, report: Report) -> None:
        for index, item in rules.bounded(items, "relations", self.dropped):
            checked = rules.relation_item(index, item, self.dropped)
            if checked is None:
                continue
            ends = []
            for side, value in (("subject", checked.subject), ("object", checked.object)):
                end = self.endpoint(value)
                if isinstance(end, str):
                    self.dropped.append(Dropped(f"relations[{index}].{side}", end))
                    break
                ends.append(end)
            if len(ends) < 2:
                continue
            (s_kind, s_id), (o_kind, o_id) = ends
            report["relations"].append(self.repo.add_relation(Relation(
                0, self.agent, self.project, self.channel, s_kind, s_id, checked.predicate, o_kind, o_id, anchor,
                self.declared_by, self.now)))


def declare(declarer: Declarer, associations: dict[str, Any], anchor_ref: Any) -> Report:
    """Record one `associations` object ({entities: [{name, aliases?}], relations: [{subject,
    predicate, object}]}) with `anchor_ref`; the report. Malformed items are reported in
    `dropped` and skipped, never raised."""
    report = empty_report()
    anchor = declarer.anchor(anchor_ref)
    declarer.entities(associations.get("entities"), anchor, report)
    declarer.relations(associations.get("relations"), anchor, report)
    report["dropped"] = [d.body() for d in declarer.dropped]
    return report


def retract(repo: Associations, agent: str, request: dict[str, Any]) -> tuple[dict[str, int], list[Dropped]]:
    """Remove the agent's relations `request["relations"]` (ids) and mentions
    `request["mentions"]` ([{entity, ref}]); ({relations, mentions} removed, items dropped).
    An id of another agent's declaration removes nothing."""
    dropped: list[Dropped] = []
    done = {"relations": 0, "mentions": 0}
    for index, relation_id in rules.bounded(request.get("relations"), "retract.relations", dropped):
        if rules.is_id(relation_id):
            done["relations"] += repo.retract_relation(agent, relation_id)
        else:
            dropped.append(Dropped(f"retract.relations[{index}]", "must be an integer id"))
    for index, item in rules.bounded(request.get("mentions"), "retract.mentions", dropped):
        mention = rules.mention_item(index, item, dropped)
        if mention is not None:
            done["mentions"] += repo.retract_mention(agent, *mention)
    return done, dropped
