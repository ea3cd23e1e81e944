"""Both storage backends for the tests: the SQLite file (always) and PostgreSQL when
CPERSONA_TEST_DB_URL names a server (`.ci/postgres.sh start` prints one).

Each PostgreSQL test gets its own schema (`search_path=<schema>,public`; pg_trgm lives in
public), dropped at teardown, so tests never see each other's rows, locks or notifications.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

URL_ENV = "CPERSONA_TEST_DB_URL"
BACKENDS = ("sqlite", "postgresql")
SKIP_REASON = f"no PostgreSQL server: set {URL_ENV} (`.ci/postgres.sh start` prints one)"


def pg_url() -> str:
    """The configured server URL, or skip the test with the reason."""
    url = os.environ.get(URL_ENV, "").strip()
    if not url:
        pytest.skip(SKIP_REASON)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install -e '.[postgres]'")
    return url


@contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh schema on the test server; yields a URL that uses it; dropped afterwards."""
    from cpersona.storage.postgres.schemas import fresh_schema

    with fresh_schema(pg_url(), "t") as url:
        yield url


@contextmanager
def location(backend: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Settings overrides that put an Engine on `backend`: {db_path} or {db_url}."""
    if backend == "sqlite":
        yield {"db_path": str(tmp_path / "x.db")}
        return
    with pg_schema() as url:
        yield {"db_url": url}


# ------------------------------------------------------------------ fixtures
@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """'sqlite' or 'postgresql' (skipped without CPERSONA_TEST_DB_URL): a test using it runs
    on both backends."""
    return request.param


@pytest.fixture
def where(backend, tmp_path):
    """Settings overrides placing a database on `backend` (a file, or a fresh schema)."""
    with location(backend, tmp_path) as overrides:
        yield overrides


@pytest.fixture
def db(where):
    """An open database of the current backend (closed at teardown)."""
    from cpersona.storage.backend import open_url

    opened = open_url(where.get("db_url") or where["db_path"])
    yield opened
    opened.close()
