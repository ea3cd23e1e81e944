"""Managing memory in the core: update, delete,
lock/unlock, delete_episode, delete_agent_data, listings, and the process-wide pause."""

from __future__ import annotations

import pytest
from cpersona.devtools.fake_embed import fake_vector
from cpersona.errors import InvalidArgument
from cpersona.service.requests import RecallRequest
from cpersona.storage.codec import to_blob
from cpersona.storage.scope import Scope
from cpersona.storage.tasks import embed_payload

from conftest import db_rows

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


def fts_ids(eng, phrase: str) -> list[int]:
    """Ids the trigram index finds for `phrase` (FTS5, or pg_trgm on PostgreSQL), every agent."""
    with eng.db.read() as s:
        return sorted(r.id for r, _ in s.search.memories_fts(f'"{phrase}"', Scope(None, None, None), "", 1000))


def episode_hits(eng, phrase: str) -> int:
    with eng.db.read() as s:
        return len(s.search.episodes_fts(f'"{phrase}"', Scope(None, None, None), 1000))


def row(eng, memory_id: int):
    rows = db_rows(eng.db.path, "SELECT content, msg_id, source, timestamp, channel, project_id, locked, embedding "
                                "FROM memories WHERE id = ?", (memory_id,))
    return rows[0] if rows else None


def tasks(eng) -> list[tuple]:
    return db_rows(eng.db.path, "SELECT task_type, agent_id, payload, status FROM pending_memory_tasks ORDER BY id")


# ------------------------------------------------------------------ update_memory
def test_update_replaces_content_keeps_identity_and_reindexes_fts(engine_none):
    eng = engine_none
    mid = eng.store("a", "the deploy window is friday", msg_id="m-1", source={"type": "User", "id": "u1", "name": "Aki"},
                    timestamp="2026-06-01T10:00:00Z", channel="ops", project_id="P")["id"]
    before = row(eng, mid)
    assert eng.update_memory(mid, "the deploy window is thursday", "a") == {"ok": True, "updated_id": mid, "embedded": False}
    after = row(eng, mid)
    assert after[0] == "the deploy window is thursday"
    assert after[1:7] == before[1:7]  # msg_id, source, timestamp, channel, project, locked unchanged
    assert fts_ids(eng, "thursday") == [mid] and fts_ids(eng, "friday") == []
    assert [m["content"] for m in eng.recall(RecallRequest("a", "deploy window thursday"))["messages"]] == [after[0]]
    # agent_id omitted or '' = no ownership check
    assert eng.update_memory(mid, "window: thursday 18:00")["ok"] is True
    assert eng.update_memory(mid, "window: thursday 19:00", "")["ok"] is True


def test_update_refusals(engine_none):
    eng = engine_none
    a = eng.store("a", "first fact")["id"]
    b = eng.store("a", "second fact")["id"]
    assert eng.update_memory(999, "x") == {"ok": False, "error": "memory 999 not found"}
    assert eng.update_memory(a, "x", "b") == {"ok": False, "error": "memory 1 is not owned by agent 'b'"}
    # same exact content as another memory of the same agent/project/channel → refused, nothing changed
    clash = eng.update_memory(a, "second fact")
    assert clash["ok"] is False and f"memory {b}" in clash["error"]
    assert row(eng, a)[0] == "first fact"
    eng.lock_memory(a)
    assert eng.update_memory(a, "x") == {"ok": False, "error": "memory 1 is locked; call unlock_memory first"}
    # ownership before the lock: another agent cannot unlock it, so "locked" would name a fix it cannot apply
    assert eng.update_memory(a, "x", "b") == {"ok": False, "error": "memory 1 is not owned by agent 'b'"}
    assert row(eng, a)[0] == "first fact"
    for bad_id in (0, -1, True, "ep:1", "mem:x", "1.5", 1.5):
        with pytest.raises(InvalidArgument, match="memory_id"):
            eng.update_memory(bad_id, "x")
    for bad in ("", "   ", None, 5):
        with pytest.raises(InvalidArgument, match="content"):
            eng.update_memory(b, bad)
    cap = eng.settings.max_content_length
    c = eng.store("a", "third fact")["id"]
    cut = eng.update_memory(f"mem:{c}", "y" * (cap + 1))  # too long: cut to the cap, and said so
    assert cut["ok"] is True and cut["truncated"] is True and cut["original_length"] == {"content": cap + 1}
    assert len(row(eng, c)[0]) == cap
    long_text = "z" * (cap + 7)  # stored cut; the same over-long text again is a duplicate of the CUT text
    kept = eng.store("a", long_text)
    again = eng.store("a", long_text)
    assert kept["truncated"] is True and sum(kept["original_length"].values()) == cap + 7 and again == {"ok": True, "result": "skipped", "reason": "duplicate content",
                                                   "id": kept["id"], "truncated": True,
                                                   "original_length": kept["original_length"], "max_length": cap}
    with pytest.raises(InvalidArgument, match="empty after removing"):
        eng.update_memory(b, "[Memory from kai] ")
    assert row(eng, b)[0] == "second fact"


