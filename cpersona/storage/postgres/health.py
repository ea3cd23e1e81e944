"""What the health checks read and repair, on PostgreSQL: `storage/integrity.py`,
`storage/inventory.py` and `storage/repairs.py` with their portable statements reused
(postgres/portable.py) and the SQLite-specific ones written for PostgreSQL.

Named differences:

* The lexical indexes: `memories_fts` / `episodes_fts` name the trigram GIN indexes of the
  lower-cased text columns; `memories_words` the word index table (postgres/words.py). Their
  check: the index exists and is valid (`pg_index.indisvalid`); for the word index, every
  memory has its row. The repair: REINDEX, or refill the word index.
* Page-level damage is the server's (data checksums, `amcheck`): the registry skips SQLite's
  quick_check and the DDL comparison of SQLite's schema objects on this backend
  (`health.registry.SQLITE_ONLY`).
* Dates are parsed by `cpersona_julianday` (the same forms SQLite's julianday accepts);
  JSON validity by `cpersona_json_valid`.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from cpersona.storage.integrity import IntegrityRepo
from cpersona.storage.inventory import InventoryRepo
from cpersona.storage.postgres import words
from cpersona.storage.postgres.portable import portable
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.postgres.schema import stored_version
from cpersona.storage.repairs import RepairRepo

#: Lexical index name of the SQLite side → the PostgreSQL index that plays its part.
LEXICAL_INDEXES = {"memories_fts": "idx_memories_content_trgm", "episodes_fts": "idx_episodes_summary_trgm",
                   words.TABLE: f"{words.POSTINGS}_pkey"}


class PgIntegrityRepo(IntegrityRepo):
    """Schema-level inspection and repair over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(portable(conn))
        self.pg = conn

    def quick_check(self, limit: int = 10, stop: Callable[[], bool] | None = None) -> list[str]:
        """["ok"]: page-level checks are the server's (the registry skips this check here)."""
        return ["ok"]

    def size_bytes(self) -> int:
        """Bytes of this schema's tables with their indexes and TOAST."""
        return int(scalar(self.pg, "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                                   "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"))

    def has_table(self, name: str) -> bool:
        """A table of the current schema; a lexical index name (LEXICAL_INDEXES) asks for that index."""
        return scalar(self.pg, "SELECT to_regclass(%s)", (LEXICAL_INDEXES.get(name, name),)) is not None

    def has_column(self, table: str, column: str) -> bool:
        return self.pg.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                               "AND table_name = %s AND column_name = %s", (table, column)).fetchone() is not None

    def schema_version(self) -> int | None:
        return stored_version(self.pg)

    def original_opened_as_is(self, version: int) -> bool:
        return False

    def fts_problem(self, fts: str, time_limit: float | None = None) -> str:
        """'' when the lexical index is there and valid (and, for the word index, every
        memory has its row), else what is wrong."""
        index = LEXICAL_INDEXES[fts]
        valid = self.pg.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                                (index,)).fetchone()
        if valid is None:
            return f"index {index} is missing"
        if not valid[0]:
            return f"index {index} is invalid (an interrupted CREATE INDEX CONCURRENTLY or REINDEX)"
        lacking = words.lacking(self.pg) if fts == words.TABLE else 0
        return f"out of step with memories: {lacking} memories not indexed, 0 rows of deleted memories" \
            if lacking else ""

    def fts_rebuild(self, fts: str) -> str:
        """REINDEX the index; the word index is also filled for every memory lacking a row."""
        try:
            with self.pg.transaction():
                self.pg.execute(f"REINDEX INDEX {LEXICAL_INDEXES[fts]}")
                if fts == words.TABLE:
                    words.fill_missing(self.pg)
        except psycopg.Error as err:
            return f"{type(err).__name__}: {err}"
        return ""

    def object_sql(self, kind: str, name: str) -> str | None:
        """The definition of an index or trigger of this schema, or None when absent."""
        if kind == "index":
            row = self.pg.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                                  "AND indexname = %s", (name,)).fetchone()
        else:
            row = self.pg.execute("SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c "
                                  "ON c.oid = t.tgrelid WHERE c.relnamespace = current_schema()::regnamespace "
                                  "AND t.tgname = %s", (name,)).fetchone()
        return row[0] if row else None


