"""Choosing the storage backend: the ONE place that decides between the embedded SQLite
file (the default) and a shared PostgreSQL database.

`CPERSONA_DB_URL=postgresql://…` selects PostgreSQL (psycopg 3 and its pool, installed with
`pip install 'cpersona[postgres]'`); without it nothing changes and `CPERSONA_DB_PATH`
names the SQLite file.
"""

from __future__ import annotations

from cpersona.config import Settings
from cpersona.errors import ConfigError
from cpersona.storage.db import Database


def is_postgres(url: str) -> bool:
    """True when `url` names a PostgreSQL database (postgresql:// or postgres://)."""
    return url.strip().lower().startswith(("postgresql://", "postgres://"))


def open_database(settings: Settings) -> Database:
    """The configured database with the current schema applied. A `PgDatabase` offers the
    same interface as `Database` (structurally), so it is typed as one for the layers above.

    Raises:
        ConfigError: CPERSONA_DB_URL is not a postgresql:// URL, or psycopg is not installed.
        SchemaTooNew / StorageError: as `Database` / `PgDatabase`.
    """
    url = settings.db_url.strip()
    if not url:
        return Database(settings.db_path, settings.fts_enabled)
    return open_url(url, settings.fts_enabled, settings.db_pool_size)


def open_url(url: str, fts_enabled: bool = True, pool_size: int = 10) -> Database:
    """A database named by URL: postgresql://… → PgDatabase; sqlite:///path or a plain path → Database."""
    if is_postgres(url):
        try:
            from cpersona.storage.postgres import PgDatabase
        except ImportError as err:
            raise ConfigError(f"CPERSONA_DB_URL names PostgreSQL but psycopg is not installed ({err}); "
                              "install it with: pip install 'cpersona[postgres]'") from None
        return PgDatabase(url, fts_enabled, pool_size)  # type: ignore[return-value]
    if url.startswith("sqlite:///"):
        return Database(url.removeprefix("sqlite:///"), fts_enabled)
    if "://" in url:
        raise ConfigError(f"CPERSONA_DB_URL={url.split('://')[0]}://… is not supported: expected postgresql://… "
                          "(or leave it empty and set CPERSONA_DB_PATH for the SQLite file)")
    return Database(url, fts_enabled)
