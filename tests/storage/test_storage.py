"""Schema v13 on disk: tables, columns, FTS5 trigram tables and
their six triggers, unique indexes, WAL, version stamp, idempotent reopen, refusal of newer
files and of non-SQLite files."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys

import pytest
from cpersona.errors import SchemaTooNew, StorageError
from cpersona.storage import schema

from conftest import assert_one_line_error, clean_env, db_rows, new_engine


@pytest.fixture
def db_file(tmp_path):
    """A file created by the Engine (schema applied) and closed again, with one row per table."""
    path = tmp_path / "s.db"
    eng = new_engine(path)
    assert eng.store("a", "hello storage world", msg_id="m1")["result"] == "stored"
    assert eng.archive_episode("a", "a summary of the session", keywords="alpha beta")["ok"] is True
    eng.close()
    return path


def _master(path, kind):
    return {name: sql for name, sql in db_rows(path, "SELECT name, sql FROM sqlite_master WHERE type = ?", (kind,))}


def _columns(path, table):
    # cid, name, type, notnull, dflt_value, pk
    return [(r[1], r[2].upper(), r[3], r[4], r[5]) for r in db_rows(path, f"PRAGMA table_info({table})")]


# ------------------------------------------------------------------- tables
def test_tables_exist(db_file):
    tables = set(_master(db_file, "table"))
    expected = {"schema_version", "memories", "episodes", "profiles", "pending_memory_tasks", "memories_fts", "episodes_fts"}
    assert expected <= tables


def test_memories_columns(db_file):
    assert _columns(db_file, "memories") == [
        ("id", "INTEGER", 0, None, 1),
        ("agent_id", "TEXT", 1, None, 0),
        ("project_id", "TEXT", 1, "''", 0),
        ("msg_id", "TEXT", 1, "''", 0),
        ("content", "TEXT", 1, None, 0),
        ("source", "TEXT", 1, "'{}'", 0),
        ("timestamp", "TEXT", 1, None, 0),
        ("metadata", "TEXT", 1, "'{}'", 0),
        ("embedding", "BLOB", 0, None, 0),
        ("channel", "TEXT", 1, "''", 0),
        ("recall_count", "INTEGER", 1, "0", 0),
        ("last_recalled_at", "TEXT", 0, None, 0),
        ("locked", "INTEGER", 1, "0", 0),
        ("created_at", "TEXT", 1, "datetime('now')", 0),
    ]


def test_episodes_columns(db_file):
    assert _columns(db_file, "episodes") == [
        ("id", "INTEGER", 0, None, 1),
        ("agent_id", "TEXT", 1, None, 0),
        ("project_id", "TEXT", 1, "''", 0),
        ("summary", "TEXT", 1, None, 0),
        ("keywords", "TEXT", 1, "''", 0),
        ("embedding", "BLOB", 0, None, 0),
        ("start_time", "TEXT", 0, None, 0),
        ("end_time", "TEXT", 0, None, 0),
        ("resolved", "INTEGER", 1, "0", 0),
        ("channel", "TEXT", 1, "''", 0),
        ("created_at", "TEXT", 1, "datetime('now')", 0),
    ]


def test_profiles_and_queue_columns(db_file):
    assert [c[0] for c in _columns(db_file, "profiles")] == [
        "id", "agent_id", "project_id", "user_id", "content", "updated_at"
    ]
    assert [c[0] for c in _columns(db_file, "pending_memory_tasks")] == [
        "id", "task_type", "agent_id", "project_id", "payload", "retries", "created_at",
        # ours, additive: failure state of the task queue
        "status", "last_error", "updated_at", "not_before",
    ]
    assert [c[0] for c in _columns(db_file, "schema_version")] == ["version", "applied_at"]
    # profiles: UNIQUE(agent_id, user_id) is the upsert key
    conn = sqlite3.connect(db_file)
    try:
        conn.execute("INSERT INTO profiles(agent_id, content) VALUES ('a', 'p1')")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO profiles(agent_id, content) VALUES ('a', 'p2')")
    finally:
        conn.rollback()
        conn.close()


def test_ids_are_autoincrement(db_file):
    ddl = _master(db_file, "table")
    assert "AUTOINCREMENT" in ddl["memories"].upper()
    assert "AUTOINCREMENT" in ddl["episodes"].upper()


def test_created_at_is_naive_utc_and_embedding_null_in_mode_none(db_file):
    (created, emb, ts), = db_rows(db_file, "SELECT created_at, embedding, timestamp FROM memories")
    assert len(created) == 19 and created[10] == " "  # YYYY-MM-DD HH:MM:SS
    assert emb is None
    assert ts.endswith("+00:00") and "T" in ts  # default caller timestamp: server UTC now, ISO-8601


# ---------------------------------------------------------------------- FTS
def test_fts_tables_are_trigram_external_content(db_file):
    ddl = _master(db_file, "table")
    mem = ddl["memories_fts"].replace(" ", "").lower()
    ep = ddl["episodes_fts"].replace(" ", "").lower()
    assert "usingfts5(content," in mem and "content=memories" in mem and "content_rowid=id" in mem
    assert "tokenize='trigram'" in mem
    assert "usingfts5(summary,keywords," in ep and "content=episodes" in ep and "tokenize='trigram'" in ep
    # trigram = case-insensitive substring match
    assert db_rows(db_file, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"LLO STO\"'") == [(1,)]
    assert db_rows(db_file, "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH '\"lph\"'") == [(1,)]


def test_six_fts_triggers_the_word_index_and_the_declared_graph_triggers(db_file):
    triggers = _master(db_file, "trigger")
    assert set(triggers) == {
        "memories_fts_ai", "memories_fts_ad", "memories_fts_au", "episodes_ai", "episodes_ad", "episodes_au",
        "memories_words_ad", "memories_words_au",
        "associations_entities_ad", "associations_memories_ad", "associations_episodes_ad",
    }
    norm = {k: " ".join(v.split()).upper() for k, v in triggers.items()}
    assert "AFTER INSERT ON MEMORIES" in norm["memories_fts_ai"]
    assert "AFTER DELETE ON MEMORIES" in norm["memories_fts_ad"]
    assert "AFTER UPDATE OF CONTENT ON MEMORIES WHEN OLD.CONTENT <> NEW.CONTENT" in norm["memories_fts_au"]
    assert "AFTER INSERT ON EPISODES" in norm["episodes_ai"]
    assert "AFTER DELETE ON EPISODES" in norm["episodes_ad"]
    assert (
        "AFTER UPDATE OF SUMMARY, KEYWORDS ON EPISODES WHEN OLD.SUMMARY <> NEW.SUMMARY OR OLD.KEYWORDS <> NEW.KEYWORDS"
        in norm["episodes_au"]
    )


def _fts_data(conn, table):
    return conn.execute(f"SELECT id, block FROM {table}_data ORDER BY id").fetchall()


def test_recall_count_update_does_not_touch_fts_but_content_update_does(db_file):
    conn = sqlite3.connect(db_file)
    try:
        before = _fts_data(conn, "memories_fts")
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        with conn:
            conn.execute("UPDATE memories SET recall_count = recall_count + 1, last_recalled_at = datetime('now'), locked = 1")
        conn.set_trace_callback(None)
        assert _fts_data(conn, "memories_fts") == before
        assert not [s for s in statements if "memories_fts" in s]

        with conn:
            conn.execute("UPDATE memories SET content = 'goodbye storage planet' WHERE id = 1")
        assert _fts_data(conn, "memories_fts") != before
        match = "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
        assert conn.execute(match, ('"planet"',)).fetchall() == [(1,)]
        assert conn.execute(match, ('"hello"',)).fetchall() == []

        # episodes: resolved/channel updates do not touch FTS, keyword updates do
        ep_before = _fts_data(conn, "episodes_fts")
        with conn:
            conn.execute("UPDATE episodes SET resolved = 1, end_time = '2026-01-01T00:00:00Z'")
        assert _fts_data(conn, "episodes_fts") == ep_before
        with conn:
            conn.execute("UPDATE episodes SET keywords = 'gamma delta' WHERE id = 1")
        ep_match = "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?"
        assert conn.execute(ep_match, ('"gamma"',)).fetchall() == [(1,)]
        assert conn.execute(ep_match, ('"alpha"',)).fetchall() == []

        # delete triggers remove postings
        with conn:
            conn.execute("DELETE FROM memories")
            conn.execute("DELETE FROM episodes")
        assert conn.execute(match, ('"planet"',)).fetchall() == []
        assert conn.execute(ep_match, ('"gamma"',)).fetchall() == []
        assert conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')").rowcount is not None
    finally:
        conn.close()


def test_fts_disabled_creates_no_fts_objects(tmp_path):
    path = tmp_path / "nofts.db"
    eng = new_engine(path, fts_enabled=False)
    try:
        assert eng.db.fts_enabled is False
        assert eng.store("a", "plain row")["result"] == "stored"
    finally:
        eng.close()
    names = {r[0] for r in db_rows(path, "SELECT name FROM sqlite_master")}
    assert "memories_fts" not in names and "episodes_fts" not in names
    assert not any(n.endswith(("_ai", "_ad", "_au")) and not n.startswith("associations_") for n in names)
    assert db_rows(path, "SELECT MAX(version) FROM schema_version") == [(13,)]


def test_enabling_fts_later_indexes_existing_rows(tmp_path):
    path = tmp_path / "late.db"
    eng = new_engine(path, fts_enabled=False)
    eng.store("a", "written while fts was off")
    eng.close()
    eng = new_engine(path, fts_enabled=True)
    eng.close()
    assert db_rows(path, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"while fts\"'") == [(1,)]
    assert db_rows(path, "PRAGMA user_version")[0][0] & schema.FTS_REBUILD_PENDING == 0


# ------------------------------------------------------------------ indexes
def _index_info(path, table):
    out = {}
    for _seq, name, unique, _origin, partial in db_rows(path, f"PRAGMA index_list({table})"):
        cols = [r[2] for r in db_rows(path, f"PRAGMA index_info({name})")]
        out[name] = (bool(unique), bool(partial), cols)
    return out


def test_unique_dedup_indexes(db_file):
    idx = _index_info(db_file, "memories")
    assert idx["idx_memories_dedup_content"] == (True, False, ["agent_id", "project_id", "channel", "content"])
    assert idx["idx_memories_dedup_msg_id"] == (True, True, ["agent_id", "project_id", "msg_id"])
    assert "WHERE MSG_ID != ''" in " ".join(_master(db_file, "index")["idx_memories_dedup_msg_id"].upper().split())


def test_secondary_indexes(db_file):
    mem = _index_info(db_file, "memories")
    ep = _index_info(db_file, "episodes")
    assert mem["idx_memories_agent"][2] == ["agent_id", "created_at"]
    assert mem["idx_memories_msg_id"][2] == ["agent_id", "msg_id"]
    assert mem["idx_memories_agent_channel"][2] == ["agent_id", "channel", "created_at"]
    assert mem["idx_memories_isolation"][2] == ["agent_id", "project_id", "created_at"]
    assert ep["idx_episodes_agent"][2] == ["agent_id", "created_at"]
    assert ep["idx_episodes_agent_channel"][2] == ["agent_id", "channel", "created_at"]
    assert ep["idx_episodes_isolation"][2] == ["agent_id", "project_id", "created_at"]


def test_unique_indexes_are_exact_bucket_backstops(db_file):
    conn = sqlite3.connect(db_file)
    insert = "INSERT INTO memories(agent_id, project_id, channel, msg_id, content, timestamp) VALUES (?, ?, ?, ?, ?, '')"
    try:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(insert, ("a", "", "", "", "hello storage world"))  # same (agent, project, channel, content)
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(insert, ("a", "", "", "m1", "other text"))  # same (agent, project, msg_id)
        # other bucket / channel / empty msg_id are fine (the index is exact, not γ)
        conn.execute(insert, ("a", "P", "", "m1", "hello storage world"))
        conn.execute(insert, ("a", "", "c1", "", "hello storage world"))
        conn.execute(insert, ("a", "", "", "", "empty msg id one"))
        conn.execute(insert, ("a", "", "", "", "empty msg id two"))
        assert conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 5
    finally:
        conn.rollback()
        conn.close()


# --------------------------------------------------------- pragmas & version
def test_wal_journal_mode_and_version_stamp(db_file):
    assert db_rows(db_file, "PRAGMA journal_mode") == [("wal",)]
    assert db_rows(db_file, "SELECT MAX(version) FROM schema_version") == [(13,)]
    assert schema.SCHEMA_VERSION == 13


def test_write_connection_pragmas(engine_none):
    conn = engine_none.db._writer
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000


def test_reopen_is_idempotent(db_file):
    before_master = db_rows(db_file, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
    before_versions = db_rows(db_file, "SELECT version FROM schema_version")
    for _ in range(2):
        eng = new_engine(db_file)
        eng.close()
    assert db_rows(db_file, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name") == before_master
    assert db_rows(db_file, "SELECT version FROM schema_version") == before_versions == [(13,)]
    assert db_rows(db_file, "SELECT id, content, msg_id FROM memories") == [(1, "hello storage world", "m1")]
    assert db_rows(db_file, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"storage\"'") == [(1,)]
    assert db_rows(db_file, "PRAGMA user_version")[0][0] & schema.FTS_REBUILD_PENDING == 0


def test_parent_directories_are_created(tmp_path):
    path = tmp_path / "deep" / "er" / "m.db"
    eng = new_engine(path)
    eng.close()
    assert path.is_file()


def test_in_memory_database_works():
    eng = new_engine(":memory:")
    try:
        assert eng.store("a", "kept in RAM only")["result"] == "stored"
        assert eng.list_memories("a")["count"] == 1
    finally:
        eng.close()


# ---------------------------------------------------- refusing foreign files
def _fingerprint(path):
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns, os.stat(path).st_size


def _stamp_newer(path, version=22):
    """Stamp a version newer than ours AND than every original release (2.6.14 is v21:
    v14…v21 files with the v13 tables are the original's, opened in place)."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))
    conn.close()


def test_newer_schema_in_wal_file_is_refused_untouched(db_file):
    _stamp_newer(db_file)
    before = _fingerprint(db_file)
    with pytest.raises(SchemaTooNew) as err:
        new_engine(db_file)
    assert "22" in str(err.value) and "13" in str(err.value) and "import --from-db" in str(err.value)
    assert _fingerprint(db_file) == before
    assert db_rows(db_file, "SELECT MAX(version) FROM schema_version") == [(22,)]


def test_newer_schema_in_rollback_journal_file_is_refused_untouched(tmp_path):
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
        conn.execute("INSERT INTO schema_version(version) VALUES (15)")
        conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, future_column TEXT)")
    conn.close()
    before = _fingerprint(path)
    with pytest.raises(SchemaTooNew):
        new_engine(path)
    assert _fingerprint(path) == before
    assert db_rows(path, "PRAGMA journal_mode") == [("delete",)]  # not switched to WAL
    assert [r[1] for r in db_rows(path, "PRAGMA table_info(memories)")] == ["id", "future_column"]


def test_non_sqlite_file_gives_clear_error_and_is_untouched(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = _fingerprint(path)
    with pytest.raises(StorageError) as err:
        new_engine(path)
    assert "not a database" in str(err.value)
    assert _fingerprint(path) == before


def _cli(tmp_path, db):
    return subprocess.run(
        [sys.executable, "-m", "cpersona"],
        env=clean_env(CPERSONA_DB_PATH=str(db), CPERSONA_EMBEDDING_MODE="none"),
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )


def test_cli_refuses_newer_and_foreign_files_with_one_line(db_file, tmp_path):
    _stamp_newer(db_file, 99)
    newer_before = _fingerprint(db_file)
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"\x00garbage" * 500)
    foreign_before = _fingerprint(foreign)

    for path, needle, before in ((db_file, "v99", newer_before), (foreign, "not a database", foreign_before)):
        proc = _cli(tmp_path, path)
        assert_one_line_error(proc, needle)
        assert _fingerprint(path) == before
