"""Row defects and their guarded repairs on PostgreSQL: `storage/repairs.py`'s statements
with the date and JSON fragments written for PostgreSQL (`cpersona_julianday`: the forms
SQLite's julianday accepts; `cpersona_json_valid`), and the word-index row of a rewritten
memory written in the same transaction."""

from __future__ import annotations

import psycopg

from cpersona.storage.postgres import word_index
from cpersona.storage.postgres.dialect import qmark
from cpersona.storage.repairs import RepairRepo

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
        super().__init__(qmark(conn))
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
        word_index.put(self.pg, memory_id, content)
        return "rewritten"
