"""Who may change the database's recorded embedding model, and what a change does.

* A command run with other embedding settings than the server (`model_authority=False`,
  every CLI command but reembed) never re-records the model: it reports the mismatch with
  the fix and searches by keyword; the server keeps finding rows by their vectors.
* The server's start decides (`_prepare_identity`): a different model or dimension — or
  vectors of an original database that carry no model — starts a migration that is never
  mixed into a ranking, announced in every recall's advisory, re-embedded by itself in
  the background through the task queue (visible in get_queue_status and stats) and
  resumable; vectors without a record that the active model verifiably made are adopted.
* A stale calibration found at start is redone on that start once the new vectors exist.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cpersona.config import Settings
from cpersona.devtools.fake_embed import FakeEmbedServer, fake_vector
from cpersona.service.engine import Engine
from cpersona.service.requests import RecallRequest

from conftest import clean_env, db_rows, wait_until
from quality_helpers import HashEmbedder, session_corpus, store_rows

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"


class Hash384(HashEmbedder):
    """Another model of another dimension."""

    dim = 384

    def embed(self, texts):
        self.calls += 1
        return np.stack([fake_vector(t, self.dim) for t in texts])


class Negated(HashEmbedder):
    """Another model of the same dimension."""

    def embed(self, texts):
        return -super().embed(texts)


def engine(db, backend, authority=True, start=True, **overrides):
    overrides.setdefault("calibrate_on_model_change", False)
    overrides.setdefault("task_retry_delay", 0.2)
    settings = Settings.from_env({}, db_path=str(db), **overrides)
    return Engine(settings, embedder=backend, start_background=start, model_authority=authority)


def stored_by_model_a(tmp_path, text: str, n: int) -> Path:
    """A new file m.db holding `n` memories `text.format(i)` with vectors of "model-a"."""
    db = tmp_path / "m.db"
    old = engine(db, HashEmbedder("model-a"))
    store_rows(old, [(text.format(i), "") for i in range(n)])
    old.close()
    return db


def recorded(db) -> dict:
    rows = db_rows(db, "SELECT value FROM cpersona_meta WHERE key = 'vectors'")
    return json.loads(rows[0][0]) if rows else {}


def test_a_command_with_another_model_never_re_records_it(tmp_path):
    db = tmp_path / "m.db"
    server = engine(db, HashEmbedder("model-a"))
    try:
        store_rows(server, [("the harbour ferry leaves at dawn", ""), ("tax return due in april", "")])
        before = recorded(db)
        assert before["model"] == "model-a" and before["pending"] is None
        cli = engine(db, Negated("model-b"), authority=False, start=False)
        try:
            res = cli.recall(RecallRequest("a", "harbour ferry", 5))
            assert res["messages"] and "harbour" in res["messages"][-1]["content"]  # keyword search still answers
            advisory = res["advisory"]
            assert advisory["severity"] == "fault" and "model-a" in advisory["evidence"]
            assert "cpersona reembed" in advisory["runbook"] and "CPERSONA_EMBEDDING" in advisory["runbook"]
            stored = cli.store("a", "a row stored by the command")
            assert stored["result"] == "stored" and stored["embedded"] is False  # queued for the server's model
        finally:
            cli.close()
        assert recorded(db) == before  # the record is untouched
        found = server.recall(RecallRequest("a", "ferry at dawn", 5))
        assert "advisory" not in found and found["messages"][-1]["match_reason"]["signal"] != "keyword"
        server.queue.wake()  # what its idle poll does within IDLE_POLL seconds
        assert wait_until(lambda: server.queue.pending() == 0)  # the server embeds the command's row
        assert db_rows(db, "SELECT COUNT(*) FROM memories WHERE embedding IS NULL") == [(0,)]
    finally:
        server.close()


def test_the_server_start_migrates_in_the_background_and_tells_every_recall(tmp_path):
    db = stored_by_model_a(tmp_path, "note {} about the harbour ferries and tides", 40)
    new = engine(db, Hash384("model-b"), start=False)
    try:
        assert new._prepare_identity() is True  # what the queue worker runs first at start
        state = recorded(db)
        assert state["model"] == "model-b" and state["pending"]["from_model"] == "model-a"
        status = new.queue_status()
        assert status["pending"] == 1 and status["reembed"]["remaining"] == 40 and status["reembed"]["to_dim"] == 384
        stats = new.stats()
        assert stats["stored_model"] == "model-b" and stats["awaiting_reembed"] == 40
        first = new.recall(RecallRequest("a", "harbour ferries", 5))
        assert first["advisory"]["reason"].startswith("stored vectors come from another embedding model")
        assert "40 rows still hold vectors of model-a" in first["advisory"]["evidence"]
        new.start_background()
        assert wait_until(lambda: recorded(db)["pending"] is None, timeout=60)
        assert wait_until(lambda: new.queue_status()["pending"] == 0)
        assert "reembed" not in new.queue_status() and new.stats()["awaiting_reembed"] == 0
        blobs = db_rows(db, "SELECT DISTINCT length(embedding) FROM memories")
        assert blobs == [(4 * 384,)]
        done = new.recall(RecallRequest("a", "harbour ferries", 5))
        assert "advisory" not in done and done["messages"]
    finally:
        new.close()


def test_an_interrupted_background_reembed_resumes_where_it_stopped(tmp_path):
    db = stored_by_model_a(tmp_path, "row {} harbour", 70)
    first = engine(db, Hash384("model-b"), start=False)
    first._prepare_identity()
    task = first.queue.reembedder
    from cpersona.jobs.queued import Task
    row = db_rows(db, "SELECT id, task_type, agent_id, payload, retries FROM pending_memory_tasks")[0]
    assert task.step(Task(row)) is None  # one batch (32 rows), then the process "dies"
    first.close()
    assert recorded(db)["pending"]["watermark"]["memories"] == 32
    second = engine(db, Hash384("model-b"))
    try:
        assert wait_until(lambda: recorded(db)["pending"] is None, timeout=60)
        assert db_rows(db, "SELECT COUNT(*) FROM memories WHERE length(embedding) = 1536") == [(70,)]
    finally:
        second.close()


class Restarting(Hash384):
    """A bundled model whose worker dies in the middle of a batch once, then is loaded again."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id)
        self.died = False

    def wait_ready(self, timeout: float) -> bool:
        return True

    def embed(self, texts):
        if self.calls == 1 and not self.died:
            self.died = True
            from cpersona.errors import EmbeddingNotReady
            raise EmbeddingNotReady("local model 'use': the embedding worker was killed; a new worker is loading")
        return super().embed(texts)


