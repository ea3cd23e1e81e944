"""Starts that used to fail or half-work: an SQLite without the FTS5 trigram tokenizer (a
fresh file, and a file created elsewhere), FTS switched off and on again, and a migration
racing another process's."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

import pytest
from cpersona.service.requests import RecallRequest
from cpersona.storage import db, migration, schema
from cpersona.storage.db import Database

from conftest import db_rows, new_engine


def _recall(eng, query: str) -> dict:
    return eng.recall(RecallRequest(agent_id="kai", query=query))


def _contents(out: dict) -> list[str]:
    return [m["content"] for m in out["messages"]]


def _triggers(path) -> set[str]:
    return {r[0] for r in db_rows(path, "SELECT name FROM sqlite_master WHERE type = 'trigger'")}


def _rebuild_pending(path) -> bool:
    return bool(db_rows(path, "PRAGMA user_version")[0][0] & schema.FTS_REBUILD_PENDING)


@pytest.fixture
def no_trigram(monkeypatch):
    """This process's SQLite as one built without the trigram tokenizer: the FTS tables
    are declared with a tokenizer no SQLite has, so creating one fails exactly as
    `tokenize='trigram'` fails there ("no such tokenizer")."""
    for name, ddl in schema.FTS_TABLES.items():
        monkeypatch.setitem(schema.FTS_TABLES, name, ddl.replace("'trigram'", "'no_trigram_here'"))


def _tokenizer_renamed(path, old: str, new: str) -> None:
    """Rewrite the tokenizer named by the file's FTS tables (how a file created where the
    tokenizer exists looks to a SQLite that lacks it)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE type = 'table' AND name LIKE '%_fts'",
                 (f"'{old}'", f"'{new}'"))
    conn.commit()
    conn.close()


def _exercise_writes(eng) -> None:
    """Every kind of write works: store, update, lock, delete, archive, profile, erase."""
    stored = eng.store("kai", "the harbour crane manual, chapter two")
    assert stored["result"] == "stored", stored
    other = eng.store("kai", "a note to be changed and deleted")["id"]
    assert eng.update_memory(other, "a note that was changed", "kai")["ok"] is True
    assert eng.lock_memory(stored["id"], "kai")["ok"] is True
    assert eng.delete_memory(other, "kai")["ok"] is True
    assert eng.archive_episode("kai", "crane maintenance session", keywords="crane harbour")["ok"] is True
    assert eng.update_profile("kai", "operates the harbour crane")["profiles_updated"] == 1
    assert eng.store("gone", "a row of an agent erased below")["result"] == "stored"
    assert eng.delete_agent_data("gone")["deleted_memories"] == 1


def test_fresh_database_without_trigram_starts_degraded_and_says_so(tmp_path, no_trigram, caplog):
    caplog.set_level(logging.WARNING)
    eng = new_engine(tmp_path / "fresh.db")
    try:
        assert not eng.db.fts_enabled and "no such tokenizer" in eng.db.fts_problem
        _exercise_writes(eng)
        out = _recall(eng, "crane manual")
        assert "the harbour crane manual, chapter two" in _contents(out)  # the LIKE fallback serves
        advisory = out["advisory"]
        assert advisory["severity"] == "fault" and "full-text index unavailable" in advisory["reason"]
        assert "no such tokenizer" in advisory["evidence"] and "trigram" in advisory["runbook"]
        assert eng.stats()["fts_problem"] == eng.db.fts_problem
    finally:
        eng.close()
    notices = [r for r in caplog.records if "full-text search is unavailable" in r.getMessage()]
    assert len(notices) == 1


def test_file_created_elsewhere_stores_and_recalls_without_the_tokenizer_then_heals(tmp_path):
    path = tmp_path / "moved.db"
    eng = new_engine(path)
    eng.store("kai", "written where trigram existed")
    eng.close()
    _tokenizer_renamed(path, "trigram", "no_trigram_here")

    eng = new_engine(path)
    try:
        assert not eng.db.fts_enabled
        _exercise_writes(eng)
        assert "written where trigram existed" in _contents(_recall(eng, "trigram existed"))
        assert "the harbour crane manual, chapter two" in _contents(_recall(eng, "crane manual"))
        assert "advisory" in _recall(eng, "crane")
    finally:
        eng.close()
    assert not (_triggers(path) & set(schema.FTS_TRIGGERS)) and _rebuild_pending(path)

    _tokenizer_renamed(path, "no_trigram_here", "trigram")  # back on an SQLite with the tokenizer
    eng = new_engine(path)
    try:
        assert eng.db.fts_enabled
        found = _recall(eng, "crane manual")["messages"]
        assert any(m["content"] == "the harbour crane manual, chapter two" and m["match_reason"].get("lexical")
                   for m in found), found
    finally:
        eng.close()
    assert set(schema.FTS_TRIGGERS) <= _triggers(path) and not _rebuild_pending(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
    conn.close()


def test_fts_disabled_drops_the_triggers_and_enabling_it_rebuilds_the_index(tmp_path):
    path = tmp_path / "toggle.db"
    new_engine(path).close()
    _tokenizer_renamed(path, "trigram", "no_trigram_here")  # old triggers that would fail every write
    eng = new_engine(path, fts_enabled=False)
    try:
        _exercise_writes(eng)
        assert eng.db.fts_problem == "" and "full-text" not in _recall(eng, "crane")["advisory"]["reason"]
    finally:
        eng.close()
    assert not (_triggers(path) & set(schema.FTS_TRIGGERS)) and _rebuild_pending(path)
    _tokenizer_renamed(path, "no_trigram_here", "trigram")
    eng = new_engine(path)
    try:
        assert "the harbour crane manual, chapter two" in _contents(_recall(eng, "crane manual"))
        assert eng.db.fts_enabled and not _rebuild_pending(path)
    finally:
        eng.close()


def test_an_up_to_date_file_opens_without_taking_the_write_lock(tmp_path, monkeypatch):
    path = tmp_path / "busy.db"
    new_engine(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    monkeypatch.setattr(db, "MIGRATION_WAIT_S", 0.0)
    try:
        opened = Database(str(path), busy_timeout_ms=50)
        opened.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_migration_rechecks_every_step_after_taking_the_lock(tmp_path):
    """Another process migrates the file between this one's check and its lock: nothing
    is applied twice ("duplicate column name", "trigger already exists")."""
    path = tmp_path / "race.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert not migration.up_to_date(conn, True)

    def begin_after_the_other_process(c: sqlite3.Connection) -> None:
        Database(str(path)).close()  # the other process, fully migrating the file first
        c.execute("BEGIN EXCLUSIVE")

    assert migration.migrate(conn, True, str(path), begin=begin_after_the_other_process) == []
    assert migration.up_to_date(conn, True)
    conn.close()


def test_opening_waits_for_another_process_that_is_migrating(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    path = tmp_path / "slow.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE early(x)")  # a migration in progress elsewhere
    release = threading.Timer(0.6, lambda: holder.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    opened = Database(str(path), busy_timeout_ms=100)
    try:
        assert time.monotonic() - started >= 0.5
        assert migration.up_to_date(opened.reader(), True)
        assert any("waiting for another process" in r.getMessage() for r in caplog.records)
    finally:
        opened.close()
        release.join()
        holder.close()
