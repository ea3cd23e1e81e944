"""Keyword search on PostgreSQL with the semantics of the SQLite channels: trigram matching
through pg_trgm GIN indexes, ranked by the SAME bm25 FTS5 computes, the LIKE fallback, and
the counts the quality gate needs.

Why bm25 and not pg_trgm's `similarity()` or `ts_rank`: recall fuses the keyword channel
by its score (cc fusion divides each row's bm25 by the channel's best; the calibrated gates
key on the fused score), so a different ranking function would move every gate and
every fusion weight tuned on SQLite. FTS5's trigram tokenizer makes every query term a
case-insensitive substring match, which is exactly what `lower(text) LIKE '%term%'` finds,
through a pg_trgm GIN index on a stored lower-cased copy of the text
(https://www.postgresql.org/docs/15/pgtrgm.html#PGTRGM-INDEX), so the rows are
the same; the score is FTS5's bm25 (https://www.sqlite.org/fts5.html#the_bm25_function,
k1 = 1.2, b = 0.75, Robertson & Zaragoza 2009) computed from the same quantities:

    idf(t)  = ln((N − n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6
    score   = Σ_t idf(t) · f(t,d)·(k1 + 1) / (f(t,d) + k1·(1 − b + b·|d| / avgdl))
    rank    = −score  (lower = better, as FTS5 reports it)

N and avgdl (trigram tokens per row, one per character position past the second) come from
`lexical_stats`; n(t) counts the rows of the whole table containing t (FTS5 counts its
phrase hits table-wide too); f(t,d) counts t's occurrences in the row, overlapping ones
included when t can overlap itself, as FTS5 counts phrase instances. Case folding is
PostgreSQL's `lower()` under the database's LC_CTYPE (use a UTF-8 locale, e.g. C.UTF-8).
"""

from __future__ import annotations

import re

import psycopg

from cpersona.storage import episodes, memories
from cpersona.storage.postgres import word_index
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.postgres.scope import like_escape, predicate, row_filter
from cpersona.storage.records import EpisodeRow, MemoryRow
from cpersona.storage.scope import Scope

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6
#: fts name (the retrieval layer's) → (table, alias, columns of the row type, searched columns).
_FTS = {
    "memories_fts": ("memories", "m", memories.ROW_COLUMNS, ("content_lc",)),
    "episodes_fts": ("episodes", "e", episodes.ROW_COLUMNS, ("summary_lc", "keywords_lc")),
}
_TERM = re.compile(r'"((?:[^"]|"")*)"')


def parse_match(expr: str) -> list[str]:
    """The terms of a MATCH expression built by `util.text.match_expression`
    (`"t1" OR "t2"`, inner quotes doubled)."""
    return [m.group(1).replace('""', '"') for m in _TERM.finditer(expr)]


def borders(term: str) -> list[int]:
    """Lengths k of the proper prefixes of `term` that are also suffixes: two occurrences
    of the term can overlap by k characters (e.g. "202" in "20202", k = 1)."""
    low = term.lower()
    return [k for k in range(1, len(low)) if low[:k] == low[-k:]]


def named(where: str, params: list) -> tuple[str, dict[str, object]]:
    """A `%s` WHERE clause and its parameters rewritten as `%(s<n>)s` names."""
    parts = where.split("%s")
    text = "".join(p + (f"%(s{n})s" if n < len(parts) - 1 else "") for n, p in enumerate(parts))
    return text, {f"s{n}": v for n, v in enumerate(params)}


def _count(column: str) -> str:
    """Occurrences of q.t in the lower-cased `column`, overlapping ones included: the
    byte-length difference after removing every occurrence counts the non-overlapping ones;
    only a row holding two overlapping occurrences (a witness in `w`: the term followed by
    its own tail) is counted again with a look-ahead regular expression."""
    return (f"CASE WHEN strpos({column}, q.t) = 0 THEN 0 "
            f"WHEN EXISTS (SELECT 1 FROM w WHERE w.i = q.i AND strpos({column}, w.w) > 0) "
            f"THEN regexp_count({column}, '(?=' || regexp_replace(q.t, '([.^$*+?()\\[\\]{{}}|\\\\])', "
            f"'\\\\\\1', 'g') || ')') "
            f"ELSE (octet_length({column}) - octet_length(replace({column}, q.t, ''))) / octet_length(q.t) END")


