"""Bringing any file — empty, written by the original CPersona, or by an older cpersona —
to the format of `storage/schema.py`.

The named steps of `STEPS` each say whether the file still needs them (`needed`, read-only)
and how to apply them (`run`, idempotent: DDL uses IF NOT EXISTS, a column is added only
after checking `PRAGMA table_info`). A file that needs nothing is opened without taking a
lock; otherwise ONE `BEGIN EXCLUSIVE` transaction re-checks every step under the lock
(another process may have migrated meanwhile) and runs what is still needed, the version
stamp last — so several servers opening one fresh file at the same moment serialise, and
an interrupted migration leaves the file as it was. A file stamped with a version newer
than `SCHEMA_VERSION` raises `SchemaTooNew` before anything is written to it.

FTS5 is optional at run time: when this SQLite cannot open the FTS tables (no FTS5, or no
trigram tokenizer — `fts_problem`), or CPERSONA_FTS_ENABLED=false, the FTS triggers are
dropped (they would make every write fail, or maintain an index nobody reads) and bit 0 of
`PRAGMA user_version` is set, so the index is rebuilt when FTS is next enabled.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from cpersona.errors import SchemaTooNew
from cpersona.storage import originals, text_columns, word_index
from cpersona.storage.meta import WORD_FORM_KEY, decode
from cpersona.storage.schema import (
    ASSOCIATION_INDEXES,
    ASSOCIATION_TABLES,
    ASSOCIATION_TRIGGERS,
    FTS_REBUILD_PENDING,
    FTS_TABLES,
    FTS_TRIGGERS,
    INDEXES,
    LADDER_COLUMNS,
    SCHEMA_VERSION,
    TABLES,
    UNIQUE_INDEXES,
    WORD_TABLES,
    WORD_TRIGGERS,
)
from cpersona.util.words import WORD_FORM_VERSION

log = logging.getLogger(__name__)

_TOKENIZE = re.compile(r"tokenize\s*=\s*'([^']*)'")


def stored_version(conn: sqlite3.Connection) -> int | None:
    """MAX(version) of schema_version, or None when the table is absent (new file)."""
    if not _exists(conn, "table", "schema_version"):
        return None
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return row[0]


def check_not_newer(conn: sqlite3.Connection, path: str) -> None:
    """Raise SchemaTooNew if the file's schema is newer than this code, unless it is an
    original CPersona 2.6 file we open as is (`storage/originals.py`). Reads only."""
    version = stored_version(conn)
    if version is not None and version > SCHEMA_VERSION and not originals.opens_as_is(conn, version):
        raise SchemaTooNew(
            f"{path} has schema v{version}, newer than this cpersona (v{SCHEMA_VERSION}); "
            "upgrade cpersona to open it, or copy its memories into a new database with "
            "`cpersona import --from-db FILE` (the file was not modified)"
        )


def fts_problem(conn: sqlite3.Connection) -> str:
    """'' when this SQLite can use every FTS table of `FTS_TABLES`, else why not (e.g.
    "no such tokenizer: trigram" on a build without the trigram tokenizer, or "no such
    module: fts5"). A table present in the file is opened; a missing one is probed by
    creating a TEMP table with its tokenizer (nothing is written to the file)."""
    for name, ddl in FTS_TABLES.items():
        try:
            if _exists(conn, "table", name):
                conn.execute(f"SELECT * FROM {name} LIMIT 0").fetchall()
            else:
                tokenizer = _TOKENIZE.search(ddl)
                options = f", tokenize='{tokenizer.group(1)}'" if tokenizer else ""
                conn.execute(f"CREATE VIRTUAL TABLE temp.cpersona_fts_probe USING fts5(x{options})")
                conn.execute("DROP TABLE temp.cpersona_fts_probe")
        except sqlite3.OperationalError as err:
            return f"{name}: {err}"
    return ""


@dataclass(frozen=True)
class Step:
    """One named migration step: `needed(conn, fts)` reads the file and says whether the
    step has work left; `run(conn, fts)` does it (inside the migration transaction).
    `fts` is True when the FTS index is to be maintained (enabled and usable)."""

    number: int
    name: str
    needed: Callable[[sqlite3.Connection, bool], bool]
    run: Callable[[sqlite3.Connection, bool], object]  # its result is not used


def _missing(conn: sqlite3.Connection, kind: str, names) -> list[str]:
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))}
    return [n for n in names if n not in present]


def _missing_columns(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    columns: dict[str, set[str]] = {}
    for table, _, _ in LADDER_COLUMNS:
        if table not in columns:
            columns[table] = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    return [c for c in LADDER_COLUMNS if c[1] not in columns[c[0]]]


def _create_tables(conn: sqlite3.Connection, fts: bool) -> None:
    for ddl in TABLES.values():
        conn.execute(ddl)


def _add_columns(conn: sqlite3.Connection, fts: bool) -> None:
    for table, column, decl in _missing_columns(conn):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


def _create_indexes(conn: sqlite3.Connection, fts: bool) -> None:
    for ddl in INDEXES.values():
        conn.execute(ddl)


def _stale_fts_triggers(conn: sqlite3.Connection) -> list[str]:
    """FTS triggers missing or different from `FTS_TRIGGERS` (a rebuild is then due)."""
    return [name for name, ddl in FTS_TRIGGERS.items() if _trigger_sql(conn, name) != ddl]


def _present_fts_triggers(conn: sqlite3.Connection) -> list[str]:
    return [name for name in FTS_TRIGGERS if _trigger_sql(conn, name) is not None]


def _drop_fts_triggers(conn: sqlite3.Connection, fts: bool) -> None:
    """FTS off or unusable: drop its triggers (with an unusable tokenizer they fail every
    write; with FTS disabled they would keep an index nobody reads) and mark the index
    for a rebuild when FTS is enabled again."""
    for name in _present_fts_triggers(conn):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    if len(_missing(conn, "table", FTS_TABLES)) < len(FTS_TABLES):
        _set_user_bit(conn, FTS_REBUILD_PENDING, True)


def _fts_out_of_step(conn: sqlite3.Connection) -> bool:
    """The FTS index may not match its content tables: a table or trigger is missing (rows
    were written without it), or a rebuild was left pending. A trigger whose text merely
    differs (another release's spelling) kept the index in step: it is only replaced."""
    missing = _missing(conn, "table", FTS_TABLES) or _missing(conn, "trigger", FTS_TRIGGERS)
    return bool(_rebuild_pending(conn) or missing)


def _bootstrap_fts(conn: sqlite3.Connection, fts: bool) -> None:
    """Create the FTS tables and triggers; rebuild the index when it was out of step."""
    rebuild = _fts_out_of_step(conn)
    for ddl in FTS_TABLES.values():
        conn.execute(ddl)
    for name in _stale_fts_triggers(conn):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        conn.execute(FTS_TRIGGERS[name])
    if rebuild:
        for name in FTS_TABLES:
            conn.execute(f"INSERT INTO {name}({name}) VALUES ('rebuild')")
        _set_user_bit(conn, FTS_REBUILD_PENDING, False)
        log.info("FTS5 indexes rebuilt")


def _words_lacking(conn: sqlite3.Connection) -> bool:
    """The word index or a trigger is missing, or a memory has no row in it (written while
    FTS was off, or by the original CPersona, whose update trigger removed the old row).

    Checked at every open, so first cheaply: when the index has as many rows as `memories`
    (its `_docsize` shadow table holds one row per indexed row,
    https://www.sqlite.org/fts5.html#the_columnsize_option), nothing lacks — a lacking row
    would need an orphan row of a deleted memory to balance it, and the delete trigger
    removes those. Each COUNT(*) walks the leaf pages of the smallest b-tree; only when the
    counts differ are the memories compared row by row (measured:
    benchmarks/rounds/2026-11-30-round-03-latency.md)."""
    if _missing(conn, "table", WORD_TABLES) or _missing(conn, "trigger", WORD_TRIGGERS):
        return True
    if _exists(conn, "table", WORD_DOCSIZE):
        n, indexed = conn.execute(
            f"SELECT (SELECT COUNT(*) FROM memories), (SELECT COUNT(*) FROM {WORD_DOCSIZE})").fetchone()
        if n == indexed:
            return False
    row = conn.execute("SELECT 1 FROM memories WHERE id NOT IN (SELECT rowid FROM memories_words) LIMIT 1")
    return row.fetchone() is not None


#: FTS5's shadow table of the word index with one row per indexed row (id = rowid).
WORD_DOCSIZE = "memories_words_docsize"


#: Memories read per statement while filling the word index (bounds memory, not the lock).
WORD_BACKFILL_BATCH = 2000


def _word_form_stale(conn: sqlite3.Connection) -> bool:
    """The word index holds rows in another form than `util.words.index_form` writes (an
    older release's tokens), or no form is recorded yet: every row must be re-tokenised."""
    if not _exists(conn, "table", "cpersona_meta"):
        return True
    row = conn.execute("SELECT value FROM cpersona_meta WHERE key = ?", (WORD_FORM_KEY,)).fetchone()
    return row is None or decode(WORD_FORM_KEY, row[0]) != WORD_FORM_VERSION


def index_words(conn: sqlite3.Connection, fts: bool = True) -> int:
    """Create the word index and its triggers, then index every memory it lacks: all of
    them on the first open, afterwards those another program added or changed (also the
    health check's repair after emptying the index). When the index was written in an older
    form (`_word_form_stale`), it is emptied first and every memory re-tokenised; this runs
    inside the migration's one exclusive transaction, so a process killed midway leaves the
    old index and the old form record, and the next open starts over (seconds per 100k short
    rows: benchmarks/rounds/2026-12-03-moved-from-code.md). Returns the memories indexed."""
    if _word_form_stale(conn):
        conn.execute(f"DROP TABLE IF EXISTS {next(iter(WORD_TABLES))}")
    for ddl in (*WORD_TABLES.values(), *WORD_TRIGGERS.values()):
        conn.execute(ddl)
    done, last = 0, None
    while rows := _lacking_words(conn, last):
        word_index.put_many(conn, rows)
        done, last = done + len(rows), rows[-1][0]
    conn.execute("INSERT OR REPLACE INTO cpersona_meta(key, value) VALUES (?, ?)",
                 (WORD_FORM_KEY, json.dumps(WORD_FORM_VERSION)))
    if done:
        log.info("word index: %d memories indexed", done)
    return done


def _lacking_words(conn: sqlite3.Connection, after: int | None) -> list[tuple[int, str]]:
    """The next WORD_BACKFILL_BATCH memories (by id, after `after`; every id when None — SQLite
    allows ids ≤ 0) without a row in the word index, their content as text: another program
    may have written a BLOB or bytes that are not UTF-8, read here with U+FFFD for what is not
    (as FTS5 itself reads them; storage/text_columns.py), so one such row cannot keep the
    store from opening — on any connection, with or without the lenient TEXT reading."""
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        rows = conn.execute(
            "SELECT id, content FROM memories WHERE (? IS NULL OR id > ?) AND id NOT IN "
            "(SELECT rowid FROM memories_words) ORDER BY id LIMIT ?", (after, after, WORD_BACKFILL_BATCH)).fetchall()
    finally:
        conn.text_factory = factory
    return [(i, text if isinstance(text, str) else "" if text is None else text_columns.lenient_text(text))
            for i, text in rows]


def _graph_missing(conn: sqlite3.Connection) -> bool:
    """A table, index or trigger of the declared graph is missing."""
    return any(_missing(conn, kind, names) for kind, names in (
        ("table", ASSOCIATION_TABLES), ("index", ASSOCIATION_INDEXES), ("trigger", ASSOCIATION_TRIGGERS)))


def _create_graph(conn: sqlite3.Connection, fts: bool) -> None:
    """The declared graph's tables, indexes and delete triggers (IF NOT EXISTS: a file of the
    original's 2.6 line keeps its own, which are the same)."""
    for ddl in (*ASSOCIATION_TABLES.values(), *ASSOCIATION_INDEXES.values(), *ASSOCIATION_TRIGGERS.values()):
        conn.execute(ddl)


def _stamp(conn: sqlite3.Connection, fts: bool) -> None:
    conn.execute("INSERT OR REPLACE INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION,))


#: The migration, in order, as data: every step that is `needed` runs inside one exclusive
#: transaction. Adding a table, column, index or FTS table is an entry in the DDL tables
#: above; the steps pick it up.
STEPS = (
    Step(1, "create the tables", lambda c, f: bool(_missing(c, "table", TABLES)), _create_tables),
    Step(2, "add the columns of later versions", lambda c, f: bool(_missing_columns(c)), _add_columns),
    Step(3, "drop the FTS triggers while FTS is off or unusable",
         lambda c, f: not f and bool(_present_fts_triggers(c)), _drop_fts_triggers),
    Step(4, "create the lookup indexes", lambda c, f: bool(_missing(c, "index", INDEXES)), _create_indexes),
    Step(5, "deduplicate, then create the dedup unique indexes",
         lambda c, f: bool(_missing(c, "index", UNIQUE_INDEXES)), lambda c, f: _ensure_unique_indexes(c)),
    Step(6, "create the FTS tables and triggers, rebuild a stale index",
         lambda c, f: f and (_fts_out_of_step(c) or bool(_stale_fts_triggers(c))), _bootstrap_fts),
    Step(7, "create the word index, index the memories it lacks",
         lambda c, f: f and (_words_lacking(c) or _word_form_stale(c)), index_words),
    Step(8, "create the declared-associations tables, indexes and triggers",
         lambda c, f: _graph_missing(c), _create_graph),
    # an original 2.6 file keeps its own newer stamp (storage/originals.py)
    Step(9, "stamp the schema version", lambda c, f: (stored_version(c) or 0) < SCHEMA_VERSION, _stamp),
)


def up_to_date(conn: sqlite3.Connection, fts: bool) -> bool:
    """True when no step has work left (read-only, no lock)."""
    return not any(step.needed(conn, fts) for step in STEPS)


def migrate(conn: sqlite3.Connection, fts: bool, path: str = "",
            begin: Callable[[sqlite3.Connection], None] | None = None) -> list[str]:
    """Bring the file on `conn` (autocommit) to the current format; returns the names of
    the steps run (empty when the file was up to date — no lock taken then).

    `fts`: maintain the FTS index (enabled AND usable, see `fts_problem`). `begin` opens
    the exclusive transaction (default `BEGIN EXCLUSIVE`; `Database` passes one that waits
    for another process's migration). Raises SchemaTooNew (nothing written) and
    sqlite3.Error; on any error the transaction is rolled back.
    """
    if up_to_date(conn, fts):
        return []
    (begin or (lambda c: c.execute("BEGIN EXCLUSIVE")))(conn)
    try:
        check_not_newer(conn, path)  # re-checked under the lock
        done = []
        for step in STEPS:  # each re-checked under the lock, after the steps before it
            if step.needed(conn, fts):
                step.run(conn, fts)
                done.append(step.name)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if done:
        log.info("database migrated: %s", "; ".join(done))
    return done


def has_fts(conn: sqlite3.Connection) -> bool:
    """True when every FTS5 table exists in the file, the word index included (a file the
    original CPersona wrote, opened read-only, has none: keyword search falls back to LIKE)."""
    return not _missing(conn, "table", {**FTS_TABLES, **WORD_TABLES})


def _exists(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone()
    return row is not None


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


def _rebuild_pending(conn: sqlite3.Connection) -> bool:
    return bool(conn.execute("PRAGMA user_version").fetchone()[0] & FTS_REBUILD_PENDING)


def _set_user_bit(conn: sqlite3.Connection, bit: int, on: bool) -> None:
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.execute(f"PRAGMA user_version = {(current | bit) if on else (current & ~bit)}")
