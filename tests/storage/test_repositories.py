"""Every repository method, on both backends (`backend` fixture: SQLite and PostgreSQL):
the same calls give the same answers, so the layers above cannot tell them apart."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from cpersona.errors import Refused
from cpersona.storage.codec import to_blob
from cpersona.storage.meta import VectorState
from cpersona.storage.records import EpisodeDraft, MemoryDraft
from cpersona.storage.scope import Scope
from cpersona.storage.tasks import REEMBED, embed_payload
from cpersona.storage.transfer import COLUMNS


def draft(content: str, agent: str = "a", project: str = "", channel: str = "", msg_id: str = "",
          source: dict | None = None, timestamp: str = "2024-05-01T10:00:00") -> MemoryDraft:
    return MemoryDraft(agent, project, channel, msg_id, content, json.dumps(source or {}), timestamp, "{}")


def episode(summary: str, agent: str = "a", keywords: str = "", start: str | None = None) -> EpisodeDraft:
    return EpisodeDraft(agent, "", "", summary, keywords, start, None, False)


def vec(seed: int, dim: int = 4) -> bytes:
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return to_blob(v / np.linalg.norm(v))


def insert(db, *drafts: MemoryDraft, blob: bytes | None = None) -> list[int]:
    with db.write() as s:
        return [s.memories.insert(d, blob).id for d in drafts]


# ------------------------------------------------------------------ sessions
def test_write_commits_runs_hooks_in_order_and_rolls_back(db):
    seen: list[str] = []
    with db.write() as s:
        s.memories.insert(draft("one"), None)
        s.after(lambda: seen.append("first"))
        s.after(lambda: seen.append("second"))
        assert seen == []  # nothing before COMMIT
    assert seen == ["first", "second"]
    with pytest.raises(RuntimeError), db.write() as s:
        s.memories.insert(draft("two"), None)
        s.after(lambda: seen.append("never"))
        raise RuntimeError("boom")
    assert seen == ["first", "second"]
    with db.read() as s:
        assert [r["content"] for r in s.memories.listing(Scope("a"), 10)] == ["one"]


def test_hooks_follow_commit_order_across_threads(db):
    order: list[int] = []
    committed: list[int] = []

    def writer(i: int) -> None:
        with db.write() as s:
            ref = s.memories.insert(draft(f"row {i}"), None)
            s.after(lambda: order.append(ref.id))
        committed.append(ref.id)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order == sorted(order) and len(order) == 8  # one writer at a time per process: ids = commit order


def test_read_sees_only_committed_rows_and_nested_reads_work(db):
    with db.write() as s:
        s.memories.insert(draft("pending row"), None)
        with db.read() as r:
            assert r.memories.listing(Scope("a"), 10) == []
            with db.read() as inner:
                assert inner.search.pool_size(Scope("a")) == 0
    with db.read() as r:
        assert len(r.memories.listing(Scope("a"), 10)) == 1


def test_change_stamp_moves_with_own_commits_and_describe(db):
    before = db.change_stamp()
    insert(db, draft("stamp"))
    assert db.change_stamp() != before
    assert db.changes_since(db.data_version()) in ([], None)
    info = db.describe()
    assert info["backend"] in ("sqlite", "postgresql") and info["size_bytes"] > 0


# ------------------------------------------------------------------ memories
def test_memory_insert_dedup_and_find_duplicate(db):
    mid, = insert(db, draft("same text", msg_id="m1", project="P"))
    with db.write() as s:
        assert s.memories.insert(draft("same text", project="P"), None) is None  # unique index backstop
        assert s.memories.insert(draft("other", msg_id="m1", project="P"), None) is None
        ref = s.memories.insert(draft("same text", project="Q"), None)
        assert ref is not None and (ref.agent_id, ref.project_id) == ("a", "Q") and len(ref.created_at) == 19
    with db.read() as s:
        assert s.memories.find_duplicate(draft("x", msg_id="m1", project="P")) == ("duplicate msg_id", mid)
        assert s.memories.find_duplicate(draft("same text", project="P", channel="c")) == ("duplicate content", mid)
        assert s.memories.find_duplicate(draft("same text", agent="b")) is None
        long_text = "長" * 9000  # beyond a btree entry: the content key must still work
    with db.write() as s:
        assert s.memories.insert(draft(long_text), None) is not None
        assert s.memories.insert(draft(long_text), None) is None
    with db.read() as s:
        assert s.memories.find_duplicate(draft(long_text))[0] == "duplicate content"


def test_memory_guarded_edits(db):
    mine, other, locked = insert(db, draft("mine"), draft("theirs", agent="b"), draft("locked"))
    with db.write() as s:
        s.memories.set_locked(locked, "a", True)
    with db.read() as s:
        s.memories.check_writable(mine, "a")
        with pytest.raises(Refused, match="not owned"):
            s.memories.check_writable(other, "a")
        with pytest.raises(Refused, match="locked"):
            s.memories.check_writable(locked, None)
        with pytest.raises(Refused, match="not found"):
            s.memories.check_writable(999, None)
    for call, match in ((lambda s: s.memories.update_content(other, "a", "x", None), "not owned"),
                        (lambda s: s.memories.update_content(locked, None, "x", None), "locked"),
                        (lambda s: s.memories.update_content(mine, None, "locked", None), "already has exactly"),
                        (lambda s: s.memories.delete(locked, "a"), "locked"),
                        (lambda s: s.memories.delete(999, None), "not found"),
                        (lambda s: s.memories.set_locked(other, "a", True), "not owned")):
        with pytest.raises(Refused, match=match), db.write() as s:
            call(s)
    with db.write() as s:
        ref = s.memories.update_content(mine, "a", "mine, edited", vec(1))
        assert (ref.id, ref.agent_id) == (mine, "a")
        assert s.memories.delete(other, None).agent_id == "b"
        s.memories.set_locked(locked, "a", False)
        s.memories.set_locked(locked, "a", False)  # idempotent
    with db.read() as s:
        assert s.memories.owned(mine, "a")[0] == "mine, edited"
        assert s.memories.owned(mine, "b") is None
        assert s.vectors.has_vector("memories", mine) is True
        assert s.vectors.has_vector("memories", other) is None


def test_memory_reads_apply_the_isolation_axes(db):
    ids = insert(db, draft("global"), draft("project P", project="P"), draft("channel c", channel="c"),
                 draft("other agent", agent="b"), draft("project Q", project="Q"))
    with db.read() as s:
        def seen(scope: Scope) -> set[str]:
            return {r.content for r in s.memories.fetch(ids, scope).values()}

        assert seen(Scope("a")) == {"global", "project P", "channel c", "project Q"}
        assert seen(Scope("a", "P")) == {"global", "project P", "channel c"}
        assert seen(Scope("a", "")) == {"global", "channel c"}
        assert seen(Scope("a", None, "d")) == {"global", "project P", "project Q"}
        assert seen(Scope(None)) == {"global", "project P", "channel c", "other agent", "project Q"}
        assert [r.content for r in s.memories.newest(Scope("a", "P"), "", 2)] == ["channel c", "project P"]
        assert [r["content"] for r in s.memories.listing(Scope(None, "Q"), 10)] == ["project Q", "other agent",
                                                                                  "channel c", "global"]
        assert set(s.memories.listing(Scope("a"), 1)[0]) == {"id", "agent_id", "project_id", "content", "source",
                                                            "timestamp", "created_at", "locked", "channel"}
        assert s.search.pool_size(Scope("a", "P")) == 3


def test_source_id_prefix_filter(db):
    ids = insert(db, draft("from alice", source={"type": "User", "id": "Alice_1"}),
                 draft("from al%", source={"type": "User", "id": "al%x"}),
                 draft("numeric", source={"type": "User", "id": 42}))
    with db.write() as s:  # a legacy row whose source is not JSON never matches (and never raises)
        s.memories.insert(MemoryDraft("a", "", "", "", "broken source", "not json", "2024-01-01", "{}"), None)
    with db.read() as s:
        assert s.memories.ids_with_source(Scope("a"), "alice") == [ids[0]]  # ASCII case-insensitive prefix
        assert s.memories.ids_with_source(Scope("a"), "al%") == [ids[1]]  # wildcards are literal
        assert s.memories.ids_with_source(Scope("a"), "4") == [ids[2]]
        assert [r.content for r in s.memories.newest(Scope("a"), "Ali", 5)] == ["from alice"]
        assert list(s.memories.fetch(ids, Scope("a"), "al%")) == [ids[1]]


def test_recall_bookkeeping(db):
    a, b = insert(db, draft("old", timestamp="2024-01-01T00:00:00Z"), draft("new", timestamp="2024-01-03 12:00:00"))
    insert(db, draft("undated", timestamp="soon"), draft("offset", timestamp="2024-01-02T09:00:00+09:00"))
    with db.read() as s:
        lo, hi = s.memories.timestamp_span(Scope("a"))
        assert lo == pytest.approx(2460310.5) and hi == pytest.approx(2460313.0)
        assert s.memories.timestamp_span(Scope("nobody")) is None
        assert s.memories.recall_stats([a, b]) == {a: (0, None), b: (0, None)}
    with db.write() as s:
        s.memories.bump_recalled([a])
    with db.read() as s:
        count, when = s.memories.recall_stats([a])[a]
        assert count == 1 and when.startswith("20")


# ------------------------------------------------------------ episodes, profiles
def test_episodes_and_profiles(db):
    with db.write() as s:
        e1 = s.episodes.insert(episode("first session", start="2024-01-01T00:00:00"), vec(2)).id
        e2 = s.episodes.insert(episode("second session", agent="b"), None).id
        s.profiles.upsert("a", "likes tea")
        s.profiles.upsert("a", "likes coffee")
    with db.read() as s:
        assert s.episodes.fetch([e1, e2], Scope("a"))[e1].timestamp == "2024-01-01T00:00:00"
        assert list(s.episodes.fetch([e1, e2], Scope(None))) == [e1, e2]
        assert s.episodes.owned(e2, "b").timestamp == s.episodes.owned(e2, "b").created_at  # no start: created_at
        assert s.episodes.owned(e2, "a") is None
        assert [r["summary"] for r in s.episodes.listing(Scope(None), 5)] == ["second session", "first session"]
        assert s.episodes.latest_created(Scope("a")) is not None and s.episodes.latest_created(Scope("z")) is None
        assert s.profiles.get("a") == "likes coffee" and s.profiles.get("b") == ""
        assert s.profiles.newest("a", 5) == ["likes coffee"]
    with pytest.raises(Refused, match="not owned"), db.write() as s:
        s.episodes.delete(e2, "a")
    with pytest.raises(Refused, match="not found"), db.write() as s:
        s.episodes.delete(999, None)
    with db.write() as s:
        assert s.episodes.delete(e2, "b") == "b"


# ------------------------------------------------------------------- search
def test_keyword_search_like_and_counts(db):
    ids = insert(db, draft("ERR_TLS_7841 during the handshake"), draft("東京タワーに行った"),
                 draft("the tower of Tokyo"), draft("100% done_ok"))
    with db.write() as s:
        ep = s.episodes.insert(episode("deploy retrospective", keywords="kubernetes rollout"), None).id
    with db.read() as s:
        hits = s.search.memories_fts('"err_tls" OR "handshake"', Scope("a"), "", 10)
        assert [r.id for r, _ in hits] == [ids[0]] and hits[0][1] < 0  # bm25: lower is better
        assert [r.id for r, _ in s.search.memories_fts('"東京タ" OR "京タワ"', Scope("a"), "", 10)] == [ids[1]]
        assert s.search.memories_fts('"東京タ"', Scope("b"), "", 10) == []
        assert [r.id for r, _ in s.search.episodes_fts('"ubernete"', Scope("a"), 10)] == [ep]
        assert [r.id for r in s.search.memories_like("TOWER of", Scope("a"), "", 10)] == [ids[2]]
        assert [r.id for r in s.search.memories_like("0% d", Scope("a"), "", 10)] == [ids[3]]  # % is literal
        assert s.search.memories_like("done%ok", Scope("a"), "", 10) == []
        assert s.search.table_size("memories_fts") == max(ids)
        counts = s.search.term_doc_counts("memories_fts", ["tow", "xyz", "東京タ"])
        assert counts == {"tow": 1, "xyz": 0, "東京タ": 1}
        assert s.search.database_file() != ""


# ------------------------------------------------------------------- tasks
def test_task_queue_methods(db):
    with db.write() as s:
        s.tasks.enqueue_embed("memories", 7, "a", "P")
        s.tasks.enqueue_embed("memories", 7, "a", "P")  # one task per row
        s.tasks.enqueue_embed("episodes", 3, "b", "")
    with db.read() as s:
        due = s.tasks.due(1e12, True, 10)
        assert [(r[1], r[2], r[3], r[4]) for r in due] == [("embed", "a", embed_payload("memories", 7), 0),
                                                           ("embed", "b", embed_payload("episodes", 3), 0)]
        assert s.tasks.due(1e12, False, 10) == [] and s.tasks.count_pending() == 2
    first, second = due[0][0], due[1][0]
    with db.write() as s:
        assert [r[0] for r in s.tasks.claim(1000.0, True, 1)] == [first]
        assert s.tasks.is_pending(first)
        s.tasks.retry_later(first, "refused text", 2000.0, max_retries=2)
        s.tasks.fail(second, "malformed")
    with db.read() as s:
        assert s.tasks.next_due(True) == 2000.0
        summary = s.tasks.summary()
        assert (summary["pending"], summary["retries"], summary["retrying"], summary["failed"]) == (1, 1, 1, 1)
        assert summary["recent_failures"][0]["error"] == "malformed" and summary["oldest"] is not None
        assert not s.tasks.is_pending(second)
    with db.write() as s:
        s.tasks.retry_later(first, "again", 3000.0, max_retries=2)  # second failure: given up
        assert s.tasks.drop_embed("episodes", 3) == 1
        s.tasks.enqueue_embed("memories", 7, "a", "P")  # a failed task starts afresh
    with db.read() as s:
        assert s.tasks.summary()["failed"] == 0 and s.tasks.due(0, True, 5)[0][4] == 0
    with db.write() as s:
        s.tasks.delete(first)
        mid = s.memories.insert(draft("no vector yet"), None).id
        s.episodes.insert(episode("no vector either"), None)
        assert s.tasks.enqueue_missing() == 2
        assert s.tasks.enqueue_missing() == 0
    with db.read() as s:
        payloads = [r[3] for r in s.tasks.due(1e12, True, 10)]
        assert embed_payload("memories", mid) in payloads


def test_the_background_reembed_is_queued_once(db):
    with db.write() as s:
        assert s.tasks.enqueue_reembed()
        assert not s.tasks.enqueue_reembed()  # one is pending already
    with db.read() as s:
        assert [r[1] for r in s.tasks.due(1e12, True, 10)] == [REEMBED] and s.tasks.due(1e12, False, 10) == []
    with db.write() as s:
        s.tasks.delete(s.tasks.due(1e12, True, 1)[0][0])
        assert s.tasks.enqueue_reembed()  # the last one ran: a new model change queues another


# ------------------------------------------------------------- meta, vectors
def test_meta_and_vector_state(db):
    with db.write() as s:
        assert s.meta.get("nothing") is None
        s.meta.put("calibration", {"sidecar": "x"})
        s.meta.put("calibration", {"sidecar": "y"})
        s.meta.put_vector_state(VectorState("m", 4, None))
        insert_ids = [s.memories.insert(draft(f"row {i}"), vec(i)).id for i in range(3)]
    with db.read() as s:
        assert s.meta.get("calibration") == {"sidecar": "y"}
        assert s.meta.vector_state() == VectorState("m", 4, None)
        assert s.meta.max_ids()["memories"] == max(insert_ids) and s.meta.max_ids()["episodes"] == 0
        assert s.meta.count_in_range("memories", insert_ids[0], insert_ids[2]) == 2


def test_vector_reads_and_writes(db):
    with db.write() as s:
        a = s.memories.insert(draft("alpha", timestamp="2024-01-01T00:00:00"), vec(1)).id
        b = s.memories.insert(draft("beta", timestamp="2024-01-02T00:00:00"), vec(2)).id
        c = s.memories.insert(draft("gamma", agent="b"), None).id
        wrong = s.memories.insert(draft("other model"), to_blob(np.ones(8, np.float32))).id
    with db.read() as s:
        rows = list(s.vectors.embedded_rows("memories", 4, (0, 0)))
        assert [r.id for r in rows] == [a, b] and rows[0].embedding == vec(1)
        assert [r.id for r in s.vectors.rows_by_id("memories", [b, c, wrong], 4, (0, 0))] == [b]
        assert s.vectors.embedded_memory_ids(4, (0, 0), None) == [a, b]
        assert s.vectors.embedded_memory_ids(4, (a, b), "a") == [a]  # stale range (a, b] left out
        assert s.vectors.newest_memories(4, (0, 0), "a", 1) == [(b, "2024-01-02T00:00:00")]
        assert [r[:3] for r in s.vectors.dated_memories(4, (0, 0), "a")] == [(a, "alpha", "2024-01-01T00:00:00"),
                                                                            (b, "beta", "2024-01-02T00:00:00")]
        assert s.vectors.embedded_counts(4, (0, 0), 2) == {"a": 2}
        assert s.vectors.memory_blobs([a, c]) == {a: vec(1)}
        assert s.vectors.texts_in_range("memories", a, c, 5) == [(b, "beta"), (c, "gamma")]
        assert s.vectors.pending_row("memories", c)[0] == "gamma" and s.vectors.pending_row("memories", c)[5]
    with db.write() as s:
        assert not s.vectors.set_if_text("memories", c, "changed meanwhile", vec(3), only_if_missing=True)
        assert s.vectors.set_if_text("memories", c, "gamma", vec(3), only_if_missing=True)
        assert not s.vectors.set_if_text("memories", c, "gamma", vec(4), only_if_missing=True)
        assert s.vectors.set_if_text("memories", c, "gamma", vec(4), only_if_missing=False)
    with db.read() as s:
        assert s.vectors.memory_blobs([c]) == {c: vec(4)}


# -------------------------------------------------------------------- agents
def test_agents_stats_and_delete(db):
    with db.write() as s:
        s.memories.insert(draft("a1"), None)
        locked = s.memories.insert(draft("a2"), vec(1)).id
        s.memories.set_locked(locked, None, True)
        s.memories.insert(draft("b1", agent="b"), None)
        s.episodes.insert(episode("e", agent="c"), None)
        s.profiles.upsert("d", "profile only")
        s.tasks.enqueue_embed("memories", 1, "a", "")
    with db.read() as s:
        assert s.agents.ids() == ["a", "b", "c"]
        stats = {r["agent_id"]: r for r in s.agents.stats()}
        assert (stats["a"]["memories"], stats["a"]["locked"], stats["a"]["without_vector"]) == (2, 1, 1)
        assert set(stats) == {"a", "b", "c", "d"} and stats["d"]["profiles"] == 1
    with db.write() as s:
        assert s.agents.delete_agent_chunk("a", 1) == ({"deleted_memories": 1, "deleted_profiles": 0,
                                                        "deleted_episodes": 0, "deleted_pending_tasks": 1}, False)
        assert s.agents.delete_agent_chunk("a", 10) == ({"deleted_memories": 1, "deleted_profiles": 0,
                                                         "deleted_episodes": 0, "deleted_pending_tasks": 0}, True)
    with db.read() as s:
        assert s.agents.ids() == ["b", "c"]


# ------------------------------------------------------------------ transfer
def test_transfer_reads_and_writes_rows_with_their_ids(db):
    with db.write() as s:
        first = s.memories.insert(draft("one"), vec(1)).id
        s.memories.insert(draft("two"), None)
        s.meta.put("vectors", {"model": "m", "dim": 4, "pending": None})
    with db.read() as s:
        assert s.transfer.count("memories") == 2 and s.transfer.max_id("memories") == first + 1
        rows = s.transfer.rows("memories", 0, 10)
        assert [r[0] for r in rows] == [first, first + 1] and len(rows[0]) == len(COLUMNS["memories"])
        assert s.transfer.rows("memories", first, 10) == rows[1:]
        assert s.transfer.meta_items() == [("vectors", json.dumps({"model": "m", "dim": 4, "pending": None}))]
    moved = [(r[0] + 100, *r[1:4], r[4] + " copy", *r[5:]) for r in rows]
    with db.write() as s:
        assert s.transfer.insert_rows("memories", moved) == 2
        assert s.transfer.insert_rows("memories", moved) == 0  # resuming: present ids are skipped
        s.transfer.put_meta_items([("calibration", "{}")])
        s.transfer.finish()
        nxt = s.memories.insert(draft("after the copy"), None).id
    assert nxt > first + 101
    with db.read() as s:
        assert s.meta.get("calibration") == {}
        assert s.memories.owned(first + 100, "a")[0] == "one copy"
