"""Throw-away stores in one database: a fresh schema per test or benchmark run (every
table, lock and notification channel of a store is per schema), dropped afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from cpersona.storage.postgres.url import with_search_path


@contextmanager
def fresh_schema(url: str, prefix: str = "cpersona") -> Iterator[str]:
    """Create `<prefix>_<random>` on the server of `url` (pg_trgm installed in `public`
    first, so dropping the schema never drops the extension); yield a URL whose connections
    use it; drop it with everything in it afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield with_search_path(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
