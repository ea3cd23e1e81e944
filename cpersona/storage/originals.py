"""Database files written by the original CPersona (schema v2 … v21), and by other copies
of cpersona, seen from outside.

* `opens_as_is(conn, version)` — a file stamped newer than our schema that we still open
  in place: the original's 2.6 line (v14 … v21) only ADDED tables (entities, relations,
  record blocks, folders, change logs) and columns (`embedding_model`) around the v13
  tables. When every table and column of v13 is there, our reads and writes touch only
  what v13 defines; the original's own triggers keep its extra tables in step, and
  nothing of them is dropped or rewritten — so the original still opens the file after us.
* `SourceFile` — a read-only view of any such file for `cpersona import --from-db`: its
  schema version, who wrote it, the recorded vector model when it is ours, the `DumpRepo`
  that reads its rows whatever columns its version has, and its declared associations.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from cpersona.errors import StorageError
from cpersona.storage import text_columns
from cpersona.storage.associations import AssociationRepo
from cpersona.storage.dump import DumpRepo, columns
from cpersona.storage.meta import MetaRepo
from cpersona.storage.records import Graph

#: The newest schema version of the original CPersona we know the layout of (2.6.14).
ORIGINAL_MAX_VERSION = 21
#: Columns of schema v13 that our reads and writes use (table → columns).
V13_COLUMNS = {
    "memories": {"id", "agent_id", "project_id", "msg_id", "content", "source", "timestamp", "metadata", "embedding",
                 "channel", "recall_count", "last_recalled_at", "locked", "created_at"},
    "episodes": {"id", "agent_id", "project_id", "summary", "keywords", "embedding", "start_time", "end_time",
                 "resolved", "channel", "created_at"},
    "profiles": {"id", "agent_id", "project_id", "user_id", "content", "updated_at"},
    "pending_memory_tasks": {"id", "task_type", "agent_id", "project_id", "payload", "retries", "created_at"},
}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def opens_as_is(conn: sqlite3.Connection, version: int) -> bool:
    """True for a file of the original's 2.6 line (v14 … ORIGINAL_MAX_VERSION) holding every
    table and column of v13 (see the module doc)."""
    if not 13 < version <= ORIGINAL_MAX_VERSION:
        return False
    return all(need <= columns(conn, table) for table, need in V13_COLUMNS.items())


def is_sqlite(path: Path) -> bool:
    """True when the file starts with the SQLite header."""
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


class SourceFile:
    """A database file opened read-only (never migrated, never written).

    Raises:
        StorageError: not a SQLite file, unreadable, not a CPersona database, or written
            by a newer original than we know.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        if not is_sqlite(path):
            raise StorageError(f"{path} is not a SQLite database")
        try:
            self.conn = text_columns.prepare(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True))
            self.conn.execute("BEGIN")  # one snapshot for the whole read
            self.dump = DumpRepo(self.conn)
            self.version = self.dump.schema_version()
            has_memories = self.dump.has("memories")
        except sqlite3.Error as err:
            raise StorageError(f"{path}: cannot be read ({err})") from err
        if not has_memories:
            self.close()
            raise StorageError(f"{path} is not a CPersona database (it has no memories table)")
        if self.version is not None and self.version > ORIGINAL_MAX_VERSION:
            self.close()
            raise StorageError(f"{path} has schema v{self.version}, newer than any CPersona release we know "
                               f"(v{ORIGINAL_MAX_VERSION}); export it with the release that wrote it "
                               "(export_memories) and import the JSONL file")

    @property
    def ours(self) -> bool:
        """Written (or opened) by this cpersona: it records its vectors' model."""
        return self.dump.has("cpersona_meta")

    def vector_model(self) -> tuple[str | None, int | None]:
        """(model, dim) recorded for the file's vectors (ours only; a pending re-embedding
        means mixed vectors: (None, None))."""
        if not self.ours:
            return None, None
        state = MetaRepo(self.conn).vector_state()
        return (None, None) if state.pending else (state.model, state.dim)

    def graph(self) -> Graph:
        """The file's declared associations (none when it has no graph tables: before v15)."""
        if not all(self.dump.has(t) for t in ("entities", "entity_aliases", "entity_mentions", "relations")):
            return Graph({}, [], [])
        return AssociationRepo(self.conn).graph(None)

    def describe(self) -> dict[str, Any]:
        """{path, schema_version, written_by, memories, episodes, profiles}."""
        return {"path": str(self.path), "schema_version": self.version,
                "written_by": "cpersona" if self.ours else "original CPersona",
                **{t: self.dump.count(t, None) for t in ("memories", "episodes", "profiles")}}

    def close(self) -> None:
        self.conn.close()
