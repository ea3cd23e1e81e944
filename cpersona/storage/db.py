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

from cpersona.errors import DatabaseBusy, DatabaseDamaged, StorageError
from cpersona.storage import schema
from cpersona.storage.integrity import is_damage
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
        read_only: open an EXISTING file as it is — no folder or file created, no migration,
            no journal-mode change, every connection query-only; `write()` raises
            StorageError. For inspecting a file (`cpersona checkup`) or serving a damaged one.

    Raises:
        SchemaTooNew: the file's schema version is newer than this code (file untouched).
        DatabaseDamaged: the file is damaged (a corrupt page, or not a database at all).
        StorageError: the file cannot be opened as a SQLite database.
    """

    def __init__(self, path: str, fts_enabled: bool = True, read_only: bool = False) -> None:
        self.memory = path == ":memory:"
        path = path if self.memory else os.path.expanduser(path)
        self.path = path
        self.read_only = read_only
        self._lock = threading.RLock()
        self._commit_order = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False
        if read_only:
            self._init_read_only(fts_enabled)
            return
        if not self.memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
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
            if is_damage(err):
                raise DatabaseDamaged(f"{path} is damaged: {err}") from err
            raise StorageError(f"{path}: {err}") from err
        except BaseException:
            self._writer.close()
            raise
        self.fts_enabled = fts_enabled and schema.has_fts(self._writer)
        self._install_vocab(self._writer)

    def _init_read_only(self, fts_enabled: bool) -> None:
        if self.memory or not os.path.isfile(self.path):
            raise StorageError(f"{self.path}: no such database file")
        try:
            self._writer = self._connect()
        except sqlite3.Error as err:
            raise StorageError(f"{self.path}: {err}") from err
        try:
            self.fts_enabled = fts_enabled and schema.has_fts(self._writer)
        except sqlite3.Error as err:
            self._writer.close()
            raise (DatabaseDamaged(f"{self.path} is damaged: {err}") if is_damage(err)
                   else StorageError(f"{self.path}: {err}")) from err
        try:
            self._install_vocab(self._writer)
        except sqlite3.Error as err:  # keyword search still works without the pruning tables
            log.warning("%s: FTS vocabulary tables unavailable: %s", self.path, err)
        self._writer.execute("PRAGMA query_only=1")

    def _connect(self, mode: str | None = None) -> sqlite3.Connection:
        """A connection with the busy timeout; `mode` ("ro" / "rw") opens an existing file
        only (SQLite URI, https://www.sqlite.org/uri.html), default: read-write-create
        (or "ro" for a read-only Database)."""
        mode = mode or ("ro" if self.read_only else None)
        target, uri = self.path, False
        if mode is not None and not self.memory:
            target, uri = f"{Path(self.path).resolve().as_uri()}?mode={mode}", True
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000,
                               uri=uri)
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
        Callbacks registered with `session.after(fn)` run after COMMIT, in commit order.
        Raises StorageError on a read-only Database, DatabaseBusy when another connection
        keeps the file's write lock past the busy timeout."""
        if self.read_only:
            raise StorageError(f"{self.path} is open read-only; nothing can be written")
        with self._commit_order:
            with self._lock:
                conn = self._writer
                session = self._session(conn)
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as err:
                    if getattr(err, "sqlite_errorname", "").startswith("SQLITE_BUSY"):
                        raise DatabaseBusy(f"{self.path}: another connection held the write lock for more than "
                                           f"{BUSY_TIMEOUT_MS / 1000:g} s") from err
                    raise
                try:
                    yield session
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            for change in session.pending_after():
                change()

    @contextmanager
    def commits_settled(self) -> Iterator[None]:
        """Hold this process's writers off: inside, every transaction it committed has run
        its after-commit callbacks (so in-memory mirrors agree with the file)."""
        with self._commit_order:
            yield

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

    @contextmanager
    def scratch(self) -> Iterator[Session]:
        """A session whose transaction is ALWAYS rolled back, on a private read-write
        connection (not the shared writer: this process's readers and its write lock are not
        held). For statements SQLite runs as writes although they change nothing, such as
        the FTS5 'integrity-check' command: while one runs it holds the FILE's write lock,
        so other writers wait (busy timeout). Waits up to the busy timeout for that lock
        itself. Raises StorageError when the file cannot be opened for writing."""
        if self.memory:
            with self._lock:
                self._writer.execute("SAVEPOINT scratch")
                try:
                    yield self._session(self._writer)
                finally:
                    self._writer.execute("ROLLBACK TO scratch")
                    self._writer.execute("RELEASE scratch")
            return
        try:
            conn = self._connect("rw")
        except sqlite3.Error as err:
            raise StorageError(f"{self.path} cannot be opened for writing: {err}") from err
        try:
            conn.execute("BEGIN")
            try:
                yield self._session(conn)
            finally:
                if conn.in_transaction:  # an interrupted write statement already rolled it back
                    conn.execute("ROLLBACK")
        finally:
            conn.close()

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

    def close(self) -> None:
        """Close every connection. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for conn in self._readers:
                conn.close()
            self._writer.close()
