"""The isolation predicate of `storage.scope.Scope` in PostgreSQL's parameter style, and the
source-id filter. The rule itself is written once, in `Scope.predicate`."""

from __future__ import annotations

from typing import Any

from cpersona.storage.scope import Scope


def predicate(scope: Scope, alias: str = "") -> tuple[str, list[Any]]:
    """SQL boolean expression (`%s` placeholders) and its parameters; "1 = 1" when no axis filters."""
    where, params = scope.predicate(alias)
    return where.replace("?", "%s"), list(params)


def like_escape(text: str) -> str:
    """`text` with LIKE's wildcards and the escape character escaped (ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def row_filter(scope: Scope, source_id: str = "", alias: str = "m") -> tuple[str, list[Any]]:
    """WHERE clause of the memories a recall may see: the scope, and the prefix match of
    `source.id` (ASCII case-insensitive like SQLite's LIKE; rows whose source is not a JSON
    object never match)."""
    where, params = predicate(scope, alias)
    if source_id:
        col = f"{alias}." if alias else ""
        where += (f" AND cpersona_ascii_lower(cpersona_source_id({col}source)) "
                  "LIKE cpersona_ascii_lower(%s) ESCAPE '\\'")
        params.append(like_escape(source_id) + "%")
    return where, params
