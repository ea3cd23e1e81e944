"""Keyset pagination, newest first, on PostgreSQL (the contract of storage/paging.py)."""

from __future__ import annotations

from typing import Any

import psycopg

from cpersona.storage.postgres.scope import predicate
from cpersona.storage.scope import Scope


def newest_first(conn: psycopg.Connection, table: str, columns: tuple[str, ...], scope: Scope, limit: int,
                 before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
    """Up to `limit` rows of `table` inside `scope` as dicts of `columns`, newest first;
    `before` = (created_at, id) of the last row already listed (None = the first page)."""
    where, params = predicate(scope)
    if before is not None:
        where = f"({where}) AND (created_at, id) < (%s, %s)"
        params += [before[0], before[1]]
    rows = conn.execute(
        f"SELECT {', '.join(columns)} FROM {table} WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %s",
        [*params, limit]).fetchall()
    return [dict(zip(columns, r)) for r in rows]
