"""The word index `memories_words` on PostgreSQL: the word form of every memory's content
(`util.words.index_form`, computed in Python as on SQLite) kept as an inverted index — one
posting (term, memory id, term frequency) per distinct word of a memory — and the bm25 FTS5
computes over its SQLite counterpart (an FTS5 `unicode61` table of the same text,
https://www.sqlite.org/fts5.html#the_bm25_function).

* `memories_words(id, n_tokens)`: one row per indexed memory (deleted with it: ON DELETE
  CASCADE), |d| = its token count. `memories_word_postings(term, id, tf)`: primary key
  (term, id), so the rows holding a term, its frequency in each and n(t) come from one index
  range — the same work as FTS5's posting lists. The form is space-separated letters and
  digits, so splitting on spaces is exactly what FTS5's unicode61 tokenizer does to it.
* Writers: every writer of `memories.content` (store, update, import/merge, health repairs)
  calls `put` in its transaction; a trigger drops the rows of a memory whose content another
  client changed, and `fill_missing` (migration, `cpersona migrate`, the health repair)
  indexes the memories that lack them.
* Statistics: rows and tokens in `lexical_stats` (tbl `memories_words`), kept by statement
  triggers like those of the trigram columns (triggers.py).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable

import psycopg

from cpersona.storage.meta import WORD_FORM_KEY, decode
from cpersona.util.words import WORD_FORM_VERSION, index_form

log = logging.getLogger(__name__)

TABLE = "memories_words"
POSTINGS = "memories_word_postings"
#: Memories indexed per statement when filling the rows the index lacks.
FILL_BATCH = 2000

DDL = {
    TABLE: f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        id BIGINT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        n_tokens INTEGER NOT NULL)""",
    POSTINGS: f"""CREATE TABLE IF NOT EXISTS {POSTINGS} (
        term TEXT NOT NULL,
        id BIGINT NOT NULL REFERENCES {TABLE}(id) ON DELETE CASCADE,
        tf INTEGER NOT NULL,
        PRIMARY KEY (term, id))""",
    f"idx_{POSTINGS}_id": f"CREATE INDEX IF NOT EXISTS idx_{POSTINGS}_id ON {POSTINGS}(id)",
    "cpersona_words_changed": f"""CREATE OR REPLACE FUNCTION cpersona_words_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN DELETE FROM {TABLE} WHERE id = NEW.id; RETURN NULL; END $$""",
    "drop memories_words_au": "DROP TRIGGER IF EXISTS memories_words_au ON memories",
    "memories_words_au": "CREATE TRIGGER memories_words_au AFTER UPDATE OF content ON memories FOR EACH ROW "
    "WHEN (OLD.content IS DISTINCT FROM NEW.content) EXECUTE FUNCTION cpersona_words_changed()",
}
#: Tokens of one row, for the statistics triggers.
TOKENS = "n_tokens"


def terms(content: str) -> list[str]:
    """The tokens of `content` (its word form split as unicode61 splits it), in order."""
    return index_form(content).split()


def put(conn: psycopg.Connection, memory_id: int, content: str) -> None:
    """Index one memory (its rows replaced when there are some)."""
    put_many(conn, [(memory_id, content)])


