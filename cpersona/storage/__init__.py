"""Storage: the only layer that writes SQL or touches `sqlite3`.

The layers above see it through `Database` and `Session`, the Protocols of the storage
contract (storage/ports/): a database hands out sessions, a session bundles the
repositories (one per table or concern) bound to one connection. `backend.open_database`
opens the configured store: the SQLite file (`storage.db.Database`) or a PostgreSQL
database (`storage.postgres.PgDatabase`).
"""

from cpersona.storage.ports import Database, Session

__all__ = ["Database", "Session"]