class PgInventoryRepo(InventoryRepo):
    """Counts and row lists for the checks, over one connection."""

    NOW = "cpersona_now()"

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(portable(conn))
        self.pg = conn

    def vector_counts(self, table: str, agent: str) -> tuple[int, int, int]:
        """(rows, rows without a vector, locked rows without one) of the agent's rows."""
        where, params = self._agent(agent)
        locked = "COALESCE(sum(CASE WHEN embedding IS NULL AND locked = 1 THEN 1 ELSE 0 END), 0)" \
            if table == "memories" else "0"
        row = self.conn.execute(f"SELECT count(*), COALESCE(sum(CASE WHEN embedding IS NULL THEN 1 ELSE 0 END), 0), "
                                f"{locked} FROM {table} WHERE {where}", params).fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    def _queue_status_known(self) -> bool:
        return True

    def old_tasks(self, agent: str, seconds: int) -> list[tuple[int, str, str]]:
        """(id, type, payload) of queue rows created more than `seconds` ago."""
        where, params = self._agent(agent)
        sql = ("SELECT id, task_type, payload FROM pending_memory_tasks WHERE created_at <= to_char("
               "(clock_timestamp() AT TIME ZONE 'UTC') - make_interval(secs => ?), 'YYYY-MM-DD HH24:MI:SS') "
               f"AND {where} ORDER BY id")
        return [tuple(r) for r in self.conn.execute(sql, [int(seconds), *params])]

    def user_sentinel_rows(self, agent: str) -> list[tuple[int, str, str, int]]:
        """(id, content, source, locked) of memories whose source is the empty User sentinel."""
        sql = ("SELECT id, content, source, locked FROM memories WHERE agent_id = %s AND cpersona_json_valid(source) "
               "AND jsonb_typeof(source::jsonb) = 'object' AND source::jsonb ->> 'type' = 'User' "
               "AND source::jsonb ->> 'id' = '' AND source::jsonb ->> 'name' = '' ORDER BY id")
        return [tuple(r) for r in self.pg.execute(sql, (agent,))]

    def memory_days(self, agent: str) -> list[float]:
        sql = ("SELECT d FROM (SELECT cpersona_julianday(timestamp) AS d FROM memories WHERE agent_id = %s) AS x "
               "WHERE d IS NOT NULL ORDER BY d")
        return [r[0] for r in self.pg.execute(sql, (agent,))]

    def episode_spans(self, agent: str) -> list[tuple[int, str, str, str, float, float, float | None]]:
        sql = ("SELECT * FROM (SELECT id, summary, start_time, end_time, cpersona_julianday(start_time) AS s, "
               "cpersona_julianday(end_time) AS e, cpersona_julianday(created_at) AS c FROM episodes "
               "WHERE agent_id = %s) AS x "
               "WHERE s IS NOT NULL AND e IS NOT NULL ORDER BY id")
        return [tuple(r) for r in self.pg.execute(sql, (agent,))]


_UTC = "({col} LIKE '%Z' OR {col} ~ '[+-]00:00$')"
_AWARE = "{col} ~ '[+-][0-9][0-9]:[0-9][0-9]$'"
_CLASS = f"CASE WHEN {_UTC} THEN 'utc' WHEN {_AWARE} THEN 'aware' ELSE 'naive' END"
_J = "source::jsonb"
#: For a valid JSON source: `{}` / null, or the anonymous User sentinel.
#: (IS NOT DISTINCT FROM, like SQLite's IS, never yields NULL for a missing key.)
_ANONYMOUS = (f"({_J} IN ('{{}}'::jsonb, 'null'::jsonb) OR (jsonb_typeof({_J}) = 'object' AND "
              f"{_J} ->> 'type' IS NOT DISTINCT FROM 'User' AND {_J} ->> 'id' IS NOT DISTINCT FROM '' AND "
              f"{_J} ->> 'name' IS NOT DISTINCT FROM ''))")
_NONCANONICAL = (f"(jsonb_typeof({_J}) <> 'object' OR jsonb_typeof({_J} -> 'type') IS DISTINCT FROM 'string' OR "
                 f"{_J} ->> 'type' NOT IN ('User', 'Agent', 'System'))")


class PgRepairRepo(RepairRepo):
    """Detection queries and guarded repairs over one connection: RepairRepo's statements
    with the date and JSON fragments written for PostgreSQL (the same classes of values)."""

    BLANK_TEST = "btrim(content, ' \t\n\x0b\x0c\r\u3000') = ''"
    JSON_VALID = "cpersona_json_valid({col})"
    PARSEABLE = "{col} IS NOT NULL AND {col} <> '' AND cpersona_julianday({col}) IS NOT NULL"
    TIME_CLASS = _CLASS
    TIMESTAMP_CODE = ("CASE WHEN timestamp = '' THEN 'empty' WHEN cpersona_julianday(timestamp) IS NULL THEN 'bad' "
                      f"WHEN {_UTC.format(col='timestamp')} THEN 'utc' WHEN {_AWARE.format(col='timestamp')} "
                      "THEN 'aware' ELSE 'naive' END")
    SOURCE_CODE = ("CASE WHEN source IN ('{}', 'null') THEN 'anonymous' WHEN NOT cpersona_json_valid(source) "
                   f"THEN 'invalid' WHEN {_ANONYMOUS} THEN 'anonymous' WHEN {_NONCANONICAL} THEN 'noncanonical' "
                   "ELSE 'ok' END")
    NONCANONICAL = (f"CASE WHEN cpersona_json_valid(source) AND NOT {_ANONYMOUS} THEN {_NONCANONICAL} "
                    "ELSE false END")

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(portable(conn))
        self.pg = conn

    def rewrite_memory(self, memory_id: int, content: str) -> str:
        """As RepairRepo.rewrite_memory; the word-index row follows in the same transaction."""
        try:
            with self.pg.transaction():
                n = self.pg.execute("UPDATE memories SET content = %s, embedding = NULL WHERE id = %s AND locked = 0",
                                    (content, memory_id)).rowcount
        except psycopg.errors.UniqueViolation:
            return "deleted" if self.delete_memory(memory_id) else "locked"
        if not n:
            return "locked"
        words.put(self.pg, memory_id, content)
        return "rewritten"
