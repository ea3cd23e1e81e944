"""The PostgreSQL backend: the storage contract (storage/ports/) over a psycopg 3 connection
pool, for several server nodes sharing one database. Selected by
`storage.backend.open_database` when CPERSONA_DB_URL is a postgresql:// URL; needs the
optional extra `cpersona-memory[postgres]`.

A module here does what the SQLite module of the same name in storage/ does: `db.py`
(`PgDatabase`), `session.py` (`PgSession`), one module per repository (memories, episodes,
profiles, search, tasks, meta, vectors, agents, journal, dump, bulk, transfer, repairs,
integrity, inventory) and `paging.py`, `scope.py`, `word_index.py`. A repository subclasses
the SQLite one where its statements are portable (`dialect.py` runs SQLite's `?` markers on
psycopg) and overrides the rest. Different on purpose:

* `schema.py` holds the DDL and the migration (SQLite: `schema.py` + `migration.py`);
  `triggers.py` the statistics and change-feed triggers.
* PostgreSQL only: `changes.py` (the LISTEN connection that tells a node which rows other
  nodes changed), `dialect.py`, `rows.py` (reading one value back), `url.py` (a URL without
  its password), `schemas.py` (a throw-away schema per test or benchmark run).
* SQLite only: what concerns the file and FTS5 (`backup`, `file_identity`, `originals`,
  `text_columns`, `fts_*`, `resident_*`, `session_memo`).
"""

from cpersona.storage.postgres.db import PgDatabase

__all__ = ["PgDatabase"]
