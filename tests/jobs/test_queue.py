"""The background task queue: embedding rows stored
while the backend could not answer. Crash safety (kill -9 of a server, then a new start),
retry semantics (backend down waits, a refused text burns retries), malformed rows, pause."""

from __future__ import annotations

import os
import socket
import sqlite3

import anyio
import numpy as np
import pytest
from cpersona.config import Settings
from cpersona.devtools.fake_embed import fake_vector
from cpersona.embedding.base import EmbeddingError, EmbeddingNotReady
from cpersona.service.engine import Engine
from cpersona.storage.codec import to_blob
from cpersona.storage.tasks import embed_payload

from conftest import RawStdio, db_rows, new_engine, run_mcp, wait_until


class PickyEmbedder:
    """In-process backend: `down` = unreachable, `loading` = not ready; refuses texts with 'poison'."""

    mode = "http"
    model_id = "picky-512"
    dim = 512

    def __init__(self) -> None:
        self.down = False
        self.loading = False
        self.calls = 0

    def ready(self) -> bool:
        return not self.loading

    def embed(self, texts):
        self.calls += 1
        if self.loading:
            raise EmbeddingNotReady("model is loading")
        if self.down:
            raise EmbeddingError("POST http://embed/ failed: ConnectError: connection refused")
        if any("poison" in t for t in texts):
            raise EmbeddingError("HTTP 422: the backend cannot embed this text")
        return np.stack([fake_vector(t) for t in texts])

    def close(self) -> None:
        pass


@pytest.fixture
def picky(tmp_path):
    made = []

    def factory(**overrides):
        backend = PickyEmbedder()
        settings = Settings.from_env({}, db_path=str(tmp_path / "q.db"), **{"task_retry_delay": 0.05, **overrides})
        eng = Engine(settings, embedder=backend)
        made.append(eng)
        return eng, backend

    yield factory
    for eng in made:
        eng.close()


def tasks(path) -> list[tuple]:
    return db_rows(path, "SELECT task_type, payload, status, retries, last_error FROM pending_memory_tasks ORDER BY id")


def nulls(path) -> int:
    return db_rows(path, "SELECT (SELECT COUNT(*) FROM memories WHERE embedding IS NULL) + "
                         "(SELECT COUNT(*) FROM episodes WHERE embedding IS NULL)")[0][0]


# ------------------------------------------------------------------- enqueueing
def test_vectorless_writes_enqueue_in_the_same_transaction(picky):
    eng, backend = picky(task_queue_enabled=False)
    backend.down = True
    mid = eng.store("a", "written while down", project_id="P")["id"]
    ep = eng.archive_episode("a", "episode while down")["episode_id"]
    assert eng.store("a", "written while down", project_id="P")["result"] == "skipped"  # a skip enqueues nothing
    assert tasks(eng.db.path) == [("embed", embed_payload("memories", mid), "pending", 0, None),
                                  ("embed", embed_payload("episodes", ep), "pending", 0, None)]
    assert db_rows(eng.db.path, "SELECT agent_id, project_id FROM pending_memory_tasks ORDER BY id") == [("a", "P"), ("a", "")]
    # SQLite's json_object gives the same text, so the unique index sees one task per row
    assert db_rows(eng.db.path, "SELECT json_object('table', 'memories', 'id', ?)", (mid,)) == [(embed_payload("memories", mid),)]
    backend.down = False
    eng.queue.run_once()
    assert nulls(eng.db.path) == 0 and tasks(eng.db.path) == []


def test_mode_none_enqueues_nothing(engine_none):
    engine_none.store("a", "no backend at all")
    assert tasks(engine_none.db.path) == []
    status = engine_none.queue_status()
    assert status["pending"] == 0 and status["enabled"] is True and status["running"] is True


def test_healthy_new_instance_reports_an_empty_queue(engine_http):
    assert wait_until(lambda: engine_http.queue.state == "idle")
    status = engine_http.queue_status()
    assert status == {"enabled": True, "running": True, "state": "idle", "pending": 0, "failed": 0, "retrying": 0,
                      "retries": 0, "max_retries": 3, "retry_delay": 30.0, "oldest_pending_age_s": None}


def test_queue_disabled_still_records_the_work(picky):
    eng, backend = picky(task_queue_enabled=False)
    backend.down = True
    eng.store("a", "kept for a later start")
    status = eng.queue_status()
    assert status["enabled"] is False and status["running"] is False and status["pending"] == 1
    assert status["oldest_pending_age_s"] is not None and status["oldest_pending_age_s"] >= 0