def test_foreground_reembed_waits_for_a_model_that_restarts_and_finishes(tmp_path):
    from cpersona.jobs.reembed import reembed

    db = stored_by_model_a(tmp_path, "row {} harbour", 70)
    cli = engine(db, Restarting("model-b"), start=False)
    try:
        report = reembed(cli.gateway, cli.db, batch=32)
    finally:
        cli.close()
    assert cli.gateway.embedder.died and (report.rows, report.total) == (70, 70)
    assert recorded(db)["pending"] is None
    assert db_rows(db, "SELECT COUNT(*) FROM memories WHERE length(embedding) = 1536") == [(70,)]


def _legacy_db(tmp_path, dim: int, made_by=None) -> Path:
    """The 2.5.4 fixture with vectors written the way the original writes them (no record)."""
    db = tmp_path / "legacy.db"
    shutil.copyfile(FIXTURES / "original-2.5.4" / "memory.db", db)
    db.chmod(0o600)
    conn = sqlite3.connect(db)
    with conn:
        for row_id, text in conn.execute("SELECT id, content FROM memories").fetchall():
            vec = made_by(text) if made_by else np.random.default_rng(row_id).standard_normal(dim)
            vec = np.asarray(vec, np.float32) / np.linalg.norm(vec)
            conn.execute("UPDATE memories SET embedding = ? WHERE id = ?", (vec.astype("<f4").tobytes(), row_id))
    conn.close()
    return db


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures is absent")
def test_an_original_database_with_vectors_of_another_model_is_re_embedded(tmp_path):
    db = _legacy_db(tmp_path, 768)
    cli = engine(db, HashEmbedder("model-a"), authority=False, start=False)
    try:
        stats = cli.stats()  # before any server: the vectors are named for what they are
        assert stats["stored_model"] is None and stats["unrecorded"] == {"rows": 8, "dims": {768: 8}, "labels": {}}
        res = cli.recall(RecallRequest("kai", "staging database port", 5))
        assert "unrecorded model" in res["advisory"]["evidence"] and recorded(db) == {}
    finally:
        cli.close()
    server = engine(db, HashEmbedder("model-a"))
    try:
        assert wait_until(lambda: recorded(db).get("model") == "model-a" and recorded(db)["pending"] is None, 60)
        assert db_rows(db, "SELECT COUNT(*) FROM memories WHERE length(embedding) = 2048") == [(8,)]
        found = server.recall(RecallRequest("kai", "staging database port", 5))
        assert any(m["content"].startswith("The staging database") for m in found["messages"])
    finally:
        server.close()


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures is absent")
def test_unrecorded_vectors_the_active_model_made_are_adopted(tmp_path):
    db = _legacy_db(tmp_path, 512, made_by=lambda text: fake_vector(text, 512))
    before = db_rows(db, "SELECT embedding FROM memories ORDER BY id")
    server = engine(db, HashEmbedder("model-a"), start=False)
    try:
        assert server._prepare_identity()
        assert recorded(db) == {"model": "model-a", "dim": 512, "pending": None}  # verified, no re-embedding
        assert db_rows(db, "SELECT embedding FROM memories ORDER BY id") == before
        assert server.queue_status()["pending"] == 0
    finally:
        server.close()


