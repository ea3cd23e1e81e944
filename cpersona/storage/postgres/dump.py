"""Whole-table reads on PostgreSQL: `storage/dump.py`'s statements (portable), with the
columns of a table read from the catalog of the current schema instead of SQLite's PRAGMA."""

from __future__ import annotations

import psycopg

from cpersona.storage.dump import DumpRepo
from cpersona.storage.postgres.dialect import qmark


class PgDumpRepo(DumpRepo):
    """Whole-table reads over one connection (use `PgDatabase.snapshot()` for a consistent export)."""

    LOCK = " FOR UPDATE"  # READ COMMITTED: the row lock keeps a concurrent update out until commit

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))

    def _read(self, name: str) -> str:
        return name  # PostgreSQL keeps text columns text (and valid UTF-8)

    def _cols(self, table: str) -> set[str]:
        if table not in self._columns:
            rows = self.conn.execute("SELECT column_name FROM information_schema.columns "
                                     "WHERE table_schema = current_schema() AND table_name = %s", (table,))
            self._columns[table] = {r[0] for r in rows}
        return self._columns[table]
