"""Keyset pagination, newest first: the page after the last row a caller already has.

A page is ordered by (created_at DESC, id DESC); the cursor is the (created_at, id) of the
last row listed, so the next page holds the strictly older rows — stable while rows are added
(an OFFSET would repeat or skip rows then). See "keyset pagination" / the seek method,
https://use-the-index-luke.com/no-offset.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from cpersona.storage import text_columns
from cpersona.storage.scope import Scope


def newest_first(conn: sqlite3.Connection, table: str, columns: tuple[str, ...], scope: Scope, limit: int,
                 before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
    """Up to `limit` rows of `table` inside `scope` as dicts of `columns`, newest first;
    `before` = (created_at, id) of the last row already listed (None = the first page)."""
    where, params = scope.predicate()
    args: list[Any] = list(params)
    if before is not None:
        where = f"({where}) AND (created_at < ? OR (created_at = ? AND id < ?))"
        args += [before[0], before[0], before[1]]
    rows = conn.execute(
        f"SELECT {text_columns.select_list(columns)} FROM {table} WHERE {where} "
        "ORDER BY created_at DESC, id DESC LIMIT ?",
        [*args, limit],
    ).fetchall()
    return [dict(zip(columns, r)) for r in rows]