# -------------------------------------------------------------- retry semantics
def test_backend_down_waits_without_burning_retries(picky):
    eng, backend = picky()
    backend.down = True
    for i in range(3):
        eng.store("a", f"outage row {i}")
    assert wait_until(lambda: backend.calls >= 12)  # several worker passes, each a batch + a probe
    status = eng.queue_status()
    assert status["pending"] == 3 and status["failed"] == 0 and status["retries"] == 0
    assert status["state"] == "waiting_for_backend" and "connection refused" in status["waiting_reason"]
    assert [t[3] for t in tasks(eng.db.path)] == [0, 0, 0]
    backend.down = False  # next pass (after CPERSONA_TASK_RETRY_DELAY) succeeds
    assert wait_until(lambda: nulls(eng.db.path) == 0), eng.queue.last_error
    assert tasks(eng.db.path) == []
    (blob,) = db_rows(eng.db.path, "SELECT embedding FROM memories WHERE content = 'outage row 1'")[0]
    assert blob == to_blob(fake_vector("outage row 1"))


def test_loading_model_waits_without_burning_retries(picky):
    eng, backend = picky()
    backend.loading = True
    eng.store("a", "stored while the model loads")
    assert wait_until(lambda: eng.queue.state == "waiting_for_backend")
    assert tasks(eng.db.path)[0][2:4] == ("pending", 0)
    backend.loading = False
    assert wait_until(lambda: nulls(eng.db.path) == 0)


def test_refused_text_burns_retries_then_fails_while_others_proceed(picky):
    eng, backend = picky()
    backend.down = True  # all three arrive in one batch
    poison = eng.store("a", "poison pill text")["id"]
    eng.store("a", "good row one")
    eng.store("a", "good row two")
    backend.down = False
    eng.queue.wake()
    assert wait_until(lambda: eng.queue_status()["failed"] == 1), eng.queue_status()
    assert db_rows(eng.db.path, "SELECT content FROM memories WHERE embedding IS NULL") == [("poison pill text",)]
    ((_kind, payload, status, retries, error),) = tasks(eng.db.path)
    assert (payload, status, retries) == (embed_payload("memories", poison), "failed", 3)
    assert "HTTP 422" in error
    report = eng.queue_status()
    assert report["pending"] == 0 and report["recent_failures"][0]["error"] == error
    # correcting the text gives the row a vector and clears its failed task
    assert eng.update_memory(poison, "cured text")["embedded"] is True
    assert tasks(eng.db.path) == [] and nulls(eng.db.path) == 0


def test_a_new_text_restarts_a_failed_task(picky):
    eng, backend = picky(task_queue_enabled=False)
    mid = eng.store("a", "poison again")["id"]
    with eng.db.write() as session:
        conn = session.conn
        conn.execute("UPDATE pending_memory_tasks SET status = 'failed', retries = 3, last_error = 'x'")
    backend.down = True
    eng.update_memory(mid, "fine text now")
    assert tasks(eng.db.path) == [("embed", embed_payload("memories", mid), "pending", 0, None)]


def test_malformed_and_legacy_rows_are_marked_failed_and_the_worker_continues(picky):
    eng, backend = picky(task_queue_enabled=False)
    backend.down = True
    good = eng.store("a", "valid row after the bad ones")["id"]
    with eng.db.write() as session:
        conn = session.conn
        conn.execute("DELETE FROM pending_memory_tasks")
        for kind, payload in (("embed", "{not json"), ("embed", '{"table": "users", "id": 1}'),
                              ("embed", '{"table": "memories", "id": "7"}'), ("update_profile", '{"history": []}'),
                              ("archive_episode", "{}"), ("frobnicate", "{}")):
            conn.execute("INSERT INTO pending_memory_tasks(task_type, agent_id, payload) VALUES (?, 'a', ?)", (kind, payload))
        conn.execute("INSERT INTO pending_memory_tasks(task_type, agent_id, payload) VALUES ('embed', 'a', ?)",
                     (embed_payload("memories", good),))
    backend.down = False
    eng.queue.start()
    assert wait_until(lambda: nulls(eng.db.path) == 0), eng.queue.last_error
    rows = tasks(eng.db.path)
    assert [r[2] for r in rows] == ["failed"] * 6
    errors = [r[4] for r in rows]
    assert "not JSON" in errors[0] and "expected" in errors[1] and "positive integer" in errors[2]
    assert "never summarises" in errors[3] and "never summarises" in errors[4] and "unknown task type" in errors[5]
    assert eng.queue.running()
    assert eng.queue_status()["failed"] == 6


def test_startup_enqueues_rows_stored_without_vectors(tmp_path, fake_embed):
    path = tmp_path / "old.db"
    eng = new_engine(path)  # mode none: rows without vectors, no tasks
    eng.store("a", "stored in mode none")
    eng.archive_episode("a", "episode in mode none")
    eng.close()
    assert tasks(path) == [] and nulls(path) == 2
    eng = new_engine(path, embedding_mode="http", embedding_url=fake_embed.url)
    try:
        assert wait_until(lambda: nulls(path) == 0), eng.queue.last_error
        assert tasks(path) == []
    finally:
        eng.close()


