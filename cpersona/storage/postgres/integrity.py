"""Schema-level inspection and repair on PostgreSQL: `storage/integrity.py` with its portable
statements reused (postgres/dialect.py) and the SQLite-specific ones written for PostgreSQL.

* The lexical indexes: `memories_fts` / `episodes_fts` name the trigram GIN indexes of the
  lower-cased text columns; `memories_words` the word index table (postgres/word_index.py).
  Their check: the index exists and is valid (`pg_index.indisvalid`); for the word index,
  every memory has its row. The repair: REINDEX, or refill the word index.
* Page-level damage is the server's (data checksums, `amcheck`): the registry skips SQLite's
  quick_check and the DDL comparison of SQLite's schema objects on this backend
  (`health.registry.SQLITE_ONLY`).
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from cpersona.storage.integrity import IntegrityRepo
from cpersona.storage.postgres import word_index
from cpersona.storage.postgres.dialect import qmark
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.postgres.schema import stored_version

#: Lexical index name of the SQLite side → the PostgreSQL index that plays its part.
LEXICAL_INDEXES = {"memories_fts": "idx_memories_content_trgm", "episodes_fts": "idx_episodes_summary_trgm",
                   word_index.TABLE: f"{word_index.POSTINGS}_pkey"}


class PgIntegrityRepo(IntegrityRepo):
    """Schema-level inspection and repair over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))
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
        lacking = word_index.lacking(self.pg) if fts == word_index.TABLE else 0
        return f"out of step with memories: {lacking} memories not indexed, 0 rows of deleted memories" \
            if lacking else ""

    def fts_rebuild(self, fts: str) -> str:
        """REINDEX the index; the word index is also filled for every memory lacking a row."""
        try:
            with self.pg.transaction():
                self.pg.execute(f"REINDEX INDEX {LEXICAL_INDEXES[fts]}")
                if fts == word_index.TABLE:
                    word_index.fill_missing(self.pg)
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
