"""The stored format on PostgreSQL: the same tables, columns and meaning as the SQLite file
(docs/storage.md), so the layers above read identical values, plus what PostgreSQL needs
instead of FTS5 — and the migration to it.

Differences of representation, none of meaning:

* ids are BIGSERIAL, vectors BYTEA (the same little-endian float32 bytes), timestamps the
  same TEXT formats (`created_at` = 'YYYY-MM-DD HH:MM:SS', naive UTC, from `cpersona_now()`).
* Lexical search: lower-cased generated copies of the searched columns (`content_lc`,
  `summary_lc`, `keywords_lc`), each with a pg_trgm GIN index, instead of the FTS5 tables
  (https://www.postgresql.org/docs/15/pgtrgm.html), and `lexical_stats` — row and trigram
  token totals per table, kept by statement triggers — from which search.py computes the
  same bm25 as FTS5. The totals are spread over `STAT_SLOTS` rows per table (slot =
  backend pid mod STAT_SLOTS) so writers on different nodes do not queue on one row.
* Change feed: statement triggers NOTIFY the channel `cpersona.<schema>` with the ids of the
  rows whose text or vector changed (changes.py applies them to each node's resident index).
* Task leases: `lease_owner` / `lease_until` on `pending_memory_tasks` (tasks.py).
* Calibration state: `cpersona_meta['calibration_state']` instead of a file per node.
* The declared graph's delete triggers are statement triggers (postgres/associations.py).

`migrate(conn, fts_enabled)` first reads the version stamp and the layout record
(`cpersona_meta['postgres_layout']`): when both are current it does nothing, so a node joining
a busy cluster takes no lock. Otherwise it runs every step in ONE transaction under a
transaction-scoped advisory lock (`pg_advisory_xact_lock`), so two nodes starting together
never race: the second waits, then finds the stamp written and stops. Every step is
idempotent; a migration that loses a lock deadlock against running writers is retried.
A database stamped newer than `SCHEMA_VERSION` raises `SchemaTooNew` before
anything is written.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from cpersona.errors import SchemaTooNew, StorageError
from cpersona.storage.meta import POSTGRES_LAYOUT_KEY
from cpersona.storage.postgres import associations, journal, triggers, word_index
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.schema import INDEXES as SQLITE_INDEXES
from cpersona.storage.schema import SCHEMA_VERSION

log = logging.getLogger(__name__)

#: Revision of the PostgreSQL-only objects (columns, functions, triggers, indexes of this
#: module); bump it whenever they change, so running databases get the new ones.
LAYOUT_REVISION = 3
#: cpersona_meta key recording the revision applied and whether the trigram indexes exist.
LAYOUT_KEY = POSTGRES_LAYOUT_KEY
#: Times a migration that lost a lock deadlock is run again.
MIGRATION_ATTEMPTS = 5
#: Advisory-lock key space of the migration (per schema: tests and tenants may share a database).
_LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':cpersona-migrate'))"
_NOW = "cpersona_now()"

FUNCTIONS = {
    # SQLite's datetime('now'): naive UTC text, second precision.
    "cpersona_now": """CREATE OR REPLACE FUNCTION cpersona_now() RETURNS text LANGUAGE sql VOLATILE AS
        $$ SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') $$""",
    # Trigram tokens of a text as FTS5's trigram tokenizer counts them (one per position).
    "cpersona_tokens": """CREATE OR REPLACE FUNCTION cpersona_tokens(t text) RETURNS bigint LANGUAGE sql
        IMMUTABLE PARALLEL SAFE AS $$ SELECT GREATEST(char_length(COALESCE(t, '')) - 2, 0)::bigint $$""",
    # SQLite's julianday() for ISO-8601 text (naive = UTC, 'Z' or ±HH:MM offsets); NULL — never
    # an error — for anything else. Day overflow normalises as in SQLite (02-30 → 03-01).
    "cpersona_julianday": r"""CREATE OR REPLACE FUNCTION cpersona_julianday(t text) RETURNS double precision
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN m IS NULL THEN NULL ELSE
          extract(epoch FROM make_timestamptz(m[1]::int, m[2]::int, 1, 0, 0, 0, 'UTC')
            + make_interval(days => m[3]::int - 1, hours => COALESCE(m[4], '0')::int,
                            mins => COALESCE(m[5], '0')::int, secs => COALESCE(m[6], '0')::double precision)
            - CASE WHEN m[8] IS NULL THEN interval '0'
                   ELSE (m[8] || '1')::int * make_interval(hours => m[9]::int, mins => m[10]::int) END
          ) / 86400.0 + 2440587.5 END
        FROM (SELECT regexp_match(t, '^(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])'
              '(?:[T ]([01]\d|2[0-4]):([0-5]\d)(?::([0-5]\d(?:\.\d+)?))?)?\s*'
              '(Z|([+-])(\d{2}):(\d{2}))?$') AS m) x $$""",
    # SQLite's LIKE folds ASCII letters only: both sides go through this before LIKE.
    "cpersona_ascii_lower": """CREATE OR REPLACE FUNCTION cpersona_ascii_lower(t text) RETURNS text LANGUAGE sql
        IMMUTABLE PARALLEL SAFE AS
        $$ SELECT translate(t, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') $$""",
    # SQLite's json_valid(): the text parses as JSON (never an error).
    "cpersona_json_valid": """CREATE OR REPLACE FUNCTION cpersona_json_valid(t text) RETURNS boolean
        LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
        BEGIN PERFORM t::jsonb; RETURN t IS NOT NULL; EXCEPTION WHEN others THEN RETURN false; END $$""",
    # A top-level field of a JSON object as text; NULL when the text is not a JSON object.
    "cpersona_json_field": """CREATE OR REPLACE FUNCTION cpersona_json_field(t text, k text) RETURNS text
        LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
        DECLARE j jsonb;
        BEGIN
          j := t::jsonb;
          RETURN CASE WHEN jsonb_typeof(j) = 'object' THEN j ->> k END;
        EXCEPTION WHEN others THEN RETURN NULL;
        END $$""",
    # `source.id` of a memory as SQLite's CAST(json_extract(source, '$.id') AS TEXT): NULL
    # when the text is not a JSON object (never an error).
    "cpersona_source_id": """CREATE OR REPLACE FUNCTION cpersona_source_id(t text) RETURNS text
        LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
        DECLARE j jsonb;
        BEGIN
          j := t::jsonb;
          IF jsonb_typeof(j) <> 'object' THEN RETURN NULL; END IF;
          RETURN CASE jsonb_typeof(j -> 'id') WHEN 'boolean' THEN (CASE WHEN (j ->> 'id')::boolean
                 THEN '1' ELSE '0' END) ELSE j ->> 'id' END;
        EXCEPTION WHEN others THEN RETURN NULL;
        END $$""",
}