def test_paused_worker_runs_nothing_and_drops_nothing(picky):
    eng, backend = picky()
    backend.down = True
    eng.store("a", "queued before the pause")
    eng.pause_persistence(600)
    backend.down = False
    eng.queue.wake()
    assert wait_until(lambda: eng.queue.state == "paused")
    assert nulls(eng.db.path) == 1 and len(tasks(eng.db.path)) == 1
    eng.resume_persistence()
    assert wait_until(lambda: nulls(eng.db.path) == 0)


def test_changed_text_or_vanished_task_cancels_the_vector_write(picky):
    eng, backend = picky(task_queue_enabled=False)
    backend.down = True
    a = eng.store("a", "first text")["id"]
    b = eng.store("a", "second text")["id"]
    backend.down = False
    from cpersona.jobs.queued import Task as _Task

    with eng.db.read() as session:
        conn = session.conn
        snapshot = conn.execute("SELECT id, task_type, agent_id, payload, retries FROM pending_memory_tasks ORDER BY id").fetchall()
    work = eng.queue._load([_Task(r) for r in snapshot])
    # meanwhile: a's text changes while the backend is down again; b's task is cancelled (row deleted)
    backend.down = True
    eng.update_memory(a, "first text, corrected")
    eng.delete_memory(b)
    eng.queue._complete(work, np.stack([fake_vector(r[0]) for _, r in work]))  # vectors of the texts as read
    assert db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (a,)) == [(None,)]
    assert [t[1] for t in tasks(eng.db.path)] == [embed_payload("memories", a)]  # kept: the new text still needs a vector
    backend.down = False
    eng.queue.run_once()
    assert db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (a,)) == [
        (to_blob(fake_vector("first text, corrected")),)]


def test_old_queue_table_is_upgraded(tmp_path):
    path = tmp_path / "legacy.db"
    new_engine(path).close()
    conn = sqlite3.connect(path)
    conn.executescript("""
        DROP TABLE pending_memory_tasks;
        CREATE TABLE pending_memory_tasks (id INTEGER PRIMARY KEY AUTOINCREMENT, task_type TEXT NOT NULL,
            agent_id TEXT NOT NULL, project_id TEXT NOT NULL DEFAULT '', payload TEXT NOT NULL,
            retries INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL DEFAULT (datetime('now')));
        INSERT INTO pending_memory_tasks(task_type, agent_id, payload) VALUES ('archive_episode', 'a', '{}');
    """)
    conn.close()
    eng = new_engine(path)
    try:
        assert wait_until(lambda: eng.queue_status()["failed"] == 1)
        (status, error), = db_rows(path, "SELECT status, last_error FROM pending_memory_tasks")
        assert status == "failed" and "archive_episode" in error
    finally:
        eng.close()


# --------------------------------------------------------------- crash safety
def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/embed"


def test_killed_server_leaves_queued_work_that_the_next_start_completes(tmp_path, fake_embed):
    path = tmp_path / "crash.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPERSONA_", "EMBEDDING_"))}
    env.update(CPERSONA_DB_PATH=str(path), CPERSONA_EMBEDDING_MODE="http", CPERSONA_EMBEDDING_URL=_closed_port_url())
    client = RawStdio(env, tmp_path)
    try:
        assert client.initialize()["result"]["serverInfo"]["name"] == "cloto-mcp-cpersona"
        stored = [client.tool("store", {"agent_id": "kai", "message": {"content": f"crash row {i} about lighthouses"}})
                  for i in range(3)]
        assert [s["embedded"] for s in stored] == [False] * 3
        ep = client.tool("archive_episode", {"agent_id": "kai", "summary": "lighthouse maintenance session"})
        assert ep["embedded"] is False
        assert client.tool("get_queue_status", {})["pending"] == 4
    finally:
        client.proc.kill()  # SIGKILL: no shutdown, no checkpoint
        client.proc.wait(10)
    assert client.proc.returncode == -9
    assert nulls(path) == 4 and [t[2] for t in tasks(path)] == ["pending"] * 4

    fake_embed.fail = False

    async def scenario(mcp):
        done = await anyio.to_thread.run_sync(lambda: wait_until(lambda: nulls(path) == 0, 30))
        status = await mcp.ok("get_queue_status")
        hit = await mcp.ok("recall", {"agent_id": "kai", "query": "lighthouses crash row", "deep": True,
                                      "verbose": True})
        return done, status, hit

    run = run_mcp(scenario, path, env={"CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": fake_embed.url})
    done, status, hit = run.result
    assert done is True
    assert status["pending"] == 0 and status["failed"] == 0 and status["running"] is True
    assert tasks(path) == []
    (blob,) = db_rows(path, "SELECT embedding FROM memories WHERE content = 'crash row 0 about lighthouses'")[0]
    assert blob == to_blob(fake_vector("crash row 0 about lighthouses"))
    assert any("vector" in m["match_reason"]["retrievers"] for m in hit["messages"])
