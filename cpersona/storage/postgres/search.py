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
from psycopg import sql

from cpersona.storage import episodes, memories
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


def _count(column: sql.Composable, term: str, i: int) -> sql.Composable:
    """Occurrences of term `i` (lower-cased as `q.t<i>`) in the lower-cased `column`,
    overlapping ones included. The byte-length difference after removing every occurrence
    counts the non-overlapping ones; only a row that holds two overlapping occurrences (the
    term followed by its own tail) is counted again with a look-ahead regular expression."""
    t = sql.Identifier("q", f"t{i}")
    plain = sql.SQL("((octet_length({c}) - octet_length(replace({c}, {t}, ''))) / octet_length({t}))").format(
        c=column, t=t)
    overlaps = borders(term)
    if not overlaps:
        return plain
    witness = _join((sql.SQL("strpos({c}, {t} || substr({t}, {k})) > 0").format(c=column, t=t, k=sql.Literal(k + 1))
                     for k in overlaps), " OR ")
    pattern = sql.SQL(r"'(?=' || regexp_replace({}, '([.^$*+?()\[\]{{}}|\\])', '\\\1', 'g') || ')'").format(t)
    return sql.SQL("CASE WHEN {w} THEN regexp_count({c}, {p}) ELSE {plain} END").format(
        w=witness, c=column, p=pattern, plain=plain)


def named(where: str, params: list) -> tuple[str, dict[str, object]]:
    """A `%s` WHERE clause and its parameters rewritten as `%(s<n>)s` names."""
    parts = where.split("%s")
    text = "".join(p + (f"%(s{n})s" if n < len(parts) - 1 else "") for n, p in enumerate(parts))
    return text, {f"s{n}": v for n, v in enumerate(params)}


def _join(items, sep: str = ", ") -> sql.Composed:
    return sql.SQL(sep).join(items)


def bm25_query(fts: str, terms: list[str], where: str) -> sql.Composed:
    """The ranking statement of `terms` over the table behind `fts`, filtered by `where`
    (named parameters: `p<i>` the LIKE pattern and `t<i>` the text of term i, the names of
    `where`, and `limit`).

    The candidate rows (`cand`) come from the trigram GIN indexes on the lower-cased copies
    of the searched columns (schema.py); the per-term hit flags (`hits`) give the table-wide
    document frequencies (`df`); only rows inside the scope are scored."""
    table, alias, columns, searched = _FTS[fts]
    a = sql.Identifier(alias)
    cols = range(len(searched))
    n_terms = range(len(terms))
    c = [sql.Identifier(f"c{j}") for j in cols]
    match = _join((sql.SQL("{}.{} LIKE lower({})").format(a, sql.Identifier(col), sql.Placeholder(f"p{i}"))
                   for i in n_terms for col in searched), " OR ")
    flags = _join(sql.SQL("({}) AS h{}").format(
        _join((sql.SQL("strpos({}, q.t{}) > 0").format(c[j], sql.SQL(str(i))) for j in cols), " OR "),
        sql.SQL(str(i))) for i in n_terms)
    dl = _join((sql.SQL("cpersona_tokens({}.{})").format(a, sql.Identifier(col.removesuffix("_lc")))
                for col in searched), " + ")
    freqs = _join(sql.SQL("CASE WHEN h.h{i} THEN ({tf})::float8 ELSE 0 END AS f{i}").format(
        i=sql.SQL(str(i)), tf=_join((_count(sql.Identifier("h", f"c{j}"), term, i) for j in cols), " + "))
        for i, term in enumerate(terms))
    idf = _join(sql.SQL("GREATEST(ln((st.n - df.n{i} + 0.5) / (df.n{i} + 0.5)), {m}) AS i{i}").format(
        i=sql.SQL(str(i)), m=sql.Literal(MIN_IDF)) for i in n_terms)
    norm = sql.SQL("{k1} * (1 - {b} + {b} * ({dl})::float8 / st.avgdl) AS norm").format(
        k1=sql.Literal(K1), b=sql.Literal(B), dl=dl)
    parts = [sql.SQL("CASE WHEN h.h{i} THEN idf.i{i} * ({k1p} * f.f{i}) / (f.f{i} + f.norm) ELSE 0 END").format(
        i=sql.SQL(str(i)), k1p=sql.Literal(K1 + 1)) for i in n_terms]
    return sql.SQL(
        "WITH q AS (SELECT {q}), "
        "cand AS MATERIALIZED (SELECT {a}.id, {lowered} FROM {table} {a} WHERE {match}), "
        "hits AS MATERIALIZED (SELECT cand.*, {flags} FROM cand CROSS JOIN q), "
        "df AS (SELECT {df} FROM hits), "
        "st AS (SELECT GREATEST(COALESCE(sum(n_rows), 0), 1)::float8 AS n, "
        "GREATEST(COALESCE(sum(n_tokens), 0), 1)::float8 / GREATEST(COALESCE(sum(n_rows), 0), 1) AS avgdl "
        "FROM lexical_stats WHERE tbl = {tname}), "
        "idf AS (SELECT {idf} FROM df CROSS JOIN st) "
        "SELECT {columns}, -({score}) AS rank FROM hits h JOIN {table} {a} ON {a}.id = h.id "
        "CROSS JOIN q CROSS JOIN idf CROSS JOIN st CROSS JOIN LATERAL (SELECT {freqs}, {norm}) f "
        "WHERE {where} ORDER BY rank, {a}.id LIMIT %(limit)s").format(
        q=_join(sql.SQL("lower({p}) AS p{i}, lower({t}) AS t{i}").format(
            p=sql.Placeholder(f"p{i}"), t=sql.Placeholder(f"t{i}"), i=sql.SQL(str(i))) for i in n_terms),
        a=a, lowered=_join(sql.SQL("{}.{} AS {}").format(a, sql.Identifier(col), c[j])
                           for j, col in enumerate(searched)),
        table=sql.Identifier(table), match=match, flags=flags,
        df=_join(sql.SQL("count(*) FILTER (WHERE h{i}) AS n{i}").format(i=sql.SQL(str(i))) for i in n_terms),
        tname=sql.Literal(table), columns=sql.SQL(columns), score=_join(parts, " + "), where=sql.SQL(where),
        freqs=freqs, norm=norm, idf=idf)


