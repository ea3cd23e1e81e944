"""The stored format: schema v13 of the original CPersona plus our additive columns and
`cpersona_meta` table (docs/storage.md describes every table), and the migration to it.

`migrate(conn, fts_enabled)` brings any file — empty, or written by an older schema — to
the current format by running the named steps of `STEPS` in order. Every step is
idempotent (a column is added only after checking `PRAGMA table_info`, DDL uses
IF NOT EXISTS), and the version stamp is written only after all of them succeeded, so an
interrupted migration is simply run again on the next open. A file stamped with a version
newer than `SCHEMA_VERSION` raises `SchemaTooNew` before anything is written to it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from cpersona.errors import SchemaTooNew
from cpersona.util.words import index_form

log = logging.getLogger(__name__)

SCHEMA_VERSION = 13
#: PRAGMA user_version bit 0: an FTS rebuild is pending (survives a crash mid-bootstrap).
FTS_REBUILD_PENDING = 1


TABLES = {
    "schema_version": """CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    "memories": """CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        msg_id TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '{}',
        timestamp TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        embedding BLOB,
        channel TEXT NOT NULL DEFAULT '',
        recall_count INTEGER NOT NULL DEFAULT 0,
        last_recalled_at TEXT,
        locked INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    "episodes": """CREATE TABLE IF NOT EXISTS episodes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        summary TEXT NOT NULL,
        keywords TEXT NOT NULL DEFAULT '',
        embedding BLOB,
        start_time TEXT,
        end_time TEXT,
        resolved INTEGER NOT NULL DEFAULT 0,
        channel TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    "profiles": """CREATE TABLE IF NOT EXISTS profiles (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        user_id TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        updated_at TEXT NOT NULL DEFAULT (datetime('now')),
        UNIQUE(agent_id, user_id))""",
    "pending_memory_tasks": """CREATE TABLE IF NOT EXISTS pending_memory_tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_type TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        payload TEXT NOT NULL,
        retries INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL DEFAULT (datetime('now')))""",
    # Ours, beyond v13: which embedding model produced the stored vectors, calibration record.
    "cpersona_meta": """CREATE TABLE IF NOT EXISTS cpersona_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
}

#: Columns added over the original's versions v3, v6–v10, for files older than v13: (table, column, DDL).
LADDER_COLUMNS = (
    ("episodes", "resolved", "INTEGER NOT NULL DEFAULT 0"),
    ("memories", "channel", "TEXT NOT NULL DEFAULT ''"),
    ("memories", "recall_count", "INTEGER NOT NULL DEFAULT 0"),
    ("memories", "last_recalled_at", "TEXT"),
    ("memories", "locked", "INTEGER NOT NULL DEFAULT 0"),
    ("memories", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("episodes", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("profiles", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("pending_memory_tasks", "project_id", "TEXT NOT NULL DEFAULT ''"),
    ("episodes", "channel", "TEXT NOT NULL DEFAULT ''"),
    # Ours, beyond v13: failure state of queued tasks, so a task that cannot run is kept and
    # reported instead of silently dropped (see cpersona/jobs/task_queue.py).
    ("pending_memory_tasks", "status", "TEXT NOT NULL DEFAULT 'pending'"),
    ("pending_memory_tasks", "last_error", "TEXT"),
    ("pending_memory_tasks", "updated_at", "TEXT"),
    ("pending_memory_tasks", "not_before", "REAL NOT NULL DEFAULT 0"),
)

INDEXES = {
    "idx_memories_agent": "CREATE INDEX IF NOT EXISTS idx_memories_agent ON memories(agent_id, created_at DESC)",
    "idx_memories_msg_id": "CREATE INDEX IF NOT EXISTS idx_memories_msg_id ON memories(agent_id, msg_id)",
    "idx_episodes_agent": "CREATE INDEX IF NOT EXISTS idx_episodes_agent ON episodes(agent_id, created_at DESC)",
    "idx_memories_agent_channel": "CREATE INDEX IF NOT EXISTS idx_memories_agent_channel "
    "ON memories(agent_id, channel, created_at DESC)",
    "idx_episodes_agent_channel": "CREATE INDEX IF NOT EXISTS idx_episodes_agent_channel "
    "ON episodes(agent_id, channel, created_at DESC)",
    "idx_memories_isolation": "CREATE INDEX IF NOT EXISTS idx_memories_isolation "
    "ON memories(agent_id, project_id, created_at DESC)",
    "idx_episodes_isolation": "CREATE INDEX IF NOT EXISTS idx_episodes_isolation "
    "ON episodes(agent_id, project_id, created_at DESC)",
    # Ours: at most one embedding task per row; legacy task types are not affected.
    "idx_pending_tasks_embed": "CREATE UNIQUE INDEX IF NOT EXISTS idx_pending_tasks_embed "
    "ON pending_memory_tasks(payload) WHERE task_type = 'embed'",
}

UNIQUE_INDEXES = {
    "idx_memories_dedup_content": "CREATE UNIQUE INDEX IF NOT EXISTS idx_memories_dedup_content "
    "ON memories(agent_id, project_id, channel, content)",
    "idx_memories_dedup_msg_id": "CREATE UNIQUE INDEX IF NOT EXISTS idx_memories_dedup_msg_id "
    "ON memories(agent_id, project_id, msg_id) WHERE msg_id != ''",
}

FTS_TABLES = {
    "memories_fts": "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
    "content, content=memories, content_rowid=id, tokenize='trigram')",
    "episodes_fts": "CREATE VIRTUAL TABLE IF NOT EXISTS episodes_fts USING fts5("
    "summary, keywords, content=episodes, content_rowid=id, tokenize='trigram')",
}

FTS_TRIGGERS = {
    "memories_fts_ai": """CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END""",
    "memories_fts_ad": """CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content); END""",
    "memories_fts_au": """CREATE TRIGGER memories_fts_au AFTER UPDATE OF content ON memories
        WHEN old.content <> new.content BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END""",
    "episodes_ai": """CREATE TRIGGER episodes_ai AFTER INSERT ON episodes BEGIN
        INSERT INTO episodes_fts(rowid, summary, keywords) VALUES (new.id, new.summary, new.keywords); END""",
    "episodes_ad": """CREATE TRIGGER episodes_ad AFTER DELETE ON episodes BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, summary, keywords)
        VALUES ('delete', old.id, old.summary, old.keywords); END""",
    "episodes_au": """CREATE TRIGGER episodes_au AFTER UPDATE OF summary, keywords ON episodes
        WHEN old.summary <> new.summary OR old.keywords <> new.keywords BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, summary, keywords)
        VALUES ('delete', old.id, old.summary, old.keywords);
        INSERT INTO episodes_fts(rowid, summary, keywords) VALUES (new.id, new.summary, new.keywords); END""",
}

#: Ours, beyond v13: the word index beside the trigram index — stemmed words and CJK/Hangul
#: bigrams of the NFKC text (cpersona/util/words.py), written by `MemoryRepo.insert` /
#: `update_content` because the form is computed in Python. The triggers only remove rows,
#: so a write by the original CPersona (which knows neither table nor function) cannot fail
#: on them; rows it added or changed are indexed at our next open (`_bootstrap_words`).
WORD_TABLES = {
    "memories_words": "CREATE VIRTUAL TABLE IF NOT EXISTS memories_words USING fts5("
    "body, tokenize='unicode61 remove_diacritics 0')",
}

WORD_TRIGGERS = {
    "memories_words_ad": """CREATE TRIGGER IF NOT EXISTS memories_words_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memories_words WHERE rowid = old.id; END""",
    "memories_words_au": """CREATE TRIGGER IF NOT EXISTS memories_words_au AFTER UPDATE OF content ON memories
        WHEN old.content <> new.content BEGIN
        DELETE FROM memories_words WHERE rowid = old.id; END""",
}
#: Rows indexed per statement while filling the word index.
WORD_BACKFILL_BATCH = 2000


def stored_version(conn: sqlite3.Connection) -> int | None:
    """MAX(version) of schema_version, or None when the table is absent (new file)."""
    if not _exists(conn, "table", "schema_version"):
        return None
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return row[0]


def check_not_newer(conn: sqlite3.Connection, path: str) -> None:
    """Raise SchemaTooNew if the file's schema is newer than this code. Reads only."""
    version = stored_version(conn)
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path} has schema v{version}, newer than this cpersona (v{SCHEMA_VERSION}); "
            "upgrade cpersona to open it (the file was not modified)"
        )