def bm25_query(fts: str, where: str) -> str:
    """The ranking statement over the table behind `fts`, filtered by `where` (table alias
    as in `_FTS`). Named parameters: `p` the LIKE patterns and `t` the texts of the terms
    (arrays, term order), `wi` / `wk` the overlaps (term index, border length), the names
    of `where`, and `limit`. The text depends only on `fts` and the shape of `where`, so the
    server plans it once per connection (psycopg prepares repeated statements).

    `cand`: rows whose lower-cased text matches a pattern, through the trigram GIN indexes;
    `occ`: (row, term, frequency) for every term a row holds — table-wide, so `df` counts
    each term's rows over the whole table as FTS5 does; only rows inside the scope are
    summed, term by term in query order as FTS5 adds its phrases."""
    table, a, columns, searched = _FTS[fts]
    cols = [f"c{j}" for j in range(len(searched))]
    matches = " OR ".join(f"{a}.{col} LIKE ANY (q_patterns.p)" for col in searched)
    holds = " OR ".join(f"strpos(cand.{c}, q.t) > 0" for c in cols)
    freq = " + ".join(f"({_count('cand.' + c)})" for c in cols)
    dl = " + ".join(f"cpersona_tokens({a}.{col.removesuffix('_lc')})" for col in searched)
    return (
        "WITH q AS (SELECT x.i, lower(x.t) AS t FROM unnest(%(t)s::text[]) WITH ORDINALITY AS x(t, i)), "
        "q_patterns AS (SELECT array_agg(lower(p)) AS p FROM unnest(%(p)s::text[]) AS y(p)), "
        "w AS (SELECT q.i, q.t || substr(q.t, z.k + 1) AS w FROM unnest(%(wi)s::int[], %(wk)s::int[]) AS z(i, k) "
        "JOIN q ON q.i = z.i), "
        f"cand AS MATERIALIZED (SELECT {a}.id, {', '.join(f'{a}.{col} AS {c}' for col, c in zip(searched, cols))} "
        f"FROM {table} {a} CROSS JOIN q_patterns WHERE {matches}), "
        f"occ AS MATERIALIZED (SELECT cand.id, q.i, ({freq})::float8 AS f FROM cand JOIN q ON {holds}), "
        "st AS (SELECT GREATEST(COALESCE(sum(n_rows), 0), 1)::float8 AS n, "
        "GREATEST(COALESCE(sum(n_tokens), 0), 1)::float8 / GREATEST(COALESCE(sum(n_rows), 0), 1) AS avgdl "
        f"FROM lexical_stats WHERE tbl = '{table}'), "
        f"idf AS (SELECT occ.i, GREATEST(ln((st.n - count(*) + 0.5) / (count(*) + 0.5)), {MIN_IDF}) AS v "
        "FROM occ CROSS JOIN st GROUP BY occ.i, st.n), "
        f"scored AS (SELECT {a}.id, sum(idf.v * ({K1 + 1} * occ.f) / (occ.f + {K1} * (1 - {B} + {B} * "
        f"({dl})::float8 / st.avgdl)) ORDER BY occ.i) AS score "
        f"FROM occ JOIN idf ON idf.i = occ.i JOIN {table} {a} ON {a}.id = occ.id CROSS JOIN st "
        f"WHERE {where} GROUP BY {a}.id) "
        f"SELECT {columns}, -scored.score AS rank FROM scored JOIN {table} {a} ON {a}.id = scored.id "
        f"ORDER BY rank, {a}.id LIMIT %(limit)s")