def test_the_stale_calibration_is_redone_on_the_start_that_changed_the_model(tmp_path):
    db = tmp_path / "cal.db"
    first = engine(db, HashEmbedder("model-a"))
    store_rows(first, session_corpus())
    assert first.calibrate_threshold("a")["ok"]
    first.close()
    sidecar = Path(str(db) + ".calibration.json")
    assert json.loads(sidecar.read_text())["embedding_model"] == "model-a"
    second = engine(db, Hash384("model-b"), calibrate_on_model_change=True, calibrate_min_rows=10)
    try:
        assert wait_until(lambda: second.calibration.startup.finished_at != "", timeout=90)
        assert second.calibration.startup.error == "" and second.calibration.startup.agents == 1
        data = json.loads(sidecar.read_text())
        assert (data["embedding_model"], data["embedding_dim"]) == ("model-b", 384)
        assert recorded(db)["pending"] is None
    finally:
        second.close()


def test_cli_recall_with_other_settings_leaves_the_record_alone(tmp_path):
    db = tmp_path / "cli.db"
    servers = [FakeEmbedServer(dim=512).start(), FakeEmbedServer(dim=256).start()]
    try:
        def cli(*args, url):
            env = clean_env(CPERSONA_DB_PATH=str(db), CPERSONA_EMBEDDING_MODE="http", CPERSONA_EMBEDDING_URL=url)
            return subprocess.run([sys.executable, "-m", "cpersona", *args], env=env, capture_output=True,
                                  text=True, timeout=120, cwd=tmp_path)

        assert cli("store", "the harbour ferry leaves at dawn", "--agent", "a", url=servers[0].url).returncode == 0
        before = recorded(db)
        assert before["dim"] == 512
        out = cli("recall", "harbour ferry", "--agent", "a", url=servers[1].url)
        assert out.returncode == 0 and "harbour ferry" in out.stdout
        assert "differs" in out.stdout and "cpersona reembed" in out.stdout
        assert recorded(db) == before
    finally:
        for s in servers:
            s.stop()
