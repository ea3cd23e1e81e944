"""`Session`: one connection's view of the store, as repositories bound to it.

Code above the storage layer never writes SQL: it opens a session (`Database.read()` /
`Database.write()`) and calls the repository of the table it needs, e.g.
`session.memories.insert(draft, blob)`. Each repository is created on first use.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property

from cpersona.storage.agents import AgentRepo
from cpersona.storage.associations import AssociationRepo
from cpersona.storage.bulk import BulkRepo
from cpersona.storage.commit_order import AfterCommitHooks
from cpersona.storage.dump import DumpRepo
from cpersona.storage.episodes import EpisodeRepo
from cpersona.storage.integrity import IntegrityRepo
from cpersona.storage.inventory import InventoryRepo
from cpersona.storage.journal import JournalRepo
from cpersona.storage.memories import MemoryRepo
from cpersona.storage.meta import MetaRepo
from cpersona.storage.profiles import ProfileRepo
from cpersona.storage.repairs import RepairRepo
from cpersona.storage.resident_fts import ResidentFts
from cpersona.storage.search import SearchRepo
from cpersona.storage.tasks import TaskRepo
from cpersona.storage.transfer import TransferRepo
from cpersona.storage.vectors import VectorRepo


class Session(AfterCommitHooks):
    """Repositories over one connection. Inside `Database.write()` every call belongs to
    the same transaction; `after(fn)` defers `fn` until that transaction has committed."""

    def __init__(self, conn: sqlite3.Connection, fts_enabled: bool, resident: ResidentFts | None = None) -> None:
        super().__init__()
        self.conn = conn  # for the repositories (and tests); never used above storage/
        self.fts_enabled = fts_enabled
        self.resident = resident  # FTS indexes held in memory (storage/resident_fts.py)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Statements inside either all stay, or — when the block raises — are all undone
        while the enclosing transaction goes on (https://www.sqlite.org/lang_savepoint.html)."""
        self.conn.execute("SAVEPOINT part")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK TO part")
            self.conn.execute("RELEASE part")
            raise
        self.conn.execute("RELEASE part")

    @cached_property
    def memories(self) -> MemoryRepo:
        return MemoryRepo(self.conn, word_index=self.fts_enabled)

    @cached_property
    def episodes(self) -> EpisodeRepo:
        return EpisodeRepo(self.conn)

    @cached_property
    def profiles(self) -> ProfileRepo:
        return ProfileRepo(self.conn)

    @cached_property
    def search(self) -> SearchRepo:
        return SearchRepo(self.conn, self.fts_enabled, self.resident)

    @cached_property
    def tasks(self) -> TaskRepo:
        return TaskRepo(self.conn)

    @cached_property
    def meta(self) -> MetaRepo:
        return MetaRepo(self.conn)

    @cached_property
    def vectors(self) -> VectorRepo:
        return VectorRepo(self.conn)

    @cached_property
    def agents(self) -> AgentRepo:
        return AgentRepo(self.conn)

    @cached_property
    def transfer(self) -> TransferRepo:
        return TransferRepo(self.conn)

    @cached_property
    def repairs(self) -> RepairRepo:
        return RepairRepo(self.conn, word_index=self.fts_enabled)

    @cached_property
    def integrity(self) -> IntegrityRepo:
        return IntegrityRepo(self.conn)

    @cached_property
    def inventory(self) -> InventoryRepo:
        return InventoryRepo(self.conn)

    @cached_property
    def dump(self) -> DumpRepo:
        return DumpRepo(self.conn)

    @cached_property
    def bulk(self) -> BulkRepo:
        return BulkRepo(self.conn, word_index=self.fts_enabled)

    @cached_property
    def journal(self) -> JournalRepo:
        return JournalRepo(self.conn)

    @cached_property
    def associations(self) -> AssociationRepo:
        return AssociationRepo(self.conn)
