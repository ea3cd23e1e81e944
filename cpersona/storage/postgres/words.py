"""The word index `memories_words` on PostgreSQL: the word form of every memory's content
(`util.words.index_form`, computed in Python as on SQLite) stored as an array of its tokens,
with a GIN index (https://www.postgresql.org/docs/15/gin-builtin-opclasses.html, `array_ops`),
and the bm25 FTS5 computes over its SQLite counterpart (an FTS5 `unicode61` table of the same
text, https://www.sqlite.org/fts5.html#the_bm25_function).

* Rows: `id` = the memory's id (deleted with it: ON DELETE CASCADE), `terms` = the tokens in
  order, duplicates kept (a token's frequency in the row and the row's length |d| come from
  it). The form is space-separated letters and digits, so splitting on spaces is exactly
  what FTS5's unicode61 tokenizer does to it.
* Writers: every writer of `memories.content` (store, update, import/merge, health repairs)
  calls `put` in its transaction; a trigger drops the row of a memory whose content another
  client changed, and `fill_missing` (migration, `cpersona migrate`, the health repair)
  indexes the memories that lack a row.
* Statistics: rows and tokens in `lexical_stats` (tbl `memories_words`), kept by statement
  triggers like those of the trigram columns (triggers.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import psycopg

from cpersona.util.words import index_form

log = logging.getLogger(__name__)

TABLE = "memories_words"
#: Memories indexed per statement when filling the rows the index lacks.
FILL_BATCH = 2000

DDL = {
    TABLE: f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        id BIGINT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        terms TEXT[] NOT NULL)""",
    f"idx_{TABLE}_terms": f"CREATE INDEX IF NOT EXISTS idx_{TABLE}_terms ON {TABLE} USING gin (terms)",
    "cpersona_words_changed": f"""CREATE OR REPLACE FUNCTION cpersona_words_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN DELETE FROM {TABLE} WHERE id = NEW.id; RETURN NULL; END $$""",
    "drop memories_words_au": "DROP TRIGGER IF EXISTS memories_words_au ON memories",
    "memories_words_au": "CREATE TRIGGER memories_words_au AFTER UPDATE OF content ON memories FOR EACH ROW "
    "WHEN (OLD.content IS DISTINCT FROM NEW.content) EXECUTE FUNCTION cpersona_words_changed()",
}
#: Tokens of one row, for the statistics triggers.
TOKENS = "cardinality(terms)"


def terms(content: str) -> list[str]:
    """The stored tokens of `content` (its word form split as unicode61 splits it)."""
    return index_form(content).split()


def put(conn: psycopg.Connection, memory_id: int, content: str) -> None:
    """Index one memory (its row replaced when there is one)."""
    conn.execute(f"INSERT INTO {TABLE}(id, terms) VALUES (%s, %s) "
                 "ON CONFLICT (id) DO UPDATE SET terms = excluded.terms", (memory_id, terms(content)))


def put_many(conn: psycopg.Connection, rows: Iterable[tuple[int, str]]) -> None:
    """Index (memory id, content) pairs (rows replaced when present)."""
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {TABLE}(id, terms) VALUES (%s, %s) "
                        "ON CONFLICT (id) DO UPDATE SET terms = excluded.terms",
                        [(i, terms(text)) for i, text in rows])


def fill_missing(conn: psycopg.Connection) -> int:
    """Index every memory without a row (written by another client, copied by `cpersona
    migrate`, or after the index was emptied); returns how many."""
    done, last = 0, 0
    while rows := conn.execute(
            f"SELECT m.id, m.content FROM memories m WHERE m.id > %s AND NOT EXISTS "
            f"(SELECT 1 FROM {TABLE} w WHERE w.id = m.id) ORDER BY m.id LIMIT %s", (last, FILL_BATCH)).fetchall():
        put_many(conn, rows)
        done, last = done + len(rows), rows[-1][0]
    if done:
        log.info("word index: %d memories indexed", done)
    return done


def lacking(conn: psycopg.Connection) -> int:
    """Memories without a row (rows of deleted memories cannot exist: the foreign key)."""
    row = conn.execute(f"SELECT count(*) FROM memories m WHERE NOT EXISTS "
                       f"(SELECT 1 FROM {TABLE} w WHERE w.id = m.id)").fetchone()
    return int(row[0]) if row else 0


def bm25_query(columns: str, where: str, k1: float, b: float, min_idf: float) -> str:
    """FTS5's bm25 over the word index for the terms `%(t)s` (text[], query order), rows of
    `memories m` filtered by `where` (named parameters), best first: (columns…, rank) with
    rank = −score. n(t) counts the rows of the whole index holding t, as FTS5 does."""
    return (
        "WITH q AS (SELECT x.t, x.i FROM unnest(%(t)s::text[]) WITH ORDINALITY AS x(t, i)), "
        f"cand AS MATERIALIZED (SELECT w.id, w.terms FROM {TABLE} w WHERE w.terms && %(t)s::text[]), "
        "occ AS MATERIALIZED (SELECT cand.id, q.i, cardinality(cand.terms)::float8 AS dl, "
        "(SELECT count(*) FROM unnest(cand.terms) AS u(x) WHERE u.x = q.t)::float8 AS f "
        "FROM cand JOIN q ON q.t = ANY(cand.terms)), "
        "st AS (SELECT GREATEST(COALESCE(sum(n_rows), 0), 1)::float8 AS n, "
        "GREATEST(COALESCE(sum(n_tokens), 0), 1)::float8 / GREATEST(COALESCE(sum(n_rows), 0), 1) AS avgdl "
        f"FROM lexical_stats WHERE tbl = '{TABLE}'), "
        f"idf AS (SELECT occ.i, GREATEST(ln((st.n - count(*) + 0.5) / (count(*) + 0.5)), {min_idf}) AS v "
        "FROM occ CROSS JOIN st GROUP BY occ.i, st.n), "
        f"scored AS (SELECT m.id, sum(idf.v * ({k1 + 1} * occ.f) / (occ.f + {k1} * (1 - {b} + {b} * "
        "occ.dl / st.avgdl)) ORDER BY occ.i) AS score "
        "FROM occ JOIN idf ON idf.i = occ.i JOIN memories m ON m.id = occ.id CROSS JOIN st "
        f"WHERE {where} GROUP BY m.id) "
        f"SELECT {columns}, -scored.score AS rank FROM scored JOIN memories m ON m.id = scored.id "
        "ORDER BY rank, m.id LIMIT %(limit)s")


def doc_counts(conn: psycopg.Connection, words: list[str]) -> dict[str, int]:
    """Rows of the word index holding each word."""
    found = dict.fromkeys(words, 0)
    for word in words:
        row = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE terms @> ARRAY[%s]::text[]", (word,)).fetchone()
        found[word] = int(row[0]) if row else 0
    return found