def test_update_reembeds_and_moves_the_vector(engine_http):
    eng = engine_http
    mid = eng.store("a", "she runs a marathon every spring")["id"]
    assert eng.recall(RecallRequest("a", "running marathons", deep=True))["messages"]
    res = eng.update_memory(mid, "he bakes sourdough bread on sundays")
    assert res == {"ok": True, "updated_id": mid, "embedded": True}
    assert row(eng, mid)[7] == to_blob(fake_vector("he bakes sourdough bread on sundays"))
    # the resident index holds the new vector only: the old meaning no longer matches
    assert eng.recall(RecallRequest("a", "running marathons", deep=True))["messages"] == []
    hit = eng.recall(RecallRequest("a", "baking bread", deep=True))["messages"]
    assert [m["ref"] for m in hit] == [f"mem:{mid}"]


def test_update_while_endpoint_down_queues_the_new_text(http_engine_factory, fake_embed):
    eng = http_engine_factory(task_queue_enabled=False)  # drive the queue by hand
    mid = eng.store("a", "original text about gardening")["id"]
    fake_embed.fail = True
    assert eng.update_memory(mid, "replacement text about sailing")["embedded"] is False
    assert row(eng, mid)[7] is None  # the old vector never outlives its text
    assert tasks(eng) == [("embed", "a", embed_payload("memories", mid), "pending")]
    fake_embed.fail = False
    eng.queue.run_once()
    assert row(eng, mid)[7] == to_blob(fake_vector("replacement text about sailing"))
    assert tasks(eng) == []


# ------------------------------------------------------------------ delete_memory
def test_delete_memory(engine_none):
    eng = engine_none
    a = eng.store("a", "obsolete fact one")["id"]
    b = eng.store("a", "kept fact two")["id"]
    assert eng.delete_memory(a, "b") == {"ok": False, "error": f"memory {a} is not owned by agent 'b'"}
    assert eng.delete_memory(a, "a") == {"ok": True, "deleted_id": a}
    assert row(eng, a) is None and fts_ids(eng, "obsolete") == []
    assert eng.delete_memory(a) == {"ok": False, "error": f"memory {a} not found"}
    eng.lock_memory(b)
    assert eng.delete_memory(b)["error"] == f"memory {b} is locked; call unlock_memory first"
    assert eng.delete_memory(b, "zzz") == {"ok": False, "error": f"memory {b} is not owned by agent 'zzz'"}
    eng.unlock_memory(b)
    assert eng.delete_memory(b) == {"ok": True, "deleted_id": b}
    with pytest.raises(InvalidArgument, match="agent_id"):
        eng.delete_memory(1, 7)


def test_delete_memory_forgets_vector_and_queued_task(http_engine_factory, fake_embed):
    eng = http_engine_factory(task_queue_enabled=False)
    kept = eng.store("a", "marathon training plan for runners")["id"]
    assert eng.recall(RecallRequest("a", "running marathons", deep=True))["messages"]
    assert len(eng.steps.indexes()["memories"]) == 1
    assert eng.delete_memory(kept)["ok"] is True
    assert len(eng.steps.indexes()["memories"]) == 0
    fake_embed.fail = True
    queued = eng.store("a", "stored while down")["id"]
    assert len(tasks(eng)) == 1
    assert eng.delete_memory(queued)["ok"] is True
    assert tasks(eng) == []


# ------------------------------------------------------------------ lock / unlock
def test_lock_is_protection_not_a_boost(engine_none):
    eng = engine_none
    ids = [eng.store("a", f"alpha note {w}")["id"] for w in ("red", "green", "blue")]
    before = eng.recall(RecallRequest("a", "alpha note"))["messages"]
    for i in ids:
        assert eng.lock_memory(i, "a") == {"ok": True, "locked_id": i}
        assert eng.lock_memory(i) == {"ok": True, "locked_id": i}  # idempotent
    assert eng.recall(RecallRequest("a", "alpha note"))["messages"] == before
    assert [m["locked"] for m in eng.list_memories("a")["memories"]] == [True, True, True]
    assert eng.lock_memory(ids[0], "b") == {"ok": False, "error": f"memory {ids[0]} is not owned by agent 'b'"}
    assert eng.unlock_memory(99) == {"ok": False, "error": "memory 99 not found"}
    assert eng.unlock_memory(ids[0]) == {"ok": True, "unlocked_id": ids[0]}
    assert eng.unlock_memory(ids[0]) == {"ok": True, "unlocked_id": ids[0]}
    assert row(eng, ids[0])[6] == 0 and row(eng, ids[1])[6] == 1


