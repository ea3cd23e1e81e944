"""SQLite connections: one serialised write connection, one read connection per thread.

Writes go through `Database.write()`: a `BEGIN IMMEDIATE … COMMIT` transaction under a
process-wide lock, rolled back on any exception. Callbacks registered with
`Session.after(fn)` run after COMMIT and before the next writer of this process commits,
so in-memory mirrors of the data (the resident vector index) see writes in commit order;
nothing registered runs on rollback. Reads use a per-thread connection in autocommit mode;
WAL gives each statement a consistent snapshot and never shows another connection's
uncommitted rows (https://www.sqlite.org/wal.html).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cpersona.errors import StorageError
from cpersona.storage import schema
from cpersona.storage.session import Session

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
_VOCAB_TABLES = ("memories_fts", "episodes_fts")


class Database:
    """One SQLite file (or ":memory:") with the current schema applied.

    Args:
        path: file path (`~` expanded); parent folders are created. ":memory:" keeps
            everything in RAM (reads then share the write connection).
        fts_enabled: create/maintain the FTS5 tables (CPERSONA_FTS_ENABLED).

    Raises:
        SchemaTooNew: the file's schema version is newer than this code (file untouched).
        StorageError: the file cannot be opened as a SQLite database.
    """

    #: One file on one machine: per-file companions (the calibration sidecar) are right here.
    shared_by_nodes = False

    def __init__(self, path: str, fts_enabled: bool = True) -> None:
        self.memory = path == ":memory:"
        path = path if self.memory else os.path.expanduser(path)
        self.path = path
        if not self.memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._commit_order = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False
        try:
            self._writer = self._connect()
        except sqlite3.Error as err:
            raise StorageError(f"{path}: {err}") from err
        try:
            schema.check_not_newer(self._writer, path)
            if not self.memory:
                self._writer.execute("PRAGMA journal_mode=WAL")
                self._writer.execute("PRAGMA synchronous=NORMAL")
            schema.migrate(self._writer, fts_enabled)
        except sqlite3.Error as err:
            self._writer.close()
            raise StorageError(f"{path}: {err}") from err
        except BaseException:
            self._writer.close()
            raise
        self.fts_enabled = fts_enabled and schema.has_fts(self._writer)
        self._install_vocab(self._writer)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        return conn

    def _install_vocab(self, conn: sqlite3.Connection) -> None:
        """TEMP fts5vocab tables (term document counts, used to prune common query terms),
        created before a reader turns query-only. Nothing is written to the file."""
        if self.fts_enabled:
            for table in _VOCAB_TABLES:
                conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_vocab "
                             f"USING fts5vocab(main, {table}, 'row')")

    def _session(self, conn: sqlite3.Connection) -> Session:
        return Session(conn, self.fts_enabled)

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One IMMEDIATE write transaction; commit on success, roll back on any exception.
        Callbacks registered with `session.after(fn)` run after COMMIT, in commit order."""
        with self._commit_order:
            with self._lock:
                conn = self._writer
                session = self._session(conn)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield session
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            for change in session.pending_after():
                change()

    def reader(self) -> sqlite3.Connection:
        """The calling thread's read connection (autocommit; never holds a transaction)."""
        if self.memory:
            return self._writer
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._install_vocab(conn)
            conn.execute("PRAGMA query_only=1")
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reading; ":memory:" reads are serialised with writes."""
        if self.memory:
            with self._lock:
                yield self._session(self._writer)
        else:
            yield self._session(self.reader())

    def data_version(self) -> int:
        """PRAGMA data_version of the write connection: changes only when ANOTHER
        connection (another process, or a reader) committed since the last call."""
        with self._lock:
            return self._writer.execute("PRAGMA data_version").fetchone()[0]

    def change_stamp(self) -> tuple[int, int]:
        """Changes by this process's writer and by any other connection; equal stamps mean
        the file's rows are unchanged (used to cache derived counts)."""
        with self._lock:
            return self._writer.total_changes, self._writer.execute("PRAGMA data_version").fetchone()[0]

    def changes_since(self, version: int) -> list | None:
        """Which rows other connections changed after `version`: SQLite's data_version
        says only THAT another connection committed, never what — so always None (reload)."""
        return None

    def describe(self) -> dict:
        """Where the data lives, for `stats`: the file, its size with the WAL, WAL in use."""
        path = ":memory:" if self.memory else os.path.realpath(self.path)
        files = [p for p in (path, f"{path}-wal") if not self.memory and os.path.exists(p)]
        return {"backend": "sqlite", "path": path, "size_bytes": sum(os.path.getsize(p) for p in files),
                "wal": len(files) > 1}

    def close(self) -> None:
        """Close every connection. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for conn in self._readers:
                conn.close()
            self._writer.close()
