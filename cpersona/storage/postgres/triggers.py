"""Statement triggers of the PostgreSQL schema: the lexical statistics bm25 needs, and the
change feed that keeps every node's resident vector index in step.

Each trigger is FOR EACH STATEMENT with transition tables
(https://www.postgresql.org/docs/15/sql-createtrigger.html), so a bulk copy costs one
trigger call per statement, not per row.

Change-feed payload (channel `cpersona.<schema>`, one NOTIFY per statement and table):

    <node>|<table>|<id>,<id>,…     rows whose text, vector or scope columns changed
    <node>|<table>|*               more than FEED_MAX_IDS rows: reload that table
    <node>|meta|<key>              a cpersona_meta key was written
    <node>|tasks|                  tasks were queued

`<node>` is the writing connection's `cpersona.node` setting (set by PgDatabase on every
connection it opens; '' for any other client), so a node skips its own changes, which its
after-commit hooks have applied already. NOTIFY is delivered after COMMIT only, in commit
order (https://www.postgresql.org/docs/15/sql-notify.html).
"""

from __future__ import annotations

import psycopg

#: Ids listed in one notification; beyond it the receiver reloads the table.
FEED_MAX_IDS = 200
#: Rows per table in lexical_stats: slot = backend pid mod STAT_SLOTS, so writers on different
#: nodes do not queue on one counter row.
STAT_SLOTS = 16

_NOTIFY = """PERFORM pg_notify('cpersona.' || TG_TABLE_SCHEMA,
           COALESCE(current_setting('cpersona.node', true), '') || '|' || {kind} || '|' || {body})"""


def _ids_body(rows: str) -> str:
    return (f"(SELECT CASE WHEN count(*) > {FEED_MAX_IDS} THEN '*' ELSE string_agg(id::text, ',' ORDER BY id) END "
            f"FROM {rows})")


#: table → (token expression over a row, columns whose change the resident index must see).
_FED = {
    "memories": ("cpersona_tokens(content)", ("content", "embedding", "agent_id", "project_id", "channel")),
    "episodes": ("cpersona_tokens(summary) + cpersona_tokens(keywords)",
                 ("summary", "keywords", "embedding", "agent_id", "project_id", "channel")),
}


def _feed_function(table: str, op: str) -> str:
    """The trigger function of one table and operation: statistics, then the notification
    (for UPDATE only when a watched column changed, so a recall_count bump is silent)."""
    tokens, watched = _FED[table]
    if op == "UPDATE":
        changed = " OR ".join(f"n.{c} IS DISTINCT FROM o.{c}" for c in watched)
        rows = f"(SELECT n.id FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE {changed}) AS changed"
    else:
        rows = ("new_rows" if op == "INSERT" else "old_rows") + " AS changed"
    return f"""CREATE OR REPLACE FUNCTION cpersona_{table}_{op.lower()}() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE d_rows bigint; d_tokens bigint;
        BEGIN
          {_stats_for(table, op, tokens)}
          IF EXISTS (SELECT 1 FROM {rows}) THEN
            {_NOTIFY.format(kind=f"'{table}'", body=_ids_body(rows))};
          END IF;
          RETURN NULL;
        END $$"""


def _stats_for(table: str, op: str, tokens: str) -> str:
    """The stats update of one operation, naming only the transition tables it has."""
    new = f"COALESCE((SELECT sum({tokens}) FROM new_rows), 0)"
    old = f"COALESCE((SELECT sum({tokens}) FROM old_rows), 0)"
    d_rows = {"INSERT": "(SELECT count(*) FROM new_rows)", "DELETE": "-(SELECT count(*) FROM old_rows)",
              "UPDATE": "0"}[op]
    d_tokens = {"INSERT": new, "DELETE": f"-{old}", "UPDATE": f"{new} - {old}"}[op]
    return f"""
          d_rows := {d_rows};
          d_tokens := {d_tokens};
          IF d_rows <> 0 OR d_tokens <> 0 THEN
            INSERT INTO lexical_stats(tbl, slot, n_rows, n_tokens)
            VALUES ('{table}', pg_backend_pid() % {STAT_SLOTS}, d_rows, d_tokens)
            ON CONFLICT (tbl, slot) DO UPDATE SET n_rows = lexical_stats.n_rows + excluded.n_rows,
                                                  n_tokens = lexical_stats.n_tokens + excluded.n_tokens;
          END IF;"""


_REFERENCING = {"INSERT": "REFERENCING NEW TABLE AS new_rows", "DELETE": "REFERENCING OLD TABLE AS old_rows",
                "UPDATE": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"}

def install_stats(conn: psycopg.Connection, table: str, tokens: str) -> None:
    """Statistics-only triggers (no change feed) keeping `lexical_stats` rows of `table`,
    `tokens` being the token count of one row."""
    for op in ("INSERT", "UPDATE", "DELETE"):
        fn = f"cpersona_{table}_{op.lower()}"
        conn.execute(f"""CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE d_rows bigint; d_tokens bigint;
            BEGIN
              {_stats_for(table, op, tokens)}
              RETURN NULL;
            END $$""")
        conn.execute(f"DROP TRIGGER IF EXISTS {fn} ON {table}")
        conn.execute(f"CREATE TRIGGER {fn} AFTER {op} ON {table} {_REFERENCING[op]} "
                     f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()")


def install(conn: psycopg.Connection) -> None:
    """(Re)create every trigger function and trigger (idempotent: CREATE OR REPLACE)."""
    for table in _FED:
        for op in ("INSERT", "UPDATE", "DELETE"):
            fn = f"cpersona_{table}_{op.lower()}"
            conn.execute(_feed_function(table, op))
            conn.execute(f"DROP TRIGGER IF EXISTS {fn} ON {table}")
            conn.execute(f"CREATE TRIGGER {fn} AFTER {op} ON {table} {_REFERENCING[op]} "
                         f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()")
    for op in ("INSERT", "UPDATE", "DELETE"):
        fn = f"cpersona_meta_{op.lower()}"
        rows = "old_rows" if op == "DELETE" else "new_rows"
        conn.execute(f"""CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              {_NOTIFY.format(kind="'meta'", body=f"COALESCE((SELECT string_agg(key, ',') FROM {rows}), '')")};
              RETURN NULL;
            END $$""")
        conn.execute(f"DROP TRIGGER IF EXISTS {fn} ON cpersona_meta")
        conn.execute(f"CREATE TRIGGER {fn} AFTER {op} ON cpersona_meta {_REFERENCING[op]} "
                     f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()")
    conn.execute(f"""CREATE OR REPLACE FUNCTION cpersona_tasks_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          {_NOTIFY.format(kind="'tasks'", body="''")};
          RETURN NULL;
        END $$""")
    conn.execute("DROP TRIGGER IF EXISTS cpersona_tasks_insert ON pending_memory_tasks")
    conn.execute("CREATE TRIGGER cpersona_tasks_insert AFTER INSERT ON pending_memory_tasks "
                 "FOR EACH STATEMENT EXECUTE FUNCTION cpersona_tasks_insert()")
