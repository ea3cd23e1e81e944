"""Fixtures of the storage tests: `backend` runs a test on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from backends import BACKENDS, location
from cpersona.storage.backend import open_url


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """'sqlite' or 'postgresql' (skipped without CPERSONA_TEST_DB_URL)."""
    return request.param


@pytest.fixture
def where(backend, tmp_path):
    """Settings overrides placing a database on `backend` (a file, or a fresh schema)."""
    with location(backend, tmp_path) as overrides:
        yield overrides


@pytest.fixture
def db(where):
    """An open database of the current backend (closed at teardown)."""
    url = where.get("db_url") or where["db_path"]
    opened = open_url(url)
    yield opened
    opened.close()
