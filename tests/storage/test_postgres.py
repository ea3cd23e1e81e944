"""What only PostgreSQL has: several nodes on one database. The schema migration under its
advisory lock, the refusal of a newer schema, bm25 equal to SQLite's FTS5, the change feed
that keeps a node's resident index fresh, task leases, the pause's per-node scope, and the
calibration state kept in the database. Skipped without CPERSONA_TEST_DB_URL."""

from __future__ import annotations

import json
import threading
import time

import pytest
from cpersona.config import Settings
from cpersona.errors import SchemaTooNew
from cpersona.service.engine import Engine
from cpersona.service.requests import RecallRequest
from cpersona.storage.backend import open_url
from cpersona.storage.scope import Scope
from cpersona.util.text import fts_terms, match_expression

from backends import pg_schema
from conftest import wait_until

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'")


@pytest.fixture
def url():
    with pg_schema() as schema_url:
        yield schema_url


@pytest.fixture
def nodes(url, fake_embed, tmp_path):
    """Factory: node(**settings) → an Engine on the shared schema (closed at teardown)."""
    made: list[Engine] = []

    def node(**overrides) -> Engine:
        overrides.setdefault("embedding_mode", "http")
        overrides.setdefault("embedding_url", fake_embed.url)
        eng = Engine(Settings.from_env({}, db_url=url, db_path=str(tmp_path / "unused.db"), **overrides))
        made.append(eng)
        return eng

    fake_embed.fail = False
    yield node
    for eng in reversed(made):
        eng.close()