@dataclass(frozen=True)
class Step:
    """One named, idempotent migration step."""

    number: int
    name: str
    run: Callable[[sqlite3.Connection], None]


def _create_tables(conn: sqlite3.Connection) -> None:
    for ddl in TABLES.values():
        conn.execute(ddl)


def _add_columns(conn: sqlite3.Connection) -> None:
    for table, column, decl in LADDER_COLUMNS:
        _ensure_column(conn, table, column, decl)


def _create_indexes(conn: sqlite3.Connection) -> None:
    for ddl in INDEXES.values():
        conn.execute(ddl)


#: The migration, in order (each inside one transaction; FTS is bootstrapped after them).
STEPS = (
    Step(1, "create the tables", _create_tables),
    Step(2, "add the columns of later versions", _add_columns),
    Step(3, "create the lookup indexes", _create_indexes),
    Step(4, "deduplicate, then create the dedup unique indexes", lambda conn: _ensure_unique_indexes(conn)),
)


def migrate(conn: sqlite3.Connection, fts_enabled: bool) -> None:
    """Create or upgrade every object of the current format on `conn` (autocommit).

    Idempotent; the version stamp is written only after every step succeeded.
    """
    had_memories = _exists(conn, "table", "memories")
    for step in STEPS:
        with conn:
            step.run(conn)
    if fts_enabled:
        _bootstrap_fts(conn, rebuild_needed=had_memories)
        _bootstrap_words(conn)
    with conn:
        conn.execute("INSERT OR REPLACE INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION,))


def has_fts(conn: sqlite3.Connection) -> bool:
    """True when the FTS5 tables exist in the file."""
    return _exists(conn, "table", "memories_fts")


def _exists(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone()
    return row is not None


def _ensure_column(conn: sqlite3.Connection, table: str, column: str, decl: str) -> None:
    columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    if column not in columns:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


def _ensure_unique_indexes(conn: sqlite3.Connection) -> None:
    """Remove unlocked exact duplicates, then create the dedup backstop indexes (the
    original's v12 step)."""
    if all(_exists(conn, "index", name) for name in UNIQUE_INDEXES):
        return
    conn.execute(
        """DELETE FROM memories WHERE locked = 0 AND id NOT IN (
             SELECT MIN(id) FROM memories GROUP BY agent_id, project_id, channel, content)"""
    )
    conn.execute(
        """UPDATE memories SET msg_id = '' WHERE locked = 0 AND msg_id != '' AND id NOT IN (
             SELECT MAX(id) FROM memories WHERE msg_id != '' GROUP BY agent_id, project_id, msg_id)"""
    )
    for ddl in UNIQUE_INDEXES.values():
        conn.execute(ddl)


def _trigger_sql(conn: sqlite3.Connection, name: str) -> str | None:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type='trigger' AND name=?", (name,)).fetchone()
    return row[0] if row else None


def _bootstrap_fts(conn: sqlite3.Connection, rebuild_needed: bool) -> None:
    """Create FTS tables and triggers; rebuild the index when it may be out of sync."""
    created = not _exists(conn, "table", "memories_fts")
    pending = conn.execute("PRAGMA user_version").fetchone()[0] & FTS_REBUILD_PENDING
    stale_trigger = (_trigger_sql(conn, "memories_fts_au") or "").find("UPDATE OF content") < 0
    rebuild = pending or (rebuild_needed and (created or stale_trigger))
    if rebuild:
        _set_user_bit(conn, FTS_REBUILD_PENDING, True)
    with conn:
        for ddl in FTS_TABLES.values():
            conn.execute(ddl)
        for name, ddl in FTS_TRIGGERS.items():
            if _trigger_sql(conn, name) != ddl:
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
                conn.execute(ddl)
    if rebuild:
        with conn:
            conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
            conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")
        _set_user_bit(conn, FTS_REBUILD_PENDING, False)
        log.info("FTS5 indexes rebuilt")


def _bootstrap_words(conn: sqlite3.Connection) -> None:
    """Create the word index and its triggers, then index every memory it lacks: all of
    them on the first open (the backfill), afterwards the rows another program (the
    original CPersona) inserted or changed since our last open."""
    with conn:
        for ddl in (*WORD_TABLES.values(), *WORD_TRIGGERS.values()):
            conn.execute(ddl)
    done = 0
    while True:
        with conn:
            rows = conn.execute(
                "SELECT id, content FROM memories WHERE id NOT IN (SELECT rowid FROM memories_words) "
                "ORDER BY id LIMIT ?",
                (WORD_BACKFILL_BATCH,),
            ).fetchall()
            conn.executemany("INSERT INTO memories_words(rowid, body) VALUES (?, ?)",
                             [(i, index_form(text)) for i, text in rows])
        done += len(rows)
        if len(rows) < WORD_BACKFILL_BATCH:
            break
    if done:
        log.info("word index: %d memories indexed", done)


def _set_user_bit(conn: sqlite3.Connection, bit: int, on: bool) -> None:
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.execute(f"PRAGMA user_version = {(current | bit) if on else (current & ~bit)}")
