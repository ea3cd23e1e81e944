"""Reading single values back (psycopg types `fetchone()` as optional; an aggregate or a
RETURNING row is always there)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from cpersona.errors import StorageError

Query = str | sql.Composable


def one(conn: psycopg.Connection, query: Query, params: Any = None) -> tuple:
    """The single row `query` returns (an aggregate, RETURNING); StorageError when none."""
    row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    if row is None:
        raise StorageError(f"expected one row from: {str(query)[:120]}")
    return tuple(row)


def scalar(conn: psycopg.Connection, query: Query, params: Any = None) -> Any:
    """The first column of the single row `query` returns."""
    return one(conn, query, params)[0]
