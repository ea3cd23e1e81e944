"""`PgSession`: one PostgreSQL connection's view of the store, with the same repositories
(and attribute names) as `storage.session.Session`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property

import psycopg

from cpersona.storage.commit_order import AfterCommitHooks
from cpersona.storage.postgres.agents import PgAgentRepo
from cpersona.storage.postgres.associations import PgAssociationRepo
from cpersona.storage.postgres.bulk import PgBulkRepo
from cpersona.storage.postgres.dump import PgDumpRepo
from cpersona.storage.postgres.episodes import PgEpisodeRepo
from cpersona.storage.postgres.integrity import PgIntegrityRepo
from cpersona.storage.postgres.inventory import PgInventoryRepo
from cpersona.storage.postgres.journal import PgJournalRepo
from cpersona.storage.postgres.memories import PgMemoryRepo
from cpersona.storage.postgres.meta import PgMetaRepo
from cpersona.storage.postgres.profiles import PgProfileRepo
from cpersona.storage.postgres.repairs import PgRepairRepo
from cpersona.storage.postgres.search import PgSearchRepo
from cpersona.storage.postgres.tasks import PgTaskRepo
from cpersona.storage.postgres.transfer import PgTransferRepo
from cpersona.storage.postgres.vectors import PgVectorRepo


class PgSession(AfterCommitHooks):
    """Repositories over one connection. Inside `PgDatabase.write()` every call belongs to
    the same transaction; `after(fn)` defers `fn` until that transaction has committed."""

    def __init__(self, conn: psycopg.Connection, fts_enabled: bool, node: str) -> None:
        super().__init__()
        self.conn = conn  # for the repositories (and tests); never used above storage/
        self.fts_enabled = fts_enabled
        self.node = node

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: an exception inside rolls back only what it did (and is re-raised)."""
        with self.conn.transaction():
            yield

    @cached_property
    def memories(self) -> PgMemoryRepo:
        return PgMemoryRepo(self.conn)

    @cached_property
    def episodes(self) -> PgEpisodeRepo:
        return PgEpisodeRepo(self.conn)

    @cached_property
    def profiles(self) -> PgProfileRepo:
        return PgProfileRepo(self.conn)

    @cached_property
    def search(self) -> PgSearchRepo:
        return PgSearchRepo(self.conn, self.fts_enabled)

    @cached_property
    def tasks(self) -> PgTaskRepo:
        return PgTaskRepo(self.conn, self.node)

    @cached_property
    def meta(self) -> PgMetaRepo:
        return PgMetaRepo(self.conn)

    @cached_property
    def vectors(self) -> PgVectorRepo:
        return PgVectorRepo(self.conn)

    @cached_property
    def agents(self) -> PgAgentRepo:
        return PgAgentRepo(self.conn)

    @cached_property
    def transfer(self) -> PgTransferRepo:
        return PgTransferRepo(self.conn)

    @cached_property
    def journal(self) -> PgJournalRepo:
        return PgJournalRepo(self.conn)

    @cached_property
    def dump(self) -> PgDumpRepo:
        return PgDumpRepo(self.conn)

    @cached_property
    def bulk(self) -> PgBulkRepo:
        return PgBulkRepo(self.conn)

    @cached_property
    def repairs(self) -> PgRepairRepo:
        return PgRepairRepo(self.conn)

    @cached_property
    def integrity(self) -> PgIntegrityRepo:
        return PgIntegrityRepo(self.conn)

    @cached_property
    def inventory(self) -> PgInventoryRepo:
        return PgInventoryRepo(self.conn)

    @cached_property
    def associations(self) -> PgAssociationRepo:
        return PgAssociationRepo(self.conn)
