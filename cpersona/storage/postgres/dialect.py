"""SQLite's parameter style on a psycopg connection, so the SQLite repositories' standard
statements run on PostgreSQL unchanged.

Most statements of `storage/` are standard SQL that both engines run alike; they differ only
in the parameter marker (SQLite's qmark `?`, psycopg's `%s`). `QmarkConnection` wraps a
psycopg connection so a SQLite repository class can be reused as is: a statement has its
literal `%` doubled and each `?` outside quotes turned into `%s`, unless it holds `%s`
markers and no `?` (the PostgreSQL repositories' own statements), which pass through
untouched. The PostgreSQL repositories subclass the SQLite ones and override only what is
not portable (`INSERT OR IGNORE`, `rowid`, `PRAGMA`, `lastrowid`, SQLite's JSON functions).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import psycopg

#: A quoted string or identifier, or one `?` marker.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?|%")


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """`sql` with `?` markers as `%s` and literal `%` as `%%` (quoted text kept as written,
    apart from `%` doubling, which psycopg undoes)."""
    if "?" not in sql and "%s" in sql:  # a PostgreSQL statement already
        return sql

    def repl(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok == "?":
            return "%s"
        return tok.replace("%", "%%")

    return _TOKEN.sub(repl, sql)


class QmarkConnection:
    """A psycopg connection that also accepts SQLite's `?` markers (`execute`,
    `executemany`); every other attribute is the connection's."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Any = None) -> psycopg.Cursor:
        return self.raw.execute(translate(sql), params)

    def executemany(self, sql: str, rows: Any) -> psycopg.Cursor:
        cur = self.raw.cursor()
        cur.executemany(translate(sql), rows)
        return cur

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def qmark(conn: Any) -> Any:
    """`conn` wrapped once (typed Any: it stands in for the sqlite3.Connection the SQLite
    repositories are annotated with)."""
    return conn if isinstance(conn, QmarkConnection) else QmarkConnection(conn)
