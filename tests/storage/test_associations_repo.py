"""The declared graph's repository on both backends: what it records once, what the delete
triggers take with an entity or a record, scoped reads (recall's isolation axes, source_id,
episodes), the reads by record and by (predicate, object), and the copy of `cpersona migrate`
(entities' aliases and mentions move in whole groups)."""

from __future__ import annotations

from cpersona.storage.records import EntityDraft, EpisodeDraft, MemoryDraft, Relation
from cpersona.storage.scope import Scope

NOW = "2026-12-03T10:00:00+00:00"


def _memory(s, content: str, agent: str = "kai", project: str = "", channel: str = "", source: str = "{}") -> int:
    ref = s.memories.insert(MemoryDraft(agent, project, channel, "", content, source, NOW, "{}"), None)
    return ref.id


def _entity(s, name: str, agent: str = "kai", project: str = "", channel: str = "") -> int:
    return s.associations.insert_entity(EntityDraft(agent, project, channel, name, name.lower(), "agent", NOW))


def _relation(s, subject: tuple[str, int], predicate: str, obj: tuple[str, int], anchor: str = "",
              agent: str = "kai", project: str = "", channel: str = "", at: str = NOW) -> int:
    return s.associations.add_relation(Relation(0, agent, project, channel, *subject, predicate, *obj, anchor,
                                                "agent", at))


def test_a_declaration_is_recorded_once(db):
    with db.write() as s:
        m = _memory(s, "Aiko leads payments.")
        aiko, team = _entity(s, "Aiko"), _entity(s, "Payments")
        first = _relation(s, ("entity", aiko), "leads", ("entity", team), f"mem:{m}")
        again = _relation(s, ("entity", aiko), "leads", ("entity", team), f"mem:{m}", at="2027-01-01")
        other = _relation(s, ("entity", aiko), "leads", ("entity", team))  # no anchor: another declaration
        for _ in range(2):
            s.associations.add_alias(aiko, "Aiko Tanaka", "aiko tanaka")
            s.associations.add_mention(aiko, f"mem:{m}", "agent", NOW)
    assert first == again != other
    with db.read() as s:
        graph = s.associations.graph("kai")
        assert graph.counts() == {"entities": 2, "mentions": 1, "relations": 2}
        assert graph.entities[aiko].aliases == ("Aiko Tanaka",)
        assert graph.relations[0].declared_at == NOW  # the first declaration's time is kept
        assert s.associations.resolve("kai", "", "", "aiko tanaka") == aiko  # an alias resolves
        assert s.associations.resolve("kai", "x", "", "aiko") is None  # exactly this scope only
        assert s.associations.find(Scope("kai", "x"), "aiko") == [aiko]  # a reader of x sees the global pool
        assert s.associations.record_exists("mem", m, "kai") and not s.associations.record_exists("mem", m, "mika")


def test_deleting_an_entity_or_a_record_takes_its_declarations(db):
    with db.write() as s:
        m1, m2 = _memory(s, "one"), _memory(s, "two")
        ep = s.episodes.insert(EpisodeDraft("kai", "", "", "a session", "", None, None, False), None).id
        a, b, c = _entity(s, "A"), _entity(s, "B"), _entity(s, "C")
        s.associations.add_alias(a, "Alpha", "alpha")
        for entity, ref in ((a, f"mem:{m1}"), (b, f"mem:{m2}"), (c, f"ep:{ep}")):
            s.associations.add_mention(entity, ref, "agent", NOW)
        keep = _relation(s, ("entity", b), "knows", ("entity", c), f"mem:{m2}")
        _relation(s, ("entity", a), "knows", ("entity", b))  # goes with entity a
        _relation(s, ("mem", m2), "supersedes", ("mem", m1))  # goes with memory m1
        _relation(s, ("entity", b), "cites", ("entity", c), f"ep:{ep}")  # goes with the episode (its anchor)
    with db.write() as s:
        s.memories.delete(m1, None)
        s.episodes.delete(ep, None)
        s.associations.forget("nobody")
    with db.write() as s:  # no tool deletes one entity; the trigger guards every other path (delete_agent_data…)
        s.conn.execute(f"DELETE FROM entities WHERE id = {'?' if db.backend == 'sqlite' else '%s'}", (a,))
    with db.read() as s:
        graph = s.associations.graph("kai")
        assert [r.id for r in graph.relations] == [keep]
        assert [(m.entity, m.ref) for m in graph.mentions] == [(b, f"mem:{m2}")]
        assert set(graph.entities) == {b, c} and s.associations.count(None)["entities"] == 2
    with db.write() as s:
        s.associations.forget("kai")
    with db.read() as s:
        assert s.associations.count(None) == {"entities": 0, "mentions": 0, "relations": 0}


def test_retract_touches_only_the_agents_own(db):
    with db.write() as s:
        m = _memory(s, "mine")
        a, b = _entity(s, "A"), _entity(s, "B", agent="mika")
        s.associations.add_mention(a, f"mem:{m}", "agent", NOW)
        r = _relation(s, ("entity", a), "knows", ("entity", a))
    with db.write() as s:
        assert s.associations.retract_relation("mika", r) == 0
        assert s.associations.retract_mention("mika", a, f"mem:{m}") == 0
        assert s.associations.retract_mention("kai", b, f"mem:{m}") == 0
        assert s.associations.retract_relation("kai", r) == 1
        assert s.associations.retract_mention("kai", a, f"mem:{m}") == 1


