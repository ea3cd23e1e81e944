"""The storage contract: what the layers above may use of a store, as Protocols.

A `Database` hands out a `Session` per read, write or snapshot; a session exposes one
repository per table or concern, each typed by its own Protocol (content.py: memories,
episodes, profiles, search; upkeep.py: tasks, meta, vectors, agents; portability.py:
journal, dump, bulk, transfer; checks.py: repairs, integrity, inventory; graph.py: the declared
associations). Two backends
implement them: SQLite (`storage.db.Database`, `storage.session.Session` and the
repositories of storage/) and PostgreSQL (`PgDatabase`, `PgSession` and storage/postgres/);
mypy checks both against these Protocols (storage/conformance.py). Only what code above
storage/ calls is here; how each backend does it is said where it is done.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from cpersona.storage.failures import Conditions
from cpersona.storage.ports.checks import Integrity, Inventory, Repairs
from cpersona.storage.ports.content import Episodes, Memories, Profiles, Search
from cpersona.storage.ports.graph import Associations
from cpersona.storage.ports.portability import Bulk, Dump, Journal, Transfer
from cpersona.storage.ports.upkeep import Agents, Meta, Tasks, Vectors

__all__ = ["Agents", "Associations", "Bulk", "Change", "Database", "Dump", "Episodes", "Integrity", "Inventory",
           "Journal", "Memories", "Meta", "Profiles", "Repairs", "Search", "Session", "Tasks", "Transfer", "Vectors"]

#: Rows another node changed: (table, ids), or None when that cannot be known (reload all).
Change = tuple[str, list[int]] | None


class Session(Protocol):
    """One connection's view of the store. Inside `Database.write()` every call belongs to
    one transaction."""

    def after(self, change: Callable[[], None]) -> None:
        """Run `change` after COMMIT, before this process's next writer commits (never on rollback)."""

    def savepoint(self) -> AbstractContextManager[None]:
        """Statements inside all stay, or — when the block raises — are all undone while the
        enclosing transaction goes on."""

    @property
    def memories(self) -> Memories: ...
    @property
    def episodes(self) -> Episodes: ...
    @property
    def profiles(self) -> Profiles: ...
    @property
    def search(self) -> Search: ...
    @property
    def tasks(self) -> Tasks: ...
    @property
    def meta(self) -> Meta: ...
    @property
    def vectors(self) -> Vectors: ...
    @property
    def agents(self) -> Agents: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def dump(self) -> Dump: ...
    @property
    def bulk(self) -> Bulk: ...
    @property
    def transfer(self) -> Transfer: ...
    @property
    def repairs(self) -> Repairs: ...
    @property
    def integrity(self) -> Integrity: ...
    @property
    def inventory(self) -> Inventory: ...
    @property
    def associations(self) -> Associations: ...


class Database(Protocol):
    """A store with the current schema applied: its sessions, its change stamp, its state.

    `read()`, `write()`, `snapshot()` and `scratch()` raise StorageUnavailable for an
    environmental failure (busy past the busy timeout, disk full, …) and StorageError when
    the store cannot do it at all (a write on a read-only file)."""

    #: "sqlite" or "postgresql".
    backend: str
    #: The file, or the URL without its password.
    path: str
    #: A SQLite ":memory:" database (nothing outlives the process).
    memory: bool
    #: Opened read-only: `write()` raises StorageError.
    read_only: bool
    #: The lexical indexes are maintained and searched.
    fts_enabled: bool
    #: Why the lexical indexes are off although enabled ('' when usable or disabled).
    fts_problem: str
    #: The SQLite library's version ('' on PostgreSQL), named with `fts_problem`.
    sqlite_version: str
    #: Several server nodes share the store (per-node files beside it would be wrong).
    shared_by_nodes: bool
    #: The failure conditions currently affecting the store (storage/failures.py).
    conditions: Conditions

    @property
    def parallel_reads(self) -> bool:
        """A recall may read on a second thread's connection at the same time."""

    def read(self) -> AbstractContextManager[Session]:
        """A session for reading (each statement sees committed rows)."""

    def write(self) -> AbstractContextManager[Session]:
        """One write transaction: committed on success, rolled back on any exception; then
        the callbacks of `session.after`, in commit order."""

    def snapshot(self) -> AbstractContextManager[Session]:
        """One read transaction: every query sees the same committed state."""

    def scratch(self) -> AbstractContextManager[Session]:
        """A transaction that is always rolled back (checks that write to find out)."""

    def write_in_chunks(self, step: Callable[[Session, int], bool]) -> int:
        """Run `step(session, size)` in successive short write transactions until it returns
        True; how many it took (storage/chunks.py)."""

    def commits_settled(self) -> AbstractContextManager[None]:
        """Hold this process's writers off: inside, every committed write has run its callbacks."""

    def change_stamp(self, wait: bool = True) -> tuple[int, int] | None:
        """Equal stamps mean unchanged rows; with `wait=False`, None while this process writes
        (SQLite: the rows are changing)."""

    def data_version(self, wait: bool = True) -> int | None:
        """Moves when another connection or node committed; with `wait=False`, None while this
        process writes (SQLite: no other connection can commit meanwhile)."""

    def changes_since(self, version: int) -> list[Change] | None:
        """What others changed after `data_version()` was `version`; None when unknown (reload)."""

    def wal_bytes(self) -> int:
        """Size of SQLite's write-ahead log (0 when none)."""

    def checkpoint(self, wait_ms: int = 200) -> bool:
        """Empty SQLite's write-ahead log, waiting at most `wait_ms` for readers; True when done."""

    def describe(self) -> dict[str, Any]:
        """Where the data lives, for `stats`: {backend, path, size_bytes, wal, …}."""

    def close(self) -> None:
        """Close every connection. Safe to call twice."""