class PgSearchRepo:
    """Keyword queries over one connection; `fts_enabled` says whether the trigram indexes exist."""

    def __init__(self, conn: psycopg.Connection, fts_enabled: bool) -> None:
        self.conn = conn
        self.fts_enabled = fts_enabled

    def memories_fts(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories matching the terms of `expr` inside the scope, best bm25 first."""
        where, params = row_filter(scope, source_id)
        return [(MemoryRow._make(r[:-1]), r[-1]) for r in self._rank("memories_fts", expr, where, params, limit)]

    def episodes_fts(self, expr: str, scope: Scope, limit: int) -> list[tuple[EpisodeRow, float]]:
        """Episodes (summary + keywords) matching `expr` inside the scope, best bm25 first."""
        where, params = predicate(scope, "e")
        return [(EpisodeRow._make(r[:-1]), r[-1]) for r in self._rank("episodes_fts", expr, where, params, limit)]

    def _rank(self, fts: str, expr: str, where: str, params: list, limit: int) -> list[tuple]:
        terms = parse_match(expr)
        if not terms:
            return []
        where, values = named(where, params)
        values["limit"] = limit
        for i, term in enumerate(terms):
            values[f"p{i}"], values[f"t{i}"] = "%" + like_escape(term) + "%", term
        with self.conn.transaction():
            # The planner prices a LIKE at one operator whatever the text length, so on small
            # tables it scans every row with every pattern (~0.2 ms per long row and term);
            # the trigram index reads only the rows holding the terms.
            self.conn.execute("SET LOCAL enable_seqscan = off")
            return self.conn.execute(bm25_query(fts, terms, where), values).fetchall()

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
        table = _FTS[fts][0]
        return scalar(self.conn, f"SELECT COALESCE(MAX(id), 0) FROM {table}")

    def trigram_doc_counts(self, fts: str, grams: list[str]) -> dict[str, int]:
        """Rows of the table behind `fts` containing each trigram (case-insensitive)."""
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
