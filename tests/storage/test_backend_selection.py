"""Choosing the backend: SQLite unless CPERSONA_DB_URL names PostgreSQL; clear errors for an
unsupported URL, a missing driver and bad pool sizes. No server needed."""

from __future__ import annotations

import sys

import pytest
from cpersona.config import Settings
from cpersona.errors import ConfigError
from cpersona.storage.backend import is_postgres, open_database, open_url
from cpersona.storage.db import Database


def test_without_a_url_the_sqlite_file_is_used(tmp_path):
    db, damage = open_database(Settings.from_env({"CPERSONA_DB_PATH": str(tmp_path / "m.db")}))
    try:
        assert damage == ""
        assert isinstance(db, Database) and db.describe()["backend"] == "sqlite"
        assert (tmp_path / "m.db").exists() and db.shared_by_nodes is False
    finally:
        db.close()


def test_url_forms():
    assert is_postgres("postgresql://u@h/db") and is_postgres(" POSTGRES://h/db")
    assert not is_postgres("sqlite:///x.db") and not is_postgres("data/x.db")
    with pytest.raises(ConfigError, match="CPERSONA_DB_URL=mysql://"):
        open_url("mysql://user@host/db")


def test_sqlite_url_opens_the_file(tmp_path):
    db = open_url(f"sqlite:///{tmp_path / 'u.db'}")
    try:
        assert db.describe()["path"].endswith("u.db")
    finally:
        db.close()


def test_missing_driver_is_one_clear_line(monkeypatch):
    for name in [m for m in sys.modules if m == "psycopg" or m.startswith(("psycopg.", "cpersona.storage.postgres"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg → ImportError
    with pytest.raises(ConfigError, match=r"pip install 'cpersona-memory\[postgres\]'"):
        open_database(Settings.from_env({"CPERSONA_DB_URL": "postgresql://nobody@nowhere/db"}))


def test_settings_declare_the_url_and_pool_size():
    s = Settings.from_env({"CPERSONA_DB_URL": "postgresql://u@h/db", "CPERSONA_DB_POOL_SIZE": "4"})
    assert (s.db_url, s.db_pool_size) == ("postgresql://u@h/db", 4)
    with pytest.raises(ConfigError, match="CPERSONA_DB_POOL_SIZE"):
        Settings.from_env({"CPERSONA_DB_POOL_SIZE": "1"})


def test_passwords_never_shown():
    pytest.importorskip("psycopg")
    from cpersona.storage.postgres.url import display_url

    assert display_url("postgresql://me:s3cret@db.internal:5433/mem?sslmode=require") == \
        "postgresql://me:***@db.internal:5433/mem?sslmode=require"
    assert display_url("postgresql://me@/mem?host=/run/pg") == "postgresql://me@/mem?host=/run/pg"
    assert display_url("postgresql:///mem?host=/run/pg&password=x&sslmode=require") == \
        "postgresql:///mem?host=/run/pg&password=***&sslmode=require"


def test_unreachable_server_is_a_storage_error():
    pytest.importorskip("psycopg")
    from cpersona.errors import StorageError

    with pytest.raises(StorageError, match="nowhere"):
        open_url("postgresql://nobody@/db?host=/nonexistent/nowhere&connect_timeout=2")
