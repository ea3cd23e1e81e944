"""SQLite connections: one serialised write connection, one read connection per thread.

Writes go through `Database.write()`: a `BEGIN IMMEDIATE … COMMIT` transaction under a
process-wide lock, rolled back on any exception. Callbacks registered with
`Session.after(fn)` run after COMMIT and before the next writer of this process commits,
so in-memory mirrors of the data (the resident vector index) see writes in commit order;
nothing registered runs on rollback. Reads use a per-thread connection in autocommit mode;
WAL gives each statement a consistent snapshot and never shows another connection's
uncommitted rows (https://www.sqlite.org/wal.html).

An environmental failure inside `read()` / `write()` (busy past the busy timeout, disk full,
I/O error, corrupt file) is raised as `StorageUnavailable` naming it (storage/failures.py);
the server keeps running and recovers by itself once the cause is gone.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

from cpersona.errors import StorageError
from cpersona.storage import migration, resident_trigrams, resident_words, text_columns
from cpersona.storage.chunks import ChunkedWrites
from cpersona.storage.commit_order import CommitOrdered
from cpersona.storage.failures import Conditions, condition_of
from cpersona.storage.file_identity import FileIdentity
from cpersona.storage.fts_counts import CountingConnection
from cpersona.storage.ports import Change
from cpersona.storage.resident_fts import ResidentFts
from cpersona.storage.search import install_vocab
from cpersona.storage.session import Session

log = logging.getLogger(__name__)

#: Default of CPERSONA_BUSY_TIMEOUT_MS (the original's busy_timeout).
BUSY_TIMEOUT_MS = 5000
#: How long opening a file waits for another process that is migrating it (a large file's
#: FTS rebuild takes seconds to minutes), retrying every busy timeout, before giving up.
MIGRATION_WAIT_S = 300.0
#: `change_stamp(wait=False)` waits this long for the writer lock: a stamp read by another
#: thread (the resident-index builder) holds it for microseconds (longer when the GIL passes to
#: another thread meanwhile), a write of an import for seconds.
STAMP_WAIT_S = 0.02


class Database(CommitOrdered, ChunkedWrites):
    """One SQLite file (or ":memory:") with the current schema applied.

    Args:
        path: file path (`~` expanded); parent folders are created. ":memory:" keeps
            everything in RAM (reads then share the write connection).
        fts_enabled: create/maintain the FTS5 tables (CPERSONA_FTS_ENABLED).
        busy_timeout_ms: how long a statement waits for another connection's lock before
            it fails as busy (CPERSONA_BUSY_TIMEOUT_MS; https://www.sqlite.org/pragma.html#pragma_busy_timeout).
        read_only: open an EXISTING file as it is — no folder or file created, no migration,
            no journal-mode change, every connection query-only; `write()` raises
            StorageError. For inspecting a file (`cpersona checkup`) or serving a damaged one.

    Attributes:
        fts_enabled: the FTS5 index is maintained and searched.
        fts_problem: why FTS is off although enabled ('' when usable or disabled), e.g. "memories_fts: no such
            tokenizer: trigram": keyword search then uses LIKE and writes work (FTS triggers dropped).
        conditions: the failure conditions currently affecting the file (a deleted or replaced file included).

    Raises:
        SchemaTooNew: the file's schema version is newer than this code (file untouched).
        DatabaseDamaged: the file is damaged (a corrupt page, or not a database at all).
        StorageError: the file cannot be opened as a SQLite database (StorageUnavailable
            when a named condition is the cause: busy past MIGRATION_WAIT_S, disk full, …).
    """

    #: One file on one machine: per-file companions (the calibration sidecar) are right here.
    shared_by_nodes = False
    backend = "sqlite"

    def __init__(self, path: str, fts_enabled: bool = True, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                 read_only: bool = False) -> None:
        self.memory = path == ":memory:"
        path = path if self.memory else os.path.expanduser(path)
        self.path = path
        self.read_only = read_only
        self._lock = threading.RLock()
        self._init_commit_order()
        self._local = threading.local()
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []  # (owner thread, its reader)
        self._closed = False
        self.sqlite_version = sqlite3.sqlite_version
        self.busy_timeout_ms = busy_timeout_ms
        self.conditions = Conditions(path, busy_timeout_ms)
        self.fts_problem = ""
        self._identity = FileIdentity(path, self.conditions)
        if read_only:
            self._init_read_only(fts_enabled)
            return
        if not self.memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._writer = self._connect()
        except sqlite3.Error as err:
            raise self._open_failure(err) from err
        try:
            migration.check_not_newer(self._writer, path)
            if not self.memory:
                self._waiting(lambda: self._writer.execute("PRAGMA journal_mode=WAL"))
                self._writer.execute("PRAGMA synchronous=NORMAL")
            self.fts_problem = migration.fts_problem(self._writer) if fts_enabled else ""
            migration.migrate(self._writer, fts_enabled and not self.fts_problem, path,
                              begin=lambda conn: self._waiting(lambda: conn.execute("BEGIN EXCLUSIVE")))
        except sqlite3.Error as err:
            self._writer.close()
            raise self._open_failure(err) from err
        except BaseException:
            self._writer.close()
            raise
        self.fts_enabled = fts_enabled and not self.fts_problem and migration.has_fts(self._writer)
        self._identity.remember()  # the file SQLite created (or opened)
        if self.fts_problem:
            log.warning("full-text search is unavailable with this SQLite %s (%s): keyword search uses LIKE "
                        "substring matching; stores and recalls work. Use a Python whose SQLite has FTS5 with "
                        "the trigram tokenizer (SQLite >= 3.34) to restore it", self.sqlite_version,
                        self.fts_problem)
        install_vocab(self._writer, self.fts_enabled)

    def _init_read_only(self, fts_enabled: bool) -> None:
        if self.memory or not os.path.isfile(self.path):
            raise StorageError(f"{self.path}: no such database file")
        try:
            self._writer = self._connect()
            self.fts_enabled = fts_enabled and migration.has_fts(self._writer)
        except sqlite3.Error as err:
            if getattr(self, "_writer", None) is not None:
                self._writer.close()
            raise self._open_failure(err) from err
        try:
            install_vocab(self._writer, self.fts_enabled)
        except sqlite3.Error as err:  # keyword search still works without the pruning tables
            log.warning("%s: FTS vocabulary tables unavailable: %s", self.path, err)
        self._writer.execute("PRAGMA query_only=1")

    def _open_failure(self, err: sqlite3.Error) -> StorageError:
        failure = self.conditions.translate(err, logged=False)  # the caller reports it (one line)
        return failure if isinstance(failure, StorageError) else StorageError(f"{self.path}: {err}")

    def _waiting(self, statement: Callable[[], object]) -> None:
        """Run `statement`, retrying while another process holds the lock (it is migrating
        the file), for up to MIGRATION_WAIT_S; each try waits the busy timeout."""
        deadline = time.monotonic() + MIGRATION_WAIT_S
        told = False
        while True:
            try:
                statement()
                return
            except sqlite3.OperationalError as err:
                condition = condition_of(err)
                if condition is None or condition.kind != "busy" or time.monotonic() > deadline:
                    raise
                if not told:
                    log.info("%s: waiting for another process to finish upgrading the database", self.path)
                    told = True
                time.sleep(0.05)  # SQLite may refuse at once (no busy wait) to avoid a deadlock

    @contextmanager
    def _named(self) -> Iterator[None]:
        """Raise an environmental SQLite failure as the StorageUnavailable naming it."""
        try:
            yield
        except sqlite3.Error as err:
            failure = self.conditions.translate(err)
            if failure is err:
                raise
            raise failure from err

    def _connect(self, mode: str | None = None) -> sqlite3.Connection:
        """A connection with the busy timeout; `mode` ("ro" / "rw") opens an existing file only
        (https://www.sqlite.org/uri.html), default: read-write-create ("ro" for a read-only Database)."""
        mode = mode or ("ro" if self.read_only else None)
        target, uri = self.path, False
        if mode is not None and not self.memory:
            target, uri = f"{Path(self.path).resolve().as_uri()}?mode={mode}", True
        timeout = self.busy_timeout_ms
        conn = text_columns.prepare(sqlite3.connect(target, isolation_level=None, check_same_thread=False,
                                                    timeout=timeout / 1000, uri=uri, factory=CountingConnection))
        conn.execute(f"PRAGMA busy_timeout={timeout}")
        return conn

    @cached_property
    def resident_fts(self) -> ResidentFts | None:
        """The memories' FTS indexes held in memory (storage/resident_fts.py); a file only."""
        held = {m.TABLE: m.build for m in (resident_words, resident_trigrams)} if self.fts_enabled else {}
        return ResidentFts(self, held) if held and not self.memory else None

    def _session(self, conn: sqlite3.Connection) -> Session:
        return Session(conn, self.fts_enabled, self.resident_fts)

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One IMMEDIATE write transaction; commit on success, roll back on any exception.
        Callbacks registered with `session.after(fn)` run after COMMIT, in commit order.

        Raises StorageError on a read-only Database; StorageUnavailable (nothing written)
        when the lock is not granted within the busy timeout (DatabaseBusy) or the file
        cannot take the write (disk full, I/O, …)."""
        if self.read_only:
            raise StorageError(f"{self.path} is open read-only; nothing can be written")
        with self._ordered(self._transaction) as session:
            yield session

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with self._lock, self._named():
            conn = self._writer
            session = self._session(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield session
                self._identity.check()
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    @property
    def parallel_reads(self) -> bool:
        """Whether a recall may read on a second thread's connection at the same time (a
        file; ":memory:" reads share the write connection under one lock)."""
        return not self.memory

    def reader(self) -> sqlite3.Connection:
        """The calling thread's read connection (autocommit; never holds a transaction)."""
        if self.memory:
            return self._writer
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect("ro" if self.read_only else "rw")  # never create a file where the database was
            install_vocab(conn, self.fts_enabled)
            conn.execute("PRAGMA query_only=1")
            self._local.conn = conn
            with self._lock:
                self._close_orphans()
                self._readers.append((threading.current_thread(), conn))
        return conn

    def _close_orphans(self) -> None:
        """Close the readers of ended threads (idle workers are replaced; caller holds `_lock`)."""
        live = []
        for thread, conn in self._readers:
            if thread.is_alive():
                live.append((thread, conn))
            else:
                conn.close()
        self._readers = live

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reading; ":memory:" reads are serialised with writes. Raises
        StorageUnavailable for an environmental failure (e.g. a corrupt page)."""
        with self._named():
            if self.memory:
                with self._lock:
                    yield self._session(self._writer)
            else:
                self._identity.check()
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

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """One read transaction on a private connection: every query sees the same
        committed state (an export's header counts and body agree) while writers go on."""
        if self.memory:
            with self._lock:
                yield self._session(self._writer)
            return
        self._identity.check()
        conn = self._connect("ro" if self.read_only else "rw")
        try:
            conn.execute("PRAGMA query_only=1")
            conn.execute("BEGIN")
            yield self._session(conn)
        finally:
            conn.close()  # ends the read transaction

    def wal_bytes(self) -> int:
        """Size of the `-wal` file (0 for ":memory:" or when there is none)."""
        try:
            return 0 if self.memory else os.path.getsize(self.path + "-wal")
        except OSError:
            return 0

    def checkpoint(self, wait_ms: int = 200) -> bool:
        """Copy the WAL into the database and truncate it (`PRAGMA wal_checkpoint(TRUNCATE)`,
        https://www.sqlite.org/pragma.html#pragma_wal_checkpoint), waiting at most `wait_ms`
        for readers that still use it. A long bulk write calls this between its chunks: with
        recalls reading all the time, the automatic (passive) checkpoint can never rewind the
        WAL and it grows by the size of everything written (750 MB for a 100k-row import).
        True when the WAL was emptied; never raises for a busy database."""
        if self.memory:
            return True
        with self._lock:
            self._writer.execute(f"PRAGMA busy_timeout={int(wait_ms)}")
            try:
                busy = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except sqlite3.OperationalError as err:
                log.info("WAL checkpoint skipped: %s", err)
                return False
            finally:
                self._writer.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
        return busy == 0

    def data_version(self, wait: bool = True) -> int | None:
        """PRAGMA data_version of the write connection: changes only when ANOTHER connection (another
        process, or a reader) committed since the last call. With `wait=False`, None instead of waiting while
        this process holds the write lock (a long import writes chunk after chunk): no other connection can
        commit meanwhile, so the caller looks again later."""
        stamp = self.change_stamp(wait)
        return None if stamp is None else stamp[1]

    def change_stamp(self, wait: bool = True) -> tuple[int, int] | None:
        """Changes by this process's writer and by any other connection; equal stamps mean
        the file's rows are unchanged (used to cache derived counts). With `wait=False`,
        None while this process is writing (the rows are changing: nothing to cache) — past
        STAMP_WAIT_S, which another thread's stamp read fits in."""
        if not self._lock.acquire(timeout=-1 if wait else STAMP_WAIT_S):
            return None
        try:
            with self._named():
                return self._writer.total_changes, self._writer.execute("PRAGMA data_version").fetchone()[0]
        finally:
            self._lock.release()

    def changes_since(self, version: int) -> list[Change] | None:
        """Which rows others changed after `version`: SQLite says only THAT they did — None (reload)."""
        return None

    def describe(self) -> dict:
        """Where the data lives, for `stats`: the file, its size with the WAL, WAL in use."""
        path = ":memory:" if self.memory else os.path.realpath(self.path)
        files = [p for p in (path, f"{path}-wal") if not self.memory and os.path.exists(p)]
        return {"backend": "sqlite", "path": path, "size_bytes": sum(os.path.getsize(p) for p in files),
                "wal": len(files) > 1}

    def close(self) -> None:
        """Close every connection. Safe to call twice."""
        building = self.resident_fts.close() if self.resident_fts is not None else None
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for thread, conn in self._readers:
                if thread is not building:  # a build still reading keeps its connection until it ends
                    conn.close()
            self._writer.close()


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back what is open. SQLite may already have rolled back by itself (after a full
    disk or an I/O error), so a missing transaction is not an error."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as err:
        log.warning("rollback failed: %s", err)
