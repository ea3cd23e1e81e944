"""Both storage backends for the tests: the SQLite file (always) and PostgreSQL when
CPERSONA_TEST_DB_URL names a server (`.ci/postgres.sh start` prints one). Without it, when a
PostgreSQL server is installed on this machine (/usr/lib/postgresql/*/bin/initdb) and psycopg
is importable, the run starts a throw-away cluster itself (`.ci/postgres.sh start`) and removes
it at the end, so plain `pytest` tests both backends; CPERSONA_TEST_START_PG=0 turns that off.

Each PostgreSQL test gets its own schema (`search_path=<schema>,public`; pg_trgm lives in
public), dropped at teardown, so tests never see each other's rows, locks or notifications.
"""

from __future__ import annotations

import glob
import os
import sqlite3
import subprocess
import sys
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


# ------------------------------------------------------- engines on both backends
#: Test files whose engines run on both backends: `pytestmark = pytest.mark.both_backends`
#: (or the mark on one test). `make_engine` (and every fixture built on it) then gives each
#: test a SQLite file and, with a server, a fresh PostgreSQL schema per engine name.
MARK = "both_backends"
#: Engine "files" that live on PostgreSQL: str(tmp_path / name) → schema URL (db_rows reads it).
PG_FILES: dict[str, str] = {}


SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "postgres.sh"
_STARTED: list[str] = []


def _start_cluster() -> None:
    """Start a throw-away cluster for this run when none is named and one can be (module doc)."""
    if os.environ.get(URL_ENV, "").strip() or os.environ.get("CPERSONA_TEST_START_PG", "1") == "0":
        return
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb") or not SCRIPT.exists():
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return
    proc = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 or not proc.stdout.strip():
        print(f"tests: could not start a PostgreSQL cluster, its tests skip: {proc.stderr.strip()}", file=sys.stderr)
        return
    os.environ[URL_ENV] = proc.stdout.strip().splitlines()[-1]
    _STARTED.append(os.environ[URL_ENV])


def pytest_unconfigure(config) -> None:
    for url in _STARTED:
        subprocess.run(["bash", str(SCRIPT), "stop", url], capture_output=True, timeout=120)
        os.environ.pop(URL_ENV, None)
    _STARTED.clear()


def pytest_configure(config) -> None:
    _start_cluster()
    config.addinivalue_line("markers", f"{MARK}: run the test's engines on SQLite and on PostgreSQL")
    config.addinivalue_line("markers", "sqlite_only(reason): reads or writes the SQLite file itself")


def pytest_generate_tests(metafunc) -> None:
    if metafunc.definition.get_closest_marker(MARK) and "engine_backend" in metafunc.fixturenames:
        metafunc.parametrize("engine_backend", BACKENDS, indirect=True)


def pytest_collection_modifyitems(items) -> None:
    """A test marked sqlite_only in a both-backends file runs on SQLite only."""
    for item in items:
        if item.get_closest_marker("sqlite_only") and "[postgresql" in item.nodeid:
            reason = item.get_closest_marker("sqlite_only").args
            item.add_marker(pytest.mark.skip(reason=f"SQLite only: {reason[0] if reason else ''}"))


@pytest.fixture
def engine_backend(request) -> str:
    """The backend of `make_engine`'s engines: 'sqlite', or 'postgresql' in a test marked
    both_backends (skipped without CPERSONA_TEST_DB_URL)."""
    name = getattr(request, "param", "sqlite")
    if name == "postgresql":
        pg_url()
    return name


class EnginePlaces:
    """Where `make_engine(name)` puts engine `name`: the file tmp_path/name, or (PostgreSQL)
    one fresh schema per name, the same schema when a name is opened again."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend, self.tmp_path = backend, tmp_path
        self._schemas: dict[str, tuple[str, object]] = {}

    def overrides(self, name: str) -> dict[str, str]:
        path = str(self.tmp_path / name)
        if self.backend == "sqlite":
            return {"db_path": path}
        if name not in self._schemas:
            ctx = pg_schema()
            from cpersona.storage.postgres.url import display_url

            url = ctx.__enter__()
            self._schemas[name] = (url, ctx)
            PG_FILES[path] = PG_FILES[display_url(url)] = url  # the file name, and the engine's `db.path`
        return {"db_path": path, "db_url": self._schemas[name][0]}

    def close(self) -> None:
        from cpersona.storage.postgres.url import display_url

        for name, (url, ctx) in self._schemas.items():
            PG_FILES.pop(str(self.tmp_path / name), None)
            PG_FILES.pop(display_url(url), None)
            ctx.__exit__(None, None, None)  # type: ignore[attr-defined]


def pg_rows(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    """One read query on a PostgreSQL store, written with SQLite's `?` markers."""
    import psycopg
    from cpersona.storage.postgres.dialect import translate

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(translate(sql), params)
        return [tuple(r) for r in cur] if cur.description else []


def store_of(path: str | Path):
    """The store behind an engine file name of a test (its PostgreSQL schema in a
    both-backends test), opened as a Database; close it after use."""
    from cpersona.storage.backend import open_url

    return open_url(PG_FILES.get(str(path), str(path)))


def db_write(path: str | Path, sql: str, params: tuple = ()) -> int:
    """One write statement (SQLite `?` markers) on the store behind `path`, as another
    program would run it; returns the rows changed."""
    if str(path) in PG_FILES:
        import psycopg
        from cpersona.storage.postgres.dialect import translate

        with psycopg.connect(PG_FILES[str(path)], autocommit=True) as conn:
            return conn.execute(translate(sql), params).rowcount
    conn = sqlite3.connect(str(path))
    try:
        with conn:
            return conn.execute(sql, params).rowcount
    finally:
        conn.close()
