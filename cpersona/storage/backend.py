"""Choosing the storage backend: the ONE place that decides between the embedded SQLite
file (the default) and a shared PostgreSQL database.

`CPERSONA_DB_URL=postgresql://…` selects PostgreSQL (psycopg 3 and its pool, installed with
`pip install 'cpersona-memory[postgres]'`); without it nothing changes and `CPERSONA_DB_PATH`
names the SQLite file.
"""

from __future__ import annotations

import logging

from cpersona.config import Settings
from cpersona.errors import ConfigError, DatabaseDamaged
from cpersona.storage import ports
from cpersona.storage.db import BUSY_TIMEOUT_MS, Database

log = logging.getLogger(__name__)


def is_postgres(url: str) -> bool:
    """True when `url` names a PostgreSQL database (postgresql:// or postgres://)."""
    return url.strip().lower().startswith(("postgresql://", "postgres://"))


def open_database(settings: Settings) -> tuple[ports.Database, str]:
    """(database, damage): the configured database with the current schema applied, typed as
    the storage contract (storage/ports/) both backends implement. A SQLite file too damaged
    to migrate is opened read-only instead, so the server still starts, answers what it can
    read, and says why it writes nothing (`damage`; '' when the database is sound).

    Raises:
        ConfigError: CPERSONA_DB_URL is not a postgresql:// URL, or psycopg is not installed.
        SchemaTooNew / StorageError: as `Database` / `PgDatabase` (a damaged file that can
            still be read is served read-only instead).
    """
    url = settings.db_url.strip()
    if url:
        return open_url(url, settings.fts_enabled, settings.db_pool_size, settings.busy_timeout_ms), ""
    try:
        return Database(settings.db_path, settings.fts_enabled, settings.busy_timeout_ms), ""
    except DatabaseDamaged as err:
        # raises when nothing is readable at all
        db = Database(settings.db_path, settings.fts_enabled, settings.busy_timeout_ms, read_only=True)
        log.error("%s. Serving it READ-ONLY: nothing will be written. Keep a copy of the file (with its -wal), "
                  "then run `cpersona checkup` and restore a backup or rebuild from an export", err)
        return db, str(err)


def open_read_only(path: str, fts_enabled: bool = True) -> ports.Database:
    """An existing SQLite file opened read-only as it is: no migration, nothing created or
    changed (`cpersona checkup`). Raises StorageError when it is missing or unreadable."""
    return Database(path, fts_enabled, read_only=True)


def open_url(url: str, fts_enabled: bool = True, pool_size: int = 10,
             busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> ports.Database:
    """A database named by URL: postgresql://… → PgDatabase; sqlite:///path or a plain path → Database.
    `busy_timeout_ms` bounds how long a write waits for another writer's lock (SQLite's busy
    timeout; PostgreSQL's lock_timeout)."""
    if is_postgres(url):
        try:
            from cpersona.storage.postgres import PgDatabase
        except ImportError as err:
            raise ConfigError(f"CPERSONA_DB_URL names PostgreSQL but psycopg is not installed ({err}); "
                              "install it with: pip install 'cpersona-memory[postgres]'") from None
        return PgDatabase(url, fts_enabled, pool_size, busy_timeout_ms)
    if url.startswith("sqlite:///"):
        return Database(url.removeprefix("sqlite:///"), fts_enabled, busy_timeout_ms)
    if "://" in url:
        raise ConfigError(f"CPERSONA_DB_URL={url.split('://')[0]}://… is not supported: expected postgresql://… "
                          "(or leave it empty and set CPERSONA_DB_PATH for the SQLite file)")
    return Database(url, fts_enabled, busy_timeout_ms)
