"""`PgDatabase`: the `Database` contract (storage/ports/) over a PostgreSQL server (psycopg 3 + its pool).

Same contract as the SQLite `Database` (storage/db.py):

* `write()` — one transaction (READ COMMITTED) on a pooled connection, committed on success,
  rolled back on any exception. Writes of one process are serialised by a process-wide
  lock, so callbacks registered with `Session.after(fn)` run after COMMIT and before the
  next writer of this process commits: the resident index sees this node's writes in commit
  order. Writers on OTHER nodes run concurrently; the guarded statements (ownership, lock,
  dedup unique indexes) keep their rules, as on SQLite where another process shares the file.
* `read()` — a pooled connection in autocommit mode: every statement sees a consistent
  snapshot of committed rows. A read session opened while the thread already holds one
  reuses it (recall asks for the pool count inside its read session).
* `data_version()` / `change_stamp()` / `changes_since()` — what other nodes committed,
  from the LISTEN/NOTIFY change feed (changes.py).

Every connection sets `cpersona.node` (the change feed skips this node's own notifications)
and `application_name=cpersona`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from cpersona.errors import StorageError
from cpersona.storage.chunks import ChunkedWrites
from cpersona.storage.commit_order import CommitOrdered
from cpersona.storage.db import BUSY_TIMEOUT_MS
from cpersona.storage.failures import Conditions
from cpersona.storage.ports import Change
from cpersona.storage.postgres import schema
from cpersona.storage.postgres.changes import ChangeFeed
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.postgres.session import PgSession
from cpersona.storage.postgres.url import display_url

log = logging.getLogger(__name__)

#: Seconds to wait for a free pooled connection before failing.
POOL_TIMEOUT = 30.0


class PgDatabase(CommitOrdered, ChunkedWrites):
    """A PostgreSQL database (the schema of `search_path`'s first schema) with the current
    schema applied.

    Args:
        url: libpq URL or key=value string (`postgresql://user@host/db?options=...`).
        fts_enabled: create/use the trigram indexes (CPERSONA_FTS_ENABLED).
        pool_size: most connections this process opens (readers + the writer).
        busy_timeout_ms: how long a statement waits for a row or table lock another
            transaction holds (`lock_timeout`) before the write fails as busy.

    Raises:
        SchemaTooNew: the database's schema is newer than this code (nothing written).
        StorageError: the server cannot be reached, or pg_trgm is missing and cannot be created.
    """

    #: Several nodes share this database: per-node files (the calibration sidecar) are wrong.
    shared_by_nodes = True
    backend = "postgresql"
    memory = False
    #: Recall reads on this thread's pooled connection only (a second one per recall would
    #: halve the concurrent recalls a pool serves).
    parallel_reads = False
    #: A server database is never opened read-only; its lexical index has no build problem.
    read_only = False
    fts_problem = ""
    #: No SQLite library is involved.
    sqlite_version = ""

    def __init__(self, url: str, fts_enabled: bool = True, pool_size: int = 10,
                 busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.url = url
        self.path = display_url(url)
        self.busy_timeout_ms = busy_timeout_ms
        self.conditions = Conditions(self.path, busy_timeout_ms)
        self.node = uuid.uuid4().hex
        self._init_commit_order()
        self._local = threading.local()
        self._commits = 0
        self._closed = False
        try:
            with psycopg.connect(url, autocommit=True, application_name="cpersona") as conn:
                schema.migrate(conn, self.path, fts_enabled)
                self.schema_name = scalar(conn, "SELECT current_schema()")
                self.fts_enabled = fts_enabled and schema.has_trigram_indexes(conn)
                self.vector_extension = conn.execute(
                    "SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is not None
            self.feed = ChangeFeed(url, f"cpersona.{self.schema_name}", self.node,
                                   {"application_name": "cpersona-feed"})
        except psycopg.Error as err:
            raise StorageError(f"{self.path}: {err}".strip()) from err
        self._pool = ConnectionPool(url, min_size=1, max_size=max(2, pool_size), timeout=POOL_TIMEOUT,
                                    kwargs={"autocommit": True, "application_name": "cpersona"},
                                    configure=self._configure, name="cpersona", open=False)
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT)
        except PoolTimeout as err:
            self.feed.close()
            raise StorageError(f"{self.path}: no connection within {POOL_TIMEOUT:g} s ({err})") from err

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.execute("SELECT set_config('cpersona.node', %s, false), set_config('lock_timeout', %s, false)",
                     (self.node, f"{int(self.busy_timeout_ms)}ms"))

    def _session(self, conn: psycopg.Connection) -> PgSession:
        return PgSession(conn, self.fts_enabled, self.node)

    @contextmanager
    def write(self) -> Iterator[PgSession]:
        """One write transaction; commit on success, roll back on any exception. Callbacks
        registered with `session.after(fn)` run after COMMIT, in this process's commit order."""
        with self._ordered(self._transaction) as session:
            yield session

    @contextmanager
    def _transaction(self) -> Iterator[PgSession]:
        with self._connection() as conn, self._named():
            session = self._session(conn)
            with conn.transaction():
                yield session
        self._commits += 1

    @contextmanager
    def snapshot(self) -> Iterator[PgSession]:
        """One REPEATABLE READ, READ ONLY transaction: every query sees the same committed
        state (an export's header counts and body agree) while writers go on."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield self._session(conn)

    @contextmanager
    def scratch(self) -> Iterator[PgSession]:
        """A session whose transaction is ALWAYS rolled back (for checks that write to
        find out, then undo)."""
        with self._connection() as conn:
            tx = conn.transaction(force_rollback=True)
            with tx:
                yield self._session(conn)

    def wal_bytes(self) -> int:
        """0: the server manages its own write-ahead log (no checkpoint from a client)."""
        return 0

    def checkpoint(self, wait_ms: int = 200) -> bool:
        """Nothing to do: the server checkpoints its WAL itself. Always True."""
        return True

    @contextmanager
    def read(self) -> Iterator[PgSession]:
        """A session for reading (autocommit); nested read sessions of a thread share one."""
        held = getattr(self._local, "read", None)
        if held is not None:
            yield held
            return
        with self._connection() as conn:
            self._local.read = session = self._session(conn)
            try:
                yield session
            finally:
                self._local.read = None

    @contextmanager
    def _named(self) -> Iterator[None]:
        """Raise an environmental server failure (a lock held past the busy timeout, no disk
        space, …) as the StorageUnavailable naming it; anything else as it is."""
        try:
            yield
        except psycopg.Error as err:
            failure = self.conditions.translate(err)
            if failure is err:
                raise
            raise failure from err

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as err:
            raise StorageError(f"{self.path}: no free connection within {POOL_TIMEOUT:g} s "
                               "(raise CPERSONA_DB_POOL_SIZE or the server's max_connections)") from err

    def data_version(self, wait: bool = True) -> int:
        """Changes committed by OTHER nodes (or other clients) seen so far; moves only then.
        Never waits (`wait` is accepted for the SQLite signature)."""
        return self.feed.version

    def change_stamp(self, wait: bool = True) -> tuple[int, int]:
        """(commits of this process, foreign changes seen): equal stamps mean unchanged rows."""
        return self._commits, self.feed.version

    def changes_since(self, version: int) -> list[Change] | None:
        """Rows other nodes changed after `version` (a `data_version()` value), as
        (table, ids); None when unknown (reload everything)."""
        return self.feed.since(version)

    def describe(self) -> dict[str, Any]:
        """Where the data lives, for `stats`: the URL without password, the database size."""
        with self.read() as s:
            size = scalar(s.conn, "SELECT pg_database_size(current_database())")
        return {"backend": "postgresql", "path": self.path, "schema": self.schema_name, "size_bytes": int(size),
                "wal": False, "change_feed": "connected" if self.feed.connected else
                f"disconnected ({self.feed.last_error})", "vector_extension": self.vector_extension}

    def close(self) -> None:
        """Close the pool and the change feed. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.feed.close()
        self._pool.close()