class PgSearchRepo:
    """Keyword queries over one connection; `fts_enabled` says whether the trigram indexes exist."""

    def __init__(self, conn: psycopg.Connection, fts_enabled: bool) -> None:
        self.conn = conn
        self.fts_enabled = fts_enabled

    def memories_fts(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories matching the terms of `expr` inside the scope, best bm25 first."""
        where, params = row_filter(scope, source_id)
        return [(MemoryRow._make(r[:-1]), r[-1]) for r in self._rank("memories_fts", expr, where, params, limit)]

    def memories_words(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories whose word index (postgres/word_index.py) holds a term of `expr` inside the
        scope, best bm25 first."""
        where, params = row_filter(scope, source_id)
        return [(MemoryRow._make(r[:-1]), r[-1]) for r in self._rank(word_index.TABLE, expr, where, params, limit)]

    def episodes_fts(self, expr: str, scope: Scope, limit: int) -> list[tuple[EpisodeRow, float]]:
        """Episodes (summary + keywords) matching `expr` inside the scope, best bm25 first."""
        where, params = predicate(scope, "e")
        return [(EpisodeRow._make(r[:-1]), r[-1]) for r in self._rank("episodes_fts", expr, where, params, limit)]

    def _rank(self, fts: str, expr: str, where: str, params: list, limit: int) -> list[tuple]:
        terms = parse_match(expr)
        if not terms:
            return []
        where, values = named(where, params)
        if fts == word_index.TABLE:
            values.update(limit=limit, t=terms)
            query = word_index.bm25_query(memories.ROW_COLUMNS, where, K1, B, MIN_IDF)
            return self.conn.execute(query, values).fetchall()
        overlaps = [(i + 1, k) for i, term in enumerate(terms) for k in borders(term)]
        values.update(limit=limit, t=terms, p=["%" + like_escape(t) + "%" for t in terms],
                      wi=[i for i, _ in overlaps], wk=[k for _, k in overlaps])
        with self.conn.transaction():
            # The planner prices a LIKE at one operator whatever the text length, so on small
            # tables it scans every row with every pattern (~0.2 ms per long row and term);
            # the trigram index reads only the rows holding the terms.
            self.conn.execute("SET LOCAL enable_seqscan = off")
            return self.conn.execute(bm25_query(fts, where), values).fetchall()

    def memories_like(self, text: str, scope: Scope, source_id: str, limit: int) -> list[MemoryRow]:
        """`content LIKE '%<text>%'` with SQLite's LIKE semantics (wildcards escaped, ASCII
        case-insensitive), newest first; lower() LIKE first so the trigram index narrows the rows."""
        where, params = row_filter(scope, source_id)
        pattern = "%" + like_escape(text) + "%"
        query = (f"SELECT {memories.ROW_COLUMNS} FROM memories m "
                 "WHERE m.content_lc LIKE lower(%s) ESCAPE '\\' "
                 f"AND cpersona_ascii_lower(m.content) LIKE cpersona_ascii_lower(%s) ESCAPE '\\' AND {where} "
                 "ORDER BY m.created_at DESC, m.id DESC LIMIT %s")
        return [MemoryRow._make(r) for r in self.conn.execute(query, [pattern, pattern, *params, limit])]

    def pool_size(self, scope: Scope) -> int:
        """Memories + episodes inside `scope` (the rows the quality gate governs)."""
        where, params = predicate(scope)
        query = f"SELECT (SELECT COUNT(*) FROM memories WHERE {where}) + (SELECT COUNT(*) FROM episodes WHERE {where})"
        return scalar(self.conn, query, params + params)

    def table_size(self, fts: str) -> int:
        """Largest id of the table behind `fts` (an upper bound of its rows)."""
        table = "memories" if fts == word_index.TABLE else _FTS[fts][0]
        return scalar(self.conn, f"SELECT COALESCE(MAX(id), 0) FROM {table}")

    def term_doc_counts(self, fts: str, grams: list[str]) -> dict[str, int]:
        """Rows of `fts` containing each term: a word of the word index, or a trigram of the
        text behind a trigram index (case-insensitive)."""
        if fts == word_index.TABLE:
            return word_index.doc_counts(self.conn, grams)
        table, alias, _, searched = _FTS[fts]
        found = {}
        for g in grams:
            pattern = "%" + like_escape(g) + "%"
            cond = " OR ".join(f"{alias}.{c} LIKE lower(%s)" for c in searched)
            query = f"SELECT count(*) FROM {table} {alias} WHERE {cond}"
            found[g] = scalar(self.conn, query, [pattern] * len(searched))
        return found

    def database_file(self) -> str:
        """This database's identity (server, database, schema), for per-database caches."""
        info = self.conn.info
        schema = scalar(self.conn, "SELECT current_schema()")
        return f"postgresql://{info.host}:{info.port}/{info.dbname}#{schema}"