# ----------------------------------------------------------------- delete_episode
def test_delete_episode(engine_none):
    eng = engine_none
    ep = eng.archive_episode("a", "we migrated the staging cluster")["episode_id"]
    assert eng.delete_episode(ep, "b") == {"ok": False, "error": f"episode {ep} is not owned by agent 'b'"}
    assert eng.delete_episode(ep, "a") == {"ok": True, "deleted_id": ep}
    assert eng.delete_episode(ep) == {"ok": False, "error": f"episode {ep} not found"}
    assert episode_hits(eng, "staging") == 0
    with pytest.raises(InvalidArgument, match="episode_id"):
        eng.delete_episode(0)


# -------------------------------------------------------------- delete_agent_data
def test_delete_agent_data_removes_everything_of_one_agent(engine_none, monkeypatch):
    eng = engine_none
    forgotten = []
    monkeypatch.setattr(eng.calibration, "forget_agent", lambda agent: forgotten.append(agent) or 2)
    for i in range(3):
        eng.store("a", f"memory {i} of a")
    eng.lock_memory(1)
    eng.store("b", "memory of b")
    eng.archive_episode("a", "episode of a")
    eng.archive_episode("b", "episode of b")
    with eng.db.write() as session:
        conn = session.conn
        conn.execute("INSERT INTO profiles(agent_id, content) VALUES ('a', 'profile a'), ('b', 'profile b')")
        conn.execute("INSERT INTO pending_memory_tasks(task_type, agent_id, payload) VALUES ('update_profile', 'a', '{}')")
    res = eng.delete_agent_data("a")
    assert res == {"ok": True, "agent_id": "a", "deleted_memories": 3, "deleted_profiles": 1, "deleted_episodes": 1,
                   "deleted_pending_tasks": 1, "deleted_calibration": 2}
    assert forgotten == ["a"]
    assert db_rows(eng.db.path, "SELECT DISTINCT agent_id FROM memories UNION SELECT agent_id FROM episodes "
                                "UNION SELECT agent_id FROM profiles") == [("b",)]
    assert fts_ids(eng, "of a") == []
    assert eng.delete_agent_data("a")["deleted_memories"] == 0
    for bad in ("", None, 3):
        with pytest.raises(InvalidArgument, match="agent_id"):
            eng.delete_agent_data(bad)


def test_delete_agent_data_reports_a_calibration_failure(engine_none, monkeypatch):
    def broken(agent_id):
        raise OSError("sidecar is read-only")

    monkeypatch.setattr(engine_none.calibration, "forget_agent", broken)
    engine_none.store("a", "x y z")
    res = engine_none.delete_agent_data("a")
    assert res["ok"] is True and res["deleted_memories"] == 1 and res["deleted_calibration"] == 0
    assert "sidecar is read-only" in res["calibration_warning"]


def test_delete_agent_data_drops_resident_vectors(engine_http):
    eng = engine_http
    eng.store("a", "marathon training plan for runners")
    eng.store("b", "marathon training plan for runners")
    assert eng.recall(RecallRequest("a", "running marathons", deep=True))["messages"]
    assert len(eng.steps.indexes()["memories"]) == 2
    eng.delete_agent_data("a")
    assert len(eng.steps.indexes()["memories"]) == 1
    assert eng.recall(RecallRequest("a", "running marathons", deep=True))["messages"] == []
    assert eng.recall(RecallRequest("b", "running marathons", deep=True))["messages"]


# ----------------------------------------------------------------------- listings
def test_listings_newest_first_bounded_all_agents_and_project_scope(engine_none):
    eng = engine_none
    eng.store("a", "global row")
    eng.store("a", "project P row", project_id="P")
    eng.store("b", "project Q row of b", project_id="Q")
    eng.archive_episode("a", "episode in P", project_id="P")
    eng.archive_episode("b", "episode global")

    def contents(**kw):
        return [m["content"] for m in eng.list_memories(**kw)["memories"]]

    assert contents() == ["project Q row of b", "project P row", "global row"]  # newest first, every agent
    assert contents(agent_id="") == contents()
    assert contents(agent_id="a") == ["project P row", "global row"]
    assert contents(project_id="P") == ["project P row", "global row"]  # P ∪ global
    assert contents(project_id="") == ["global row"]  # global only
    assert contents(limit=1) == ["project Q row of b"]
    assert [e["summary"] for e in eng.list_episodes()["episodes"]] == ["episode global", "episode in P"]
    assert [e["summary"] for e in eng.list_episodes(project_id="Q")["episodes"]] == ["episode global"]
    assert eng.list_memories(limit=0) == {"memories": [], "count": 0}  # as the original: clamped to 0..500
    assert eng.list_memories(limit=-4)["count"] == 0
    assert contents(limit=501) == contents()
    assert len(eng.list_episodes(limit=10_000)["episodes"]) == 2
    for bad in (True, "5", 2.0):
        with pytest.raises(InvalidArgument, match="limit"):
            eng.list_memories(limit=bad)


