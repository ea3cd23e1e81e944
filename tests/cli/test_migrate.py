"""`cpersona migrate`: SQLite → PostgreSQL → SQLite copies every row with its id, the recorded
model and the calibration state; verified by counts and checksums; resumable; refuses a
target filled from elsewhere. Skipped without CPERSONA_TEST_DB_URL."""

from __future__ import annotations

import json

import pytest
from cpersona.cli import main
from cpersona.service.requests import RecallRequest

from backends import pg_schema
from conftest import db_rows, new_engine

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'")


@pytest.fixture
def pg(monkeypatch):
    with pg_schema() as url:
        for key in ("CPERSONA_DB_URL", "CPERSONA_DB_PATH"):
            monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("COLUMNS", "200")
        yield url


@pytest.fixture
def source(tmp_path, fake_embed):
    """A SQLite file with memories (vectors), an episode, declared associations, a profile, a
    queued task and a calibration sidecar."""
    path = tmp_path / "src.db"
    eng = new_engine(path, embedding_mode="http", embedding_url=fake_embed.url, task_queue_enabled=False)
    for i in range(60):
        eng.store(f"agent{i % 2}", f"memory {i} about the harbour, topic {i % 7} 東京{i % 3}", msg_id=f"m{i}")
    eng.archive_episode("agent0", "we planned the harbour survey", keywords="harbour survey")
    assert eng.declare_associations("agent0", {
        "entities": [{"name": "harbour", "aliases": ["港"]}, {"name": "survey team"}],
        "relations": [{"subject": "survey team", "predicate": "maps", "object": "harbour"},
                      {"subject": "mem:3", "predicate": "supersedes", "object": "mem:1"}]}, anchor_ref="ep:1")["ok"]
    eng.update_profile("agent0", "prefers short answers")
    assert eng.calibrate_threshold("agent0")["ok"] is True
    fake_embed.fail = True
    eng.store("agent1", "stored while the embedder was down")  # leaves a queued embed task
    fake_embed.fail = False
    eng.close()
    return path


def run(capsys, *args: str) -> tuple[int, str, str]:
    status = main(["migrate", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


def _recall(engine, query: str) -> list[str]:
    return [m["content"] for m in engine.recall(RecallRequest(agent_id="agent0", query=query))["messages"]]


def test_round_trip_keeps_every_row_and_answers_the_same(pg, source, tmp_path, capsys, monkeypatch, fake_embed):
    monkeypatch.setenv("CPERSONA_DB_PATH", str(source))
    status, out, err = run(capsys, "--to", pg, "--batch", "7")
    assert status == 0, err
    assert out.count(" yes ") == 9 and "memories" in out and "entity_mentions" in out
    back = tmp_path / "back.db"
    status, out, err = run(capsys, "--from", pg, "--to", str(back))
    assert status == 0, err
    for table in ("memories", "episodes", "profiles", "pending_memory_tasks", "entities", "relations"):
        assert db_rows(back, f"SELECT * FROM {table} ORDER BY id") == db_rows(source, f"SELECT * FROM {table} ORDER BY id")
    for table in ("entity_aliases", "entity_mentions"):
        assert db_rows(back, f"SELECT * FROM {table} ORDER BY 1, 2") == db_rows(source, f"SELECT * FROM {table} ORDER BY 1, 2")
    assert len(db_rows(back, "SELECT * FROM entity_mentions")) == 2
    assert json.loads((tmp_path / "back.db.calibration.json").read_text()) == \
        json.loads((tmp_path / "src.db.calibration.json").read_text())
    http = {"embedding_mode": "http", "embedding_url": fake_embed.url, "task_queue_enabled": False}
    engines = [new_engine(source, **http), new_engine(back, **http), new_engine(tmp_path / "unused.db", db_url=pg, **http)]
    try:
        answers = [_recall(e, "harbour survey topic 3") for e in engines]
        assert answers[0] == answers[1] == answers[2] and answers[0]
        assert engines[2].get_recall_precision("agent0")["calibration"]["state"] == "calibrated"
        assert engines[2].store("agent0", "a new memory after the copy")["id"] > 61  # ids continue
        declared = engines[2].declare_associations("agent0", {"entities": [{"name": "pier"}]})
        assert declared["entities"][0]["id"] > 2  # and the entities' ids too
        assert [e["name"] for e in engines[2].traverse("agent0", "港")["entities"]] == ["harbour", "survey team"]
    finally:
        for e in engines:
            e.close()


def test_an_interrupted_copy_resumes(pg, source, capsys, monkeypatch):
    monkeypatch.setenv("CPERSONA_DB_PATH", str(source))
    assert run(capsys, "--to", pg)[0] == 0
    with psycopg.connect(pg, autocommit=True) as conn:  # as if the copy had stopped after id 20
        conn.execute("DELETE FROM memories WHERE id > 20")
        conn.execute("DELETE FROM profiles")
    status, out, _ = run(capsys, "--to", pg, "--verify-only")
    assert status == 1 and " NO" in out
    status, out, err = run(capsys, "--to", pg)
    assert status == 0, err
    assert out.count(" yes ") == 9


def test_refusals(pg, source, tmp_path, capsys, monkeypatch):
    other = tmp_path / "other.db"
    eng = new_engine(other)
    eng.store("x", "a row of another store")
    eng.close()
    monkeypatch.setenv("CPERSONA_DB_PATH", str(other))
    assert run(capsys, "--to", pg)[0] == 0
    monkeypatch.setenv("CPERSONA_DB_PATH", str(source))
    status, _, err = run(capsys, "--to", pg)
    assert status == 1 and "already holds 1 rows" in err and "other.db" in err
    status, _, err = run(capsys, "--to", str(source))
    assert status == 2 and "same database" in err
    status, _, err = run(capsys, "--from", str(tmp_path / "missing.db"), "--to", pg)
    assert status == 2 and "no SQLite file" in err
    status, _, err = run(capsys)
    assert status == 2 and "--to postgresql://" in err
