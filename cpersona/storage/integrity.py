"""The file and its schema objects: SQLite's own integrity check, the FTS5 indexes, the
recorded schema version, the canonical indexes and triggers (the SQL behind
`cpersona/health/`).

* `PRAGMA quick_check` — https://www.sqlite.org/pragma.html#pragma_quick_check
* FTS5 'integrity-check' (with `rank = 1` it also compares the index with the external
  content table) and 'rebuild' — https://www.sqlite.org/fts5.html#the_integrity_check_command
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cpersona.errors import CheckNeedsWrite, DatabaseBusy, DatabaseDamaged, StatementTimeout
from cpersona.storage import migration, originals, schema
from cpersona.storage.failures import condition_of

#: Shadow tables of an external-content FTS5 table (https://www.sqlite.org/fts5.html).
_SHADOWS = ("data", "idx", "config", "docsize")
#: Object kinds whose DDL is compared.
KINDS = ("index", "trigger")
def is_damage(err: BaseException) -> bool:
    """True when an error says the file itself is damaged (corrupt page, not a database),
    as opposed to a busy lock, a permission problem or a bad statement."""
    if isinstance(err, DatabaseDamaged):
        return True
    condition = condition_of(err)
    return condition is not None and condition.kind == "corrupt"


def _reraise_interrupt(err: sqlite3.Error) -> None:
    """An interrupted statement, a write refused by a read-only file, or a write lock held
    by another connection past the busy timeout is not a finding about the file: let it
    reach the caller (CheckNeedsWrite, DatabaseBusy)."""
    name = getattr(err, "sqlite_errorname", "")
    if name == "SQLITE_INTERRUPT":
        raise err
    if name == "SQLITE_READONLY":
        raise CheckNeedsWrite(f"the file is read-only here ({err})") from err
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        raise DatabaseBusy(f"another connection holds the file's write lock ({err})", "busy") from err


def _damage_text(err: sqlite3.Error) -> str:
    return f"{getattr(err, 'sqlite_errorname', '') or type(err).__name__}: {err}"


class IntegrityRepo:
    """File- and schema-level inspection and repair over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # ------------------------------------------------------------------ file
    def quick_check(self, limit: int = 10, stop: Callable[[], bool] | None = None) -> list[str]:
        """SQLite's quick_check messages (["ok"] for a sound file), at most `limit`; a file
        too damaged for the check to run answers with that error as its one message.
        `stop()` returning True ends the check early: StatementTimeout."""
        try:
            with self._stop_when(stop, "the check was stopped"):
                return [r[0] for r in self.conn.execute(f"PRAGMA quick_check({int(limit)})")]
        except sqlite3.DatabaseError as err:
            if is_damage(err):
                return [_damage_text(err)]
            raise

    def size_bytes(self) -> int:
        """page_count × page_size of the main database."""
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        return pages * self.conn.execute("PRAGMA page_size").fetchone()[0]

    def has_table(self, name: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        return row is not None

    def has_column(self, table: str, column: str) -> bool:
        return any(r[1] == column for r in self.conn.execute(f"PRAGMA table_info({table})"))

    def schema_version(self) -> int | None:
        """MAX(version) of schema_version; None when the table is absent."""
        return migration.stored_version(self.conn)

    def original_opened_as_is(self, version: int) -> bool:
        """True for a newer file of the original's 2.6 line that we open in place
        (storage/originals.py)."""
        return originals.opens_as_is(self.conn, version)

    # ------------------------------------------------------------------- FTS
    @contextmanager
    def _stop_when(self, stop: Callable[[], bool] | None, why: str) -> Iterator[None]:
        """Stop the statements inside as soon as `stop()` is True (a progress handler,
        https://www.sqlite.org/c3ref/progress_handler.html); raises StatementTimeout(why)."""
        if stop is None:
            yield
            return
        self.conn.set_progress_handler(lambda: int(stop()), 1000)
        try:
            yield
        except sqlite3.OperationalError as err:
            if getattr(err, "sqlite_errorname", "") == "SQLITE_INTERRUPT":
                raise StatementTimeout(why) from err
            raise
        finally:
            self.conn.set_progress_handler(None, 0)

    def fts_problem(self, fts: str, time_limit: float | None = None) -> str:
        """'' when the FTS5 table `fts` is sound and agrees with its content table, else
        the error. The content-aware check runs first; the structural check is the
        fallback when this SQLite does not accept the content-aware form. With
        `time_limit` (seconds) the check is stopped there: StatementTimeout."""
        if time_limit is None:
            return self._fts_problem(fts)
        deadline = time.monotonic() + time_limit
        with self._stop_when(lambda: time.monotonic() > deadline, f"stopped after {time_limit:g} s"):
            return self._fts_problem(fts)

    def _fts_problem(self, fts: str) -> str:
        missing = [f"{fts}_{part}" for part in _SHADOWS if not self.has_table(f"{fts}_{part}")]
        if missing:
            return f"shadow table(s) missing: {', '.join(missing)}"
        problem = self._fts_check(fts)
        return problem or (self._words_out_of_step() if fts in schema.WORD_TABLES else "")

    def _fts_check(self, fts: str) -> str:
        try:
            self.conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
            return ""
        except sqlite3.DatabaseError as err:
            _reraise_interrupt(err)
            if is_damage(err):
                return _damage_text(err)
        try:
            self.conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as err:
            _reraise_interrupt(err)
            return _damage_text(err)
        return ""

    def _words_out_of_step(self) -> str:
        """The word index holds its own text, so FTS5's check cannot compare it with
        `memories`: count the memories without a word row and the word rows without a memory."""
        lacking = self.conn.execute(
            "SELECT count(*) FROM memories WHERE id NOT IN (SELECT rowid FROM memories_words)").fetchone()[0]
        orphans = self.conn.execute(
            "SELECT count(*) FROM memories_words WHERE rowid NOT IN (SELECT id FROM memories)").fetchone()[0]
        if not (lacking or orphans):
            return ""
        return f"out of step with memories: {lacking} memories not indexed, {orphans} rows of deleted memories"

    def fts_rebuild(self, fts: str) -> str:
        """Rebuild `fts` from its content table (the word index: emptied and filled again
        from `memories`); if that fails (a shadow table is gone), drop and recreate the FTS
        table, then rebuild. '' on success, else the error."""
        try:
            self._rebuild(fts)
            return ""
        except sqlite3.DatabaseError as err:
            first = _damage_text(err)
        try:
            self.conn.execute("SAVEPOINT fts_recreate")
            self.conn.execute(f"DROP TABLE IF EXISTS {fts}")
            self.conn.execute({**schema.FTS_TABLES, **schema.WORD_TABLES}[fts])
            self._rebuild(fts)
            self.conn.execute("RELEASE fts_recreate")
        except sqlite3.DatabaseError as err:
            self.conn.execute("ROLLBACK TO fts_recreate")
            self.conn.execute("RELEASE fts_recreate")
            return f"{first}; recreating failed too: {_damage_text(err)}"
        return ""

    def _rebuild(self, fts: str) -> None:
        if fts in schema.WORD_TABLES:
            self.conn.execute(f"DELETE FROM {fts}")
            migration.index_words(self.conn)
        else:
            self.conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")

    # ------------------------------------------------------------- objects
    def object_sql(self, kind: str, name: str) -> str | None:
        """The stored DDL of an index or trigger, or None when absent."""
        row = self.conn.execute("SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone()
        return row[0] if row else None

    def replace_object(self, kind: str, name: str, ddl: str) -> str:
        """Drop (if present) and create one index or trigger; on failure the old DDL is put
        back. '' on success, else the error."""
        if kind not in KINDS:
            raise ValueError(kind)
        old = self.object_sql(kind, name)
        self.conn.execute("SAVEPOINT replace_object")
        try:
            self.conn.execute(f"DROP {kind.upper()} IF EXISTS {name}")
            self.conn.execute(ddl)
        except sqlite3.DatabaseError as err:
            self.conn.execute("ROLLBACK TO replace_object")
            self.conn.execute("RELEASE replace_object")
            return f"{type(err).__name__}: {err}" + ("" if old else " (the object is still missing)")
        self.conn.execute("RELEASE replace_object")
        return ""

    def content_duplicates_exist(self) -> bool:
        """True when two memories share agent, project, channel and content (a UNIQUE
        dedup index on those columns could not be created)."""
        sql = ("SELECT 1 FROM memories GROUP BY agent_id, project_id, channel, content HAVING COUNT(*) > 1 LIMIT 1")
        return self.conn.execute(sql).fetchone() is not None

    def exact_duplicate_extras(self) -> list[tuple[int, int]]:
        """(id, locked) of memories repeating another's agent, project, channel and content,
        except one keeper per group (a locked row when there is one, else the oldest)."""
        sql = ("SELECT id, locked FROM (SELECT id, locked, ROW_NUMBER() OVER (PARTITION BY agent_id, project_id, "
               "channel, content ORDER BY locked DESC, id) AS n FROM memories) AS numbered WHERE n > 1 ORDER BY id")
        return self.conn.execute(sql).fetchall()

    def msg_id_collisions(self) -> list[tuple[int, int]]:
        """(id, locked) of memories whose non-empty msg_id repeats within agent and project,
        except the newest (MAX id) of each group: the rows blocking the msg_id unique index."""
        sql = ("SELECT id, locked FROM memories WHERE msg_id != '' AND id NOT IN (SELECT MAX(id) FROM memories "
               "WHERE msg_id != '' GROUP BY agent_id, project_id, msg_id) AND (agent_id, project_id, msg_id) IN "
               "(SELECT agent_id, project_id, msg_id FROM memories WHERE msg_id != '' GROUP BY 1, 2, 3 "
               "HAVING COUNT(*) > 1) ORDER BY id")
        return self.conn.execute(sql).fetchall()

    def blank_msg_id(self, memory_id: int) -> bool:
        """Clear an unlocked memory's msg_id (dedup by message id no longer applies to it)."""
        return self.conn.execute("UPDATE memories SET msg_id = '' WHERE id = ? AND locked = 0",
                                 (memory_id,)).rowcount > 0
