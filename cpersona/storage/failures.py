"""SQLite failures named as what they are (result codes: https://www.sqlite.org/rescode.html).

`Conditions.translate(err)` turns an environmental `sqlite3.Error` — busy, disk full, I/O
error, read-only file, corrupt file, out of memory — into a `StorageUnavailable` that names
the condition and what fixes it; any other error (a bug, a constraint) is returned as is.

Logging is per state change, not per call: the first failure of a kind is one WARNING (an
ERROR for a damaged file; no traceback), repeats are counted silently, and the first successful write afterwards logs
one INFO "usable again" (a full disk, a read-only file or a lock held by another process
clears by itself once the cause is gone; SQLite keeps the file consistent meanwhile).
A corrupt file does not heal: it is reported once per process.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from dataclasses import dataclass

from cpersona.errors import DatabaseBusy, DatabaseDamaged, StorageUnavailable

log = logging.getLogger(__name__)

#: How long a caller should wait before retrying a call refused as busy. The busy timeout
#: has already been waited out, so the lock holder is in a long write; one second lets a
#: chunked maintenance write (storage/agents.py) hand the lock over several times.
BUSY_RETRY_AFTER_MS = 1000


@dataclass(frozen=True)
class Condition:
    """One failure kind: `kind` (the answer's error_kind), what it means and what fixes
    it (`text`, formatted with `timeout_s`), and whether retrying alone can help."""

    kind: str
    text: str
    retry_after_ms: int | None = None
    heals: bool = True


_BUSY = Condition("busy", "is busy: another connection has held its write lock for more than {timeout_s:g} s "
                          "(a long write in another process); nothing was changed, retry shortly",
                  BUSY_RETRY_AFTER_MS)
_REPAIR = ("nothing was changed. Stop every cpersona using it, keep a copy, then repair it "
           "(`sqlite3 FILE .recover`) or restore a backup")

#: Primary result code → condition. Codes not listed are not environmental (left alone).
CONDITIONS = {
    sqlite3.SQLITE_BUSY: _BUSY,
    sqlite3.SQLITE_LOCKED: _BUSY,
    sqlite3.SQLITE_FULL: Condition(
        "disk_full", "cannot grow: the disk is full or the file reached a size limit; nothing was changed. "
                     "Free disk space (or raise the limit); the next call works again"),
    sqlite3.SQLITE_IOERR: Condition(
        "io_error", "could not be read or written (I/O error: a file-size limit, a full or failing disk); "
                    "nothing was changed. Check the disk; the next call tries again"),
    sqlite3.SQLITE_READONLY: Condition(
        "read_only", "is read-only (file or folder permissions, or a read-only disk); nothing was changed. "
                     "Make the file and its folder writable"),
    sqlite3.SQLITE_CANTOPEN: Condition(
        "io_error", "cannot be opened (or its -wal / -shm file beside it cannot be created); nothing was "
                    "changed. Check the folder's permissions and free space"),
    sqlite3.SQLITE_CORRUPT: Condition("corrupt", f"is damaged; {_REPAIR}", heals=False),
    sqlite3.SQLITE_NOTADB: Condition("corrupt", "is not a SQLite database, or its header is damaged (check "
                                                f"CPERSONA_DB_PATH); {_REPAIR}", heals=False),
    sqlite3.SQLITE_NOMEM: Condition("out_of_memory", "could not be used: SQLite ran out of memory; nothing was "
                                                     "changed"),
}

#: PostgreSQL SQLSTATE → condition (https://www.postgresql.org/docs/15/errcodes-appendix.html):
#: a lock held past lock_timeout, a deadlock victim, no disk space, out of memory, an I/O
#: error, a read-only server (a standby, or default_transaction_read_only).
PG_CONDITIONS = {
    "55P03": _BUSY,
    "40P01": Condition("busy", "is busy: this write was chosen as a deadlock victim against a concurrent write "
                               "(PostgreSQL rolled it back); nothing was changed, retry shortly", BUSY_RETRY_AFTER_MS),
    "53100": CONDITIONS[sqlite3.SQLITE_FULL], "53200": CONDITIONS[sqlite3.SQLITE_NOMEM],
    "58030": CONDITIONS[sqlite3.SQLITE_IOERR], "25006": CONDITIONS[sqlite3.SQLITE_READONLY],
}

#: The file at the database path is not the file the connections have open: it was deleted
#: (SQLite goes on writing into the unlinked inode, lost at exit —
#: https://www.sqlite.org/howtocorrupt.html) or another file was moved over it. Not a result
#: code: storage/db.py compares the path's (device, inode) with the one it opened.
FILE_GONE = Condition(
    "file_gone", "was deleted or replaced by another file while the server ran; nothing was changed (a write "
                 "now would go into the deleted file and be lost). Put the file back, or restart the server "
                 "to use the file now at that path")

#: error_kind → the exception raised for it (StorageUnavailable for the others).
_RAISED: dict[str, type[StorageUnavailable]] = {"busy": DatabaseBusy, "corrupt": DatabaseDamaged}


def unavailable(message: str, condition: Condition) -> StorageUnavailable:
    """The exception naming `condition`."""
    return _RAISED.get(condition.kind, StorageUnavailable)(message, condition.kind, condition.retry_after_ms)


def _level(condition: Condition) -> int:
    """ERROR for a condition that does not heal by itself (a damaged file), else WARNING."""
    return logging.WARNING if condition.heals else logging.ERROR


def condition_of(err: BaseException) -> Condition | None:
    """The environmental condition behind `err`, or None (not a SQLite or PostgreSQL error
    naming one: a bug, or a refusal the caller handles)."""
    state = getattr(err, "sqlstate", None)  # psycopg.Error
    if isinstance(state, str):
        return PG_CONDITIONS.get(state)
    code = getattr(err, "sqlite_errorcode", None)
    if not isinstance(err, sqlite3.Error) or not isinstance(code, int):
        return None
    return CONDITIONS.get(code & 0xFF)


@dataclass
class _Active:
    condition: Condition
    detail: str
    since: float
    count: int = 1


class Conditions:
    """The failure conditions currently affecting one database; thread-safe."""

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        self.path = path
        self.timeout_s = busy_timeout_ms / 1000
        self._lock = threading.Lock()
        self._active: dict[str, _Active] = {}

    def translate(self, err: BaseException, logged: bool = True) -> BaseException:
        """`StorageUnavailable` for an environmental SQLite error (logged once per state
        change unless `logged` is False: the caller reports it), else `err` itself."""
        condition = condition_of(err)
        if condition is None:
            return err
        return self.named(condition, str(err), logged)

    def named(self, condition: Condition, detail: str, logged: bool = True) -> StorageUnavailable:
        """The `StorageUnavailable` for `condition` (cause: `detail`), logged once per state
        change unless `logged` is False."""
        message = f"database {self.path} {condition.text.format(timeout_s=self.timeout_s)} ({detail})"
        if not logged:
            return unavailable(message, condition)
        with self._lock:
            active = self._active.get(condition.kind)
            if active is None:
                self._active[condition.kind] = _Active(condition, detail, time.time())
                log.log(_level(condition), "%s", message)
            else:
                active.count += 1
        return unavailable(message, condition)

    def observe(self, kind: str, detail: str, message: str) -> bool:
        """Record a condition found outside a failing call (e.g. the start-up integrity
        check) and log `message` — unless the condition is already known, so each state
        change is logged once whoever notices it. Returns True when it was logged."""
        condition = next((c for c in (*CONDITIONS.values(), FILE_GONE) if c.kind == kind), None)
        if condition is None:
            raise ValueError(f"unknown condition kind {kind!r}")
        with self._lock:
            if kind in self._active:
                self._active[kind].count += 1
                return False
            self._active[kind] = _Active(condition, detail, time.time())
        log.log(_level(condition), "%s", message)
        return True

    def write_succeeded(self) -> None:
        """A write committed: every condition that heals by itself is over."""
        if not self._active:
            return
        with self._lock:
            for kind, active in list(self._active.items()):
                if active.condition.heals:
                    del self._active[kind]
                    log.info("database %s is usable again (%s ended after %d failed calls)",
                             self.path, kind, active.count)

    def snapshot(self) -> dict[str, dict[str, object]]:
        """The active conditions: kind → {detail, since (Unix s), failed_calls}."""
        with self._lock:
            return {k: {"detail": a.detail, "since": a.since, "failed_calls": a.count} for k, a in self._active.items()}