# -------------------------------------------------------------------------- pause
def test_pause_blocks_every_write_and_reports_skipped_bodies(engine_none):
    eng = engine_none
    mid = eng.store("a", "existing memory")["id"]
    ep = eng.archive_episode("a", "existing episode")["episode_id"]
    before = db_rows(eng.db.path, "SELECT * FROM memories") + db_rows(eng.db.path, "SELECT * FROM episodes")
    assert eng.persistence_status() == {"paused": False, "expires_at": None, "ttl_remaining_seconds": None,
                                        "scope": "process"}
    p = eng.pause_persistence(600)
    assert p["paused"] is True and p["ttl_seconds"] == 600 and p["scope"] == "process"
    status = eng.persistence_status()
    assert status["paused"] is True and 598 <= status["ttl_remaining_seconds"] <= 600

    skipped = {
        "store": eng.store("a", "new memory"),
        "archive_episode": eng.archive_episode("a", "new episode"),
        "update_memory": eng.update_memory(mid, "changed"),
        "delete_memory": eng.delete_memory(mid),
        "delete_episode": eng.delete_episode(ep),
        "lock_memory": eng.lock_memory(mid),
        "unlock_memory": eng.unlock_memory(mid),
        "delete_agent_data": eng.delete_agent_data("a"),
        # the pause is checked BEFORE validation: bad arguments still get the skipped body
        "update_memory(bad)": eng.update_memory(0, ""),
        "store(bad)": eng.store(5, None),
        "delete_agent_data(bad)": eng.delete_agent_data(""),
    }
    for tool, body in skipped.items():
        assert body["ok"] is True and body["persisted"] is False and body["dry_run"] is True, tool
        assert tool.split("(")[0] + " skipped" in body["reason"] and "m left" in body["reason"], tool
    assert skipped["store"]["id"] == "no-persist" and skipped["store"]["result"] == "skipped"
    assert skipped["archive_episode"]["episode_id"] is None and skipped["archive_episode"]["id"] == "no-persist"
    assert skipped["update_memory"]["updated_id"] is None
    assert skipped["delete_memory"]["deleted_id"] is None and skipped["delete_episode"]["deleted_id"] is None
    assert skipped["lock_memory"]["locked_id"] is None and skipped["unlock_memory"]["unlocked_id"] is None
    assert skipped["delete_agent_data"]["deleted_memories"] == 0
    after = db_rows(eng.db.path, "SELECT * FROM memories") + db_rows(eng.db.path, "SELECT * FROM episodes")
    assert after == before
    assert db_rows(eng.db.path, "SELECT COUNT(*) FROM pending_memory_tasks") == [(0,)]

    assert eng.pause_persistence(30)["ttl_seconds"] == 30  # replaces, no stacking
    assert eng.persistence_status()["ttl_remaining_seconds"] <= 30
    assert eng.resume_persistence() == {"paused": False, "was_active": True, "scope": "process"}
    assert eng.resume_persistence()["was_active"] is False
    assert eng.store("a", "after resume")["result"] == "stored"


def test_pause_ttl_bounds_and_lazy_expiry(engine_none, monkeypatch):
    eng = engine_none
    for bad in (0, -5, 86401, True, 1.5, "60"):
        with pytest.raises(InvalidArgument, match="ttl_seconds"):
            eng.pause_persistence(bad)
    now = [1000.0]
    monkeypatch.setattr(eng.pause, "_clock", lambda: now[0])  # the services share the engine's one Pause
    eng.pause_persistence(90)
    assert "1m left" in eng.store("a", "x")["reason"]
    now[0] += 45
    assert "45s left" in eng.store("a", "x")["reason"]
    now[0] += 45
    assert eng.persistence_status()["paused"] is False  # expired lazily on read
    assert eng.store("a", "x")["result"] == "stored"
    assert eng.resume_persistence()["was_active"] is False