def _rows(url: str, query: str, params=()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


# ------------------------------------------------------------------ schema
def test_nodes_starting_together_migrate_once(url):
    opened, errors = [], []

    def start() -> None:
        try:
            opened.append(open_url(url))
        except Exception as err:  # noqa: BLE001 — collected for the assertion
            errors.append(err)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == [] and len(opened) == 4
        assert _rows(url, "SELECT version FROM schema_version") == [(13,)]
        tables = {r[0] for r in _rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        assert {"memories", "episodes", "profiles", "pending_memory_tasks", "cpersona_meta", "schema_version",
                "lexical_stats"} <= tables
        indexes = {r[0] for r in _rows(url, "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
        assert {"idx_memories_content_trgm", "idx_memories_dedup_content", "idx_pending_tasks_embed"} <= indexes
    finally:
        for db in opened:
            db.close()


def test_a_node_joining_a_busy_cluster_takes_no_lock(url):
    open_url(url).close()
    with psycopg.connect(url) as busy:  # a long transaction of a running node: DDL would wait on it
        busy.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
        busy.execute("LOCK TABLE cpersona_meta IN ROW EXCLUSIVE MODE")
        opened: list = []
        joiner = threading.Thread(target=lambda: opened.append(open_url(url)), daemon=True)
        joiner.start()
        joiner.join(20)
        assert opened, "a node whose schema is current must open without waiting for running transactions"
        opened[0].close()


def test_newer_schema_is_refused_untouched(url):
    open_url(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version(version) VALUES (99)")
        conn.execute("DROP INDEX idx_memories_agent")
    with pytest.raises(SchemaTooNew, match="v99"):
        open_url(url)
    assert _rows(url, "SELECT indexname FROM pg_indexes WHERE indexname = 'idx_memories_agent' "
                      "AND schemaname = current_schema()") == []  # nothing was (re)created


def test_stored_values_have_the_sqlite_formats(url):
    db = open_url(url)
    try:
        from cpersona.storage.records import MemoryDraft

        with db.write() as s:
            ref = s.memories.insert(MemoryDraft("a", "", "", "", "text", "{}", "2024-01-01", "{}"), b"\x00\x00\x80?")
        row = _rows(url, "SELECT created_at, embedding, locked FROM memories WHERE id = %s", (ref.id,))[0]
        assert len(row[0]) == 19 and row[0][10] == " " and bytes(row[1]) == b"\x00\x00\x80?" and row[2] == 0
    finally:
        db.close()


# ---------------------------------------------------------------- lexical
CORPUS = [
    "Caroline went to the LGBTQ support group yesterday and felt accepted",
    "Melanie painted a sunrise over the lake last year",
    "ERR_TLS_7841 appeared again after the certificate rotation",
    "東京タワーに行って夜景を見た", "京都の寺で紅葉を見た話", "東京の天気は雨だった",
    "the support group meets every Tuesday; the group is small",
    "aaaa aaaaa overlapping trigram test aaaa", "Caroline and Melanie talked about painting",
    "certificate rotation runbook: rotate, verify, deploy", "group group group support",
    "release 2020202 and 2023 notes", "ははははは、と笑った", "2023年7月4日にwebhook-relayで障害",
]
QUERIES = ["support group", "東京タワー", "certificate rotation error", "aaaa", "Melanie painting", "紅葉を見た",
           "ERR_TLS_7841", "group", "202", "ははは", "2023年7月4日にwebhook-relayで何があった？"]


def test_bm25_equals_sqlite_fts5(url, tmp_path):
    """Same rows, same order, same bm25 as FTS5 (to float precision) for Latin, CJK and
    identifier queries, overlapping terms included."""
    from cpersona.storage.records import MemoryDraft

    sqlite_db, pg_db = open_url(str(tmp_path / "s.db")), open_url(url)
    try:
        for db in (sqlite_db, pg_db):
            with db.write() as s:
                for i, text in enumerate(CORPUS):
                    s.memories.insert(MemoryDraft("a" if i % 4 else "b", "", "", "", text, "{}", "2024", "{}"), None)
        for query in QUERIES:
            expr = match_expression(fts_terms(query))
            for scope in (Scope("a"), Scope(None)):
                with sqlite_db.read() as s:
                    want = [(r.content, rank) for r, rank in s.search.memories_fts(expr, scope, "", 10)]
                with pg_db.read() as s:
                    got = [(r.content, rank) for r, rank in s.search.memories_fts(expr, scope, "", 10)]
                assert [c for c, _ in got] == [c for c, _ in want], query
                assert [r for _, r in got] == pytest.approx([r for _, r in want], rel=1e-9, abs=1e-12), query
    finally:
        sqlite_db.close()
        pg_db.close()


def test_word_index_bm25_equals_sqlite_fts5(url, tmp_path):
    """The word index (stems, CJK/Hangul bigrams, numbers): same rows, order and bm25 as the
    FTS5 unicode61 table on SQLite, and kept in step by update, delete and import."""
    from cpersona.storage.records import MemoryDraft
    from cpersona.util.words import query_terms

    sqlite_db, pg_db = open_url(str(tmp_path / "s.db")), open_url(url)
    corpus = [*CORPUS, "she uses the tools daily", "the user used 2 tools", "서울에서 만났다", "广西桂林的漓江",
              "2024年1月7日にsearch-indexerで障害があった", "ERR_DISK_9755 on 2024-01-07, fixed"]
    try:
        for db in (sqlite_db, pg_db):
            with db.write() as s:
                ids = [s.memories.insert(MemoryDraft("a" if i % 4 else "b", "", "", "", text, "{}", "2024", "{}"),
                                         None).id for i, text in enumerate(corpus)]
                s.memories.update_content(ids[1], None, "Melanie painted the lake at sunrise, using 2 brushes", None)
                s.memories.delete(ids[2], None)
                s.bulk.insert_memory({"agent_id": "a", "project_id": "", "msg_id": "", "content": "imported uses of 2",
                                      "source": "{}", "timestamp": "", "metadata": "{}", "channel": "",
                                      "locked": 0, "recall_count": 0, "last_recalled_at": None}, None)
        for query in [*QUERIES, "use", "2 tools", "서울", "广西", "painting sunrise brushes",
                      "search-indexerで何があった？", "ERR_DISK_9755", "2024/1/7"]:
            expr = match_expression(query_terms(query))
            for scope in (Scope("a"), Scope(None)):
                with sqlite_db.read() as s:
                    want = [(r.content, rank) for r, rank in s.search.memories_words(expr, scope, "", 10)]
                    counts = s.search.term_doc_counts("memories_words", query_terms(query))
                with pg_db.read() as s:
                    got = [(r.content, rank) for r, rank in s.search.memories_words(expr, scope, "", 10)]
                    assert s.search.term_doc_counts("memories_words", query_terms(query)) == counts, query
                assert [c for c, _ in got] == [c for c, _ in want], query
                assert [r for _, r in got] == pytest.approx([r for _, r in want], rel=1e-9, abs=1e-12), query
    finally:
        sqlite_db.close()
        pg_db.close()


# ----------------------------------------------------------- many nodes
def test_a_store_on_one_node_is_found_by_vector_on_another(nodes):
    a, b = nodes(), nodes()
    assert a.store("agent", "the lighthouse keeper feeds seven cats")["embedded"] is True
    b.recall(RecallRequest(agent_id="agent", query="lighthouse keeper"))  # B learns the dimension, loads its index
    assert b.steps.indexes() is not None and len(b.steps.indexes()["memories"]) == 1
    version = b.db.data_version()
    stored = a.store("agent", "orbital mechanics of comet tails")
    assert wait_until(lambda: b.db.data_version() != version, timeout=10)
    trace: dict = {}
    out = b.recalls._recall(RecallRequest(agent_id="agent", query="orbital mechanics of comet tails"), trace)
    best = out["messages"][-1]
    assert best["ref"] == f"mem:{stored['id']}" and "vector" in best["match_reason"]["retrievers"]
    assert len(b.steps.indexes()["memories"]) == 2  # applied incrementally, not reloaded from scratch
    version = b.db.data_version()
    a.delete_memory(stored["id"])
    assert wait_until(lambda: b.db.data_version() != version, timeout=10)
    b.steps.refresh_if_changed()
    assert len(b.steps.indexes()["memories"]) == 1


def test_tasks_are_claimed_once_and_survive_a_dead_node(url):
    from cpersona.storage.postgres.tasks import LEASE_SECONDS

    node_a, node_b = open_url(url), open_url(url)
    try:
        with node_a.write() as s:
            for i in range(1, 7):
                s.tasks.enqueue_embed("memories", i, "agent", "")
        now = time.time()
        with node_a.write() as s:
            mine = [r[0] for r in s.tasks.claim(now, True, 4)]
        with node_b.write() as s:
            theirs = [r[0] for r in s.tasks.claim(now, True, 4)]
            assert not any(s.tasks.is_pending(t) for t in mine)  # held by node A
        assert len(mine) == 4 and len(theirs) == 2 and not set(mine) & set(theirs)
        # node A dies without finishing: after its lease the tasks are due again, for node B
        with node_b.write() as s:
            assert sorted(r[0] for r in s.tasks.claim(now + 1, True, 10)) == sorted(theirs)  # its own, not A's
            again = [r[0] for r in s.tasks.claim(now + LEASE_SECONDS + 1, True, 10)]
        assert sorted(again) == sorted(mine + theirs)
        with node_a.write() as s:
            assert not s.tasks.is_pending(mine[0])  # A came back too late: B holds it now
    finally:
        node_a.close()
        node_b.close()


def test_two_workers_embed_every_queued_row_exactly_once(nodes, fake_embed):
    fake_embed.fail = True
    writer = nodes(task_queue_enabled=False)
    ids = [writer.store("agent", f"queued memory number {i}")["id"] for i in range(40)]
    fake_embed.fail = False
    a, b = nodes(), nodes()
    assert wait_until(lambda: a.queue.pending() == 0, timeout=60)
    url = a.db.url
    assert _rows(url, "SELECT count(*) FROM memories WHERE embedding IS NULL") == [(0,)]
    assert _rows(url, "SELECT count(*) FROM pending_memory_tasks") == [(0,)]
    assert len(ids) == 40 and b.queue.status()["failed"] == 0


def test_pause_is_per_node(nodes):
    a, b = nodes(embedding_mode="none"), nodes(embedding_mode="none")
    a.pause_persistence(600)
    assert a.persistence_status()["scope"] == "process"
    assert a.store("agent", "said off the record on node A")["result"] == "skipped"
    assert b.store("agent", "said on node B")["result"] == "stored"
    assert b.persistence_status()["paused"] is False
    assert [m["content"] for m in b.list_memories("agent")["memories"]] == ["said on node B"]


def test_calibration_state_lives_in_the_database(nodes, tmp_path):
    a = nodes()
    for i in range(30):
        a.store("agent", f"memory about topic {i % 5} number {i} with words {i * 7}")
    result = a.calibrate_threshold("agent")
    assert result["ok"] is True and result["sidecar_persisted"] is True
    assert not list(tmp_path.glob("*.calibration.json"))  # no file on the node's disk
    stored = _rows(a.db.url, "SELECT value FROM cpersona_meta WHERE key = 'calibration_state'")
    assert stored and "agent" in stored[0][0]
    b = nodes()
    status = b.get_recall_precision("agent")["calibration"]
    assert status["sidecar"] == "ok" and status["state"] == "calibrated"
    c = nodes()  # started before agent2 existed; its calibration must keep the other node's entries
    for i in range(30):
        b.store("agent2", f"second agent memory {i} on subject {i % 4} with number {i * 13}")
    assert c.calibrate_threshold("agent2")["ok"] is True
    state = json.loads(_rows(a.db.url, "SELECT value FROM cpersona_meta WHERE key = 'calibration_state'")[0][0])
    assert {"agent", "agent2"} <= set(state["agent_thresholds"])


def test_a_lock_held_past_the_busy_timeout_is_answered_as_busy(url):
    """Another client holding the table past CPERSONA_BUSY_TIMEOUT_MS: the write fails as
    DatabaseBusy (error_kind busy, retryable), nothing is written, and the next write works."""
    from cpersona.errors import DatabaseBusy
    from cpersona.storage.records import MemoryDraft

    db = open_url(url, busy_timeout_ms=200)
    draft = MemoryDraft("a", "", "", "", "held back", "{}", "2024", "{}")
    try:
        with psycopg.connect(url) as other:
            other.execute("LOCK TABLE memories IN EXCLUSIVE MODE")
            with pytest.raises(DatabaseBusy) as err, db.write() as s:
                s.memories.insert(draft, None)
            assert err.value.fields()["error_kind"] == "busy" and err.value.fields()["retryable"] is True
            assert "busy" in db.conditions.snapshot()
        with db.write() as s:
            assert s.memories.insert(draft, None) is not None
        assert db.conditions.snapshot() == {}
        assert _rows(url, "SELECT count(*) FROM memories") == [(1,)]
    finally:
        db.close()