def test_reads_are_scoped_as_recall_is(db):
    with db.write() as s:
        global_m = _memory(s, "global", source='{"type": "User", "id": "discord:aiko"}')
        ops_m = _memory(s, "in ops", project="ops")
        chan_m = _memory(s, "in #web", channel="#web")
        ep = s.episodes.insert(EpisodeDraft("kai", "", "", "a session", "", None, None, False), None).id
        team, stripe, web = _entity(s, "team"), _entity(s, "stripe", project="ops"), _entity(s, "web", channel="#web")
        for ref in (f"mem:{global_m}", f"mem:{ops_m}", f"mem:{chan_m}", f"ep:{ep}", "mem:abc", "mem:999"):
            s.associations.add_mention(team, ref, "agent", NOW)
        to_stripe = _relation(s, ("entity", team), "pays", ("entity", stripe), project="ops")
        to_web = _relation(s, ("entity", team), "runs", ("entity", web), channel="#web")
        _relation(s, ("entity", team), "pays", ("entity", stripe))  # a global relation to an ops entity
    with db.read() as s:
        repo = s.associations
        # lowest id first, an episode before the memory of the same id (the original's order)
        assert repo.mentioning(team, Scope("kai"), "", True, 10) == (
            [f"ep:{ep}", f"mem:{global_m}", f"mem:{ops_m}", f"mem:{chan_m}"], 4)
        assert repo.mentioning(team, Scope("kai", ""), "", True, 10)[0] == [f"ep:{ep}", f"mem:{global_m}",
                                                                          f"mem:{chan_m}"]
        assert repo.mentioning(team, Scope("kai", None, "#web"), "", True, 2) == ([f"ep:{ep}", f"mem:{global_m}"], 4)
        assert repo.mentioning(team, Scope("kai"), "discord:aiko", False, 10) == ([f"mem:{global_m}"], 1)
        assert repo.mentioning(team, Scope("mika"), "", True, 10) == ([], 0)
        assert [e.id for e in repo.edges(Scope("kai"), [team])][:2] == [to_stripe, to_web]
        assert {e.object for e in repo.edges(Scope("kai", ""), [team])} == {web}  # stripe is in project ops
        assert {e.id for e in repo.edges(Scope("kai", "ops"), [team])} == {to_stripe, to_web, to_stripe + 2}
        assert {e.id for e in repo.edges(Scope("kai", None, "#ops"), [team])} == {to_stripe, to_stripe + 2}


def test_reads_by_record_and_by_predicate_and_object(db):
    with db.write() as s:
        old, new, other = _memory(s, "old"), _memory(s, "new"), _memory(s, "other")
        team = _entity(s, "team")
        s.associations.add_mention(team, f"mem:{new}", "agent", NOW)
        sup = _relation(s, ("mem", new), "supersedes", ("mem", old), f"mem:{new}")
        cites = _relation(s, ("mem", other), "cites", ("mem", old))
        anchored = _relation(s, ("entity", team), "owns", ("entity", team), f"mem:{other}")
        _relation(s, ("mem", new), "supersedes", ("mem", old), agent="mika")  # another agent's
    with db.read() as s:
        repo = s.associations
        assert [r.id for r in repo.with_predicate(Scope("kai"), "supersedes", [f"mem:{old}", "mem:999"])] == [sup]
        assert repo.with_predicate(Scope("kai"), "supersedes", [f"mem:{new}"]) == []
        assert [r.id for r in repo.relations_of(Scope("kai"), [f"mem:{old}"])] == [sup, cites]
        assert [r.id for r in repo.relations_of(Scope("kai"), [f"mem:{other}"])] == [cites, anchored]
        assert [(m.ref, m.entity) for m in repo.mentions_of(Scope("kai"), [f"mem:{new}", f"mem:{old}"])] == [
            (f"mem:{new}", team)]
        relation = repo.relations_of(Scope("kai"), [f"mem:{new}"])[0]
        assert (relation.subject_ref, relation.object_ref) == (f"mem:{new}", f"mem:{old}")


def test_the_copy_moves_an_entitys_aliases_and_mentions_in_one_batch(db):
    with db.write() as s:
        m = _memory(s, "m")
        for i in range(5):
            e = _entity(s, f"e{i}")
            for j in range(3):
                s.associations.add_alias(e, f"alias {i}.{j}", f"alias {i}.{j}")
            s.associations.add_mention(e, f"mem:{m}", "agent", NOW)
    with db.read() as s:
        first, second = s.transfer.rows("entity_aliases", 0, 2), s.transfer.rows("entity_aliases", 2, 2)
        assert [r[0] for r in first] == [1, 1, 1, 2, 2, 2] and [r[0] for r in second] == [3, 3, 3, 4, 4, 4]
        assert s.transfer.max_id("entity_aliases") == 5 and s.transfer.count("entity_mentions") == 5
        assert len(s.transfer.rows("relations", 0, 10)) == 0 and s.transfer.max_id("entities") == 5