TABLES = {
    "schema_version": f"""CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        applied_at TEXT NOT NULL DEFAULT {_NOW})""",
    "memories": f"""CREATE TABLE IF NOT EXISTS memories (
        id BIGSERIAL PRIMARY KEY,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        msg_id TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '{{}}',
        timestamp TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{{}}',
        embedding BYTEA,
        channel TEXT NOT NULL DEFAULT '',
        recall_count INTEGER NOT NULL DEFAULT 0,
        last_recalled_at TEXT,
        locked INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL DEFAULT {_NOW})""",
    "episodes": f"""CREATE TABLE IF NOT EXISTS episodes (
        id BIGSERIAL PRIMARY KEY,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        summary TEXT NOT NULL,
        keywords TEXT NOT NULL DEFAULT '',
        embedding BYTEA,
        start_time TEXT,
        end_time TEXT,
        resolved INTEGER NOT NULL DEFAULT 0,
        channel TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL DEFAULT {_NOW})""",
    "profiles": f"""CREATE TABLE IF NOT EXISTS profiles (
        id BIGSERIAL PRIMARY KEY,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        user_id TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        updated_at TEXT NOT NULL DEFAULT {_NOW},
        UNIQUE (agent_id, user_id))""",
    "pending_memory_tasks": f"""CREATE TABLE IF NOT EXISTS pending_memory_tasks (
        id BIGSERIAL PRIMARY KEY,
        task_type TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        payload TEXT NOT NULL,
        retries INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL DEFAULT {_NOW},
        status TEXT NOT NULL DEFAULT 'pending',
        last_error TEXT,
        updated_at TEXT,
        not_before DOUBLE PRECISION NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0)""",
    "cpersona_meta": """CREATE TABLE IF NOT EXISTS cpersona_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
    "lexical_stats": """CREATE TABLE IF NOT EXISTS lexical_stats (
        tbl TEXT NOT NULL,
        slot INTEGER NOT NULL,
        n_rows BIGINT NOT NULL DEFAULT 0,
        n_tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (tbl, slot))""",
}

#: The lookup indexes: SQLite's (standard SQL), and the due-task index of the leased queue.
INDEXES = {
    **SQLITE_INDEXES,
    "idx_pending_tasks_due": "CREATE INDEX IF NOT EXISTS idx_pending_tasks_due "
    "ON pending_memory_tasks(status, not_before, id)",
}

#: Dedup backstops, as on SQLite. On PostgreSQL a btree entry is limited to ~2.7 kB, so the
#: content key is its md5 (a collision would only make a store answer "skipped").
UNIQUE_INDEXES = {
    "idx_memories_dedup_content": "CREATE UNIQUE INDEX IF NOT EXISTS idx_memories_dedup_content "
    "ON memories(agent_id, project_id, channel, md5(content))",
    "idx_memories_dedup_msg_id": "CREATE UNIQUE INDEX IF NOT EXISTS idx_memories_dedup_msg_id "
    "ON memories(agent_id, project_id, msg_id) WHERE msg_id <> ''",
}

#: The trigram indexes of lexical search (and of the LIKE fallback).
#: Lower-cased copies of the searched text, kept by PostgreSQL itself (generated columns):
#: FTS5 folds case once, when it indexes a row; doing it per query costs ~5 µs per row and term.
LOWERED_COLUMNS = {
    "memories.content_lc": "ALTER TABLE memories ADD COLUMN IF NOT EXISTS content_lc TEXT "
    "GENERATED ALWAYS AS (lower(content)) STORED",
    "episodes.summary_lc": "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS summary_lc TEXT "
    "GENERATED ALWAYS AS (lower(summary)) STORED",
    "episodes.keywords_lc": "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS keywords_lc TEXT "
    "GENERATED ALWAYS AS (lower(keywords)) STORED",
}

#: The trigram indexes of lexical search (and of the LIKE fallback).
TRIGRAM_INDEXES = {
    "idx_memories_content_trgm": "CREATE INDEX IF NOT EXISTS idx_memories_content_trgm "
    "ON memories USING gin (content_lc gin_trgm_ops)",
    "idx_episodes_summary_trgm": "CREATE INDEX IF NOT EXISTS idx_episodes_summary_trgm "
    "ON episodes USING gin (summary_lc gin_trgm_ops)",
    "idx_episodes_keywords_trgm": "CREATE INDEX IF NOT EXISTS idx_episodes_keywords_trgm "
    "ON episodes USING gin (keywords_lc gin_trgm_ops)",
}


@dataclass(frozen=True)
class Step:
    """One named, idempotent migration step."""

    number: int
    name: str
    run: Callable[[psycopg.Connection], object]  # its result is not used


def _run_all(ddl: dict[str, str]) -> Callable[[psycopg.Connection], None]:
    def run(conn: psycopg.Connection) -> None:
        for statement in ddl.values():
            conn.execute(statement)
    return run


def _extension(conn: psycopg.Connection) -> None:
    present = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()
    if present:
        return
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except psycopg.Error as err:
        raise StorageError(
            f"the pg_trgm extension is required and could not be created ({err}); ask the database owner to run "
            "CREATE EXTENSION pg_trgm (PostgreSQL's contrib package provides it)") from err


def _stat_rows(conn: psycopg.Connection) -> None:
    """Fill lexical_stats from the tables when it is empty (first migration, or a database
    whose rows were loaded before the triggers existed)."""
    if conn.execute("SELECT 1 FROM lexical_stats LIMIT 1").fetchone():
        return
    conn.execute("INSERT INTO lexical_stats(tbl, slot, n_rows, n_tokens) "
                 "SELECT 'memories', 0, count(*), COALESCE(sum(cpersona_tokens(content)), 0) FROM memories")
    conn.execute("INSERT INTO lexical_stats(tbl, slot, n_rows, n_tokens) SELECT 'episodes', 0, count(*), "
                 "COALESCE(sum(cpersona_tokens(summary) + cpersona_tokens(keywords)), 0) FROM episodes")


def _word_index(conn: psycopg.Connection) -> None:
    _run_all(word_index.DDL)(conn)
    triggers.install_stats(conn, word_index.TABLE, word_index.TOKENS)


#: The migration, in order, all inside one transaction.
STEPS = (
    Step(2, "create the helper functions", _run_all(FUNCTIONS)),
    Step(3, "create the tables", _run_all(TABLES)),
    Step(4, "create the lookup indexes", _run_all(INDEXES)),
    Step(5, "create the dedup unique indexes", _run_all(UNIQUE_INDEXES)),
    Step(6, "add the lower-cased search columns", _run_all(LOWERED_COLUMNS)),
    Step(7, "count the lexical statistics", _stat_rows),
    Step(8, "create the change-feed and statistics triggers", triggers.install),
    Step(10, "create the bulk-write journal", _run_all(journal.DDL)),
    Step(11, "create the word index", _word_index),
    Step(12, "re-tokenise a word index of an older form, index the memories it lacks", word_index.refresh),
    Step(13, "create the declared-associations tables, indexes and triggers", _run_all(associations.DDL)),
)
#: Skipped when lexical search is disabled (CPERSONA_FTS_ENABLED=false: LIKE only, no pg_trgm needed).
_FTS_STEPS = (Step(1, "create the pg_trgm extension", _extension),
              Step(9, "create the trigram indexes", _run_all(TRIGRAM_INDEXES)))


def stored_version(conn: psycopg.Connection) -> int | None:
    """MAX(version) of schema_version in the current schema, or None when absent."""
    if scalar(conn, "SELECT to_regclass('schema_version')") is None:
        return None
    return scalar(conn, "SELECT MAX(version) FROM schema_version")


def _is_current(conn: psycopg.Connection, fts_enabled: bool) -> bool:
    """True when the stamp and the layout record say every step has run (read-only: a node
    starting next to busy nodes takes no lock at all)."""
    if stored_version(conn) != SCHEMA_VERSION or scalar(conn, "SELECT to_regclass('cpersona_meta')") is None:
        return False
    row = conn.execute("SELECT value FROM cpersona_meta WHERE key = %s", (LAYOUT_KEY,)).fetchone()
    layout = json.loads(row[0]) if row else {}
    return (layout.get("revision") == LAYOUT_REVISION and (bool(layout.get("fts")) or not fts_enabled)
            and word_index.form_current(conn))


def migrate(conn: psycopg.Connection, where: str, fts_enabled: bool) -> None:
    """Create or upgrade every object of the current format, in one transaction under the
    migration advisory lock; the version stamp and the layout record are written last.
    Nothing is done (no lock taken) when they are current. A migration that loses a lock
    deadlock against running nodes' writes is rolled back whole and run again. Raises
    SchemaTooNew (nothing written) when the database is newer than this code."""
    if scalar(conn, "SELECT current_schema()") is None:
        raise StorageError(f"{where}: no schema to create the tables in (the search_path names none that exists)")
    if _is_current(conn, fts_enabled):
        return
    for attempt in range(1, MIGRATION_ATTEMPTS + 1):
        try:
            _migrate_locked(conn, where, fts_enabled)
            return
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable):
            if attempt == MIGRATION_ATTEMPTS:
                raise
            log.warning("schema migration of %s lost a lock conflict with running nodes; retrying", where)
            time.sleep(0.2 * attempt)


def _migrate_locked(conn: psycopg.Connection, where: str, fts_enabled: bool) -> None:
    with conn.transaction():
        conn.execute(_LOCK_KEY)
        version = stored_version(conn)
        if version is not None and version > SCHEMA_VERSION:
            raise SchemaTooNew(f"{where} has schema v{version}, newer than this cpersona (v{SCHEMA_VERSION}); "
                               "upgrade cpersona to open it (the database was not modified)")
        if _is_current(conn, fts_enabled):  # another node finished while this one waited for the lock
            return
        steps = sorted((*STEPS, *_FTS_STEPS), key=lambda step: step.number) if fts_enabled else STEPS
        for step in steps:
            step.run(conn)
        conn.execute("INSERT INTO schema_version(version) VALUES (%s) ON CONFLICT (version) DO NOTHING",
                     (SCHEMA_VERSION,))
        layout = json.dumps({"revision": LAYOUT_REVISION, "fts": fts_enabled or has_trigram_indexes(conn)})
        conn.execute("INSERT INTO cpersona_meta(key, value) VALUES (%s, %s) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (LAYOUT_KEY, layout))


def has_trigram_indexes(conn: psycopg.Connection) -> bool:
    """True when the trigram index of memories exists (lexical search available)."""
    return scalar(conn, "SELECT to_regclass('idx_memories_content_trgm')") is not None