def put_many(conn: psycopg.Connection, rows: Iterable[tuple[int, str]]) -> None:
    """Index (memory id, content) pairs (their rows replaced when present). The rows go in by
    COPY (https://www.postgresql.org/docs/15/sql-copy.html), which fires the statistics
    triggers like INSERT: one memory holds ~30 postings, and re-tokenising a whole store by
    INSERTs took ~50 s per 20k memories against ~a tenth of that by COPY."""
    tokens = {memory_id: terms(text) for memory_id, text in rows}
    if not tokens:
        return
    conn.execute(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", (list(tokens),))
    with conn.cursor() as cur:
        with cur.copy(f"COPY {TABLE}(id, n_tokens) FROM STDIN") as copy:
            for memory_id, toks in tokens.items():
                copy.write_row((memory_id, len(toks)))
        with cur.copy(f"COPY {POSTINGS}(term, id, tf) FROM STDIN") as copy:
            for memory_id, toks in tokens.items():
                for term, tf in Counter(toks).items():
                    copy.write_row((term, memory_id, tf))


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


def form_current(conn: psycopg.Connection) -> bool:
    """Whether the word index was written in the current form (`util.words.WORD_FORM_VERSION`,
    recorded in `cpersona_meta`)."""
    row = conn.execute("SELECT value FROM cpersona_meta WHERE key = %s", (WORD_FORM_KEY,)).fetchone()
    return row is not None and decode(WORD_FORM_KEY, row[0]) == WORD_FORM_VERSION


def refresh(conn: psycopg.Connection) -> int:
    """Bring the word index in step (a migration step): when it was written in an older form,
    drop every row (the statistics triggers follow) and re-tokenise every memory, all in the
    caller's transaction — a process killed midway leaves the old index and record; then
    index the memories that lack rows and record the form. Returns the memories indexed."""
    done = fill_missing(conn) if form_current(conn) else _rebuild(conn)
    conn.execute("INSERT INTO cpersona_meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                 "SET value = excluded.value", (WORD_FORM_KEY, json.dumps(WORD_FORM_VERSION)))
    return done


def _rebuild(conn: psycopg.Connection) -> int:
    """Re-tokenise every memory: the postings table is re-created without its keys, filled by
    COPY, and its primary key, foreign key and index are added afterwards — PostgreSQL's own
    advice for bulk loads (https://www.postgresql.org/docs/15/populate.html): building an
    index once and checking the foreign key by one join is several times faster than
    maintaining both for each of ~30 postings per memory."""
    conn.execute(f"DROP TABLE {POSTINGS}")
    conn.execute(f"DELETE FROM {TABLE}")
    conn.execute(f"CREATE TABLE {POSTINGS} (term TEXT NOT NULL, id BIGINT NOT NULL, tf INTEGER NOT NULL)")
    done = fill_missing(conn)
    conn.execute(f"ALTER TABLE {POSTINGS} ADD PRIMARY KEY (term, id), "
                 f"ADD FOREIGN KEY (id) REFERENCES {TABLE}(id) ON DELETE CASCADE")
    conn.execute(DDL[f"idx_{POSTINGS}_id"])
    return done


def lacking(conn: psycopg.Connection) -> int:
    """Memories without a row (rows of deleted memories cannot exist: the foreign key)."""
    row = conn.execute(f"SELECT count(*) FROM memories m WHERE NOT EXISTS "
                       f"(SELECT 1 FROM {TABLE} w WHERE w.id = m.id)").fetchone()
    return int(row[0]) if row else 0


def bm25_query(columns: str, where: str, k1: float, b: float, min_idf: float) -> str:
    """FTS5's bm25 over the word index for the terms `%(t)s` (text[], query order), rows of
    `memories m` filtered by `where` (named parameters), best first: (columns…, rank) with
    rank = −score. n(t) counts the postings of t in the whole index, as FTS5 does; the
    per-row sum adds the terms in query order, as FTS5 adds its phrases."""
    return (
        "WITH q AS (SELECT x.t, x.i FROM unnest(%(t)s::text[]) WITH ORDINALITY AS x(t, i)), "
        f"occ AS MATERIALIZED (SELECT p.id, q.i, p.tf::float8 AS f FROM q JOIN {POSTINGS} p ON p.term = q.t), "
        "st AS (SELECT GREATEST(COALESCE(sum(n_rows), 0), 1)::float8 AS n, "
        "GREATEST(COALESCE(sum(n_tokens), 0), 1)::float8 / GREATEST(COALESCE(sum(n_rows), 0), 1) AS avgdl "
        f"FROM lexical_stats WHERE tbl = '{TABLE}'), "
        f"idf AS (SELECT occ.i, GREATEST(ln((st.n - count(*) + 0.5) / (count(*) + 0.5)), {min_idf}) AS v "
        "FROM occ CROSS JOIN st GROUP BY occ.i, st.n), "
        f"scored AS (SELECT m.id, sum(idf.v * ({k1 + 1} * occ.f) / (occ.f + {k1} * (1 - {b} + {b} * "
        "w.n_tokens / st.avgdl)) ORDER BY occ.i) AS score "
        f"FROM occ JOIN idf ON idf.i = occ.i JOIN {TABLE} w ON w.id = occ.id JOIN memories m ON m.id = occ.id "
        f"CROSS JOIN st WHERE {where} GROUP BY m.id) "
        f"SELECT {columns}, -scored.score AS rank FROM scored JOIN memories m ON m.id = scored.id "
        "ORDER BY rank, m.id LIMIT %(limit)s")


def doc_counts(conn: psycopg.Connection, words: list[str]) -> dict[str, int]:
    """Rows of the word index holding each word (one index range per word)."""
    found = dict.fromkeys(words, 0)
    rows = conn.execute(f"SELECT p.term, count(*) FROM {POSTINGS} p WHERE p.term = ANY(%s) GROUP BY p.term",
                        (list(words),))
    found.update({term: int(n) for term, n in rows})
    return found
