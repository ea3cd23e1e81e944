"""The PostgreSQL backend: `PgDatabase` offers the interface of `storage.db.Database`
(read()/write() sessions with the same repositories, commit-ordered after-commit hooks, a
change stamp, close) over a psycopg 3 connection pool, for several server nodes sharing
one database. Selected by `storage.backend.open_database` when CPERSONA_DB_URL is a
postgresql:// URL; needs the optional extra `cpersona-memory[postgres]`."""

from cpersona.storage.postgres.db import PgDatabase

__all__ = ["PgDatabase"]
