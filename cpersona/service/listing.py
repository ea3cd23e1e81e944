"""Dashboard listings: list_memories / list_episodes, newest first, no scoring.

agent_id None or '' lists every agent (a deliberate cross-agent scan); project_id follows
the read rule of the isolation axes (None = no filter, '' = global, 'X' = X ∪ global).
`limit` is clamped to 0..500 (memories) / 0..200 (episodes), as the original CPersona
clamps it. An answer fits a host's tool-output cap: rows are added whole while the answer
stays within CPERSONA_LIST_BUDGET_TOKENS (estimated as UTF-8 bytes / 3 — ASCII text runs
about 4 bytes per token and CJK about 3, so the estimate errs high); the rest of the
listing is one call away with `cursor = next_cursor`. The first row always comes back: a
row too long for the whole budget comes back as a preview with a `ref` for get_contents.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cpersona.config import Settings
from cpersona.errors import InvalidArgument
from cpersona.policy import validate
from cpersona.service.outcomes import Report
from cpersona.service.steps import Steps
from cpersona.storage import Database, Session
from cpersona.storage.scope import Scope
from cpersona.util.jsonutil import loads_or_empty

MAX_LIST_MEMORIES = 500
MAX_LIST_EPISODES = 200
#: Estimated tokens per UTF-8 byte of answer (the conservative end: CJK text).
BYTES_PER_TOKEN = 3
#: Bytes of the answer besides its rows (keys, count, cursor, note).
ENVELOPE_BYTES = 400
_CURSOR_SEP = "|"


def _tidy_memory(row: dict[str, Any]) -> None:
    row["source"] = loads_or_empty(row["source"])
    row["locked"] = bool(row["locked"])


def _tidy_episode(row: dict[str, Any]) -> None:
    row["resolved"] = bool(row["resolved"])


@dataclass(frozen=True)
class Listing:
    """One listing tool: its answer key, limit, long-text fields, ref kind and row reader."""

    key: str
    maximum: int
    fields: tuple[str, ...]
    ref_kind: str
    rows: Callable[[Session, Scope, int, tuple[str, int] | None], list[dict[str, Any]]]
    tidy: Callable[[dict[str, Any]], None]


MEMORIES = Listing("memories", MAX_LIST_MEMORIES, ("content",), "mem",
                   lambda s, scope, n, before: s.memories.listing(scope, n, before), _tidy_memory)
EPISODES = Listing("episodes", MAX_LIST_EPISODES, ("summary", "keywords"), "ep",
                   lambda s, scope, n, before: s.episodes.listing(scope, n, before), _tidy_episode)


def row_bytes(row: dict[str, Any]) -> int:
    """UTF-8 size of a row as the answer serialises it (plus its separator)."""
    return len(json.dumps(row, ensure_ascii=False).encode("utf-8")) + 2


def preview_row(row: dict[str, Any], kind: Listing, chars: int) -> dict[str, Any]:
    """`row` with each long text field cut to `chars` (`<field>_truncated`, `<field>_len`) and
    a `ref` for get_contents; unchanged when `chars` is 0 or nothing is longer."""
    out = dict(row)
    for f in kind.fields:
        if chars > 0 and len(out[f]) > chars:
            out[f + "_len"], out[f], out[f + "_truncated"] = len(out[f]), out[f][:chars], True
            out["ref"] = f"{kind.ref_kind}:{row['id']}"
    return out


def fit_budget(rows: list[dict[str, Any]], kind: Listing, budget_bytes: int, preview: int) -> list[dict[str, Any]]:
    """The longest prefix of `rows` whose serialised size fits `budget_bytes`; the first row
    always (as a preview when it alone is too large)."""
    page: list[dict[str, Any]] = []
    spent = ENVELOPE_BYTES
    for row in rows:
        size = row_bytes(row)
        if not page and spent + size > budget_bytes:
            row = preview_row(row, kind, preview)
            size = row_bytes(row)
        elif spent + size > budget_bytes:
            break
        page.append(row)
        spent += size
    return page


def cursor_of(row: dict[str, Any]) -> str:
    """The cursor that continues a listing after `row`."""
    return f"{row['created_at']}{_CURSOR_SEP}{row['id']}"


def parse_cursor(cursor: object) -> tuple[str, int] | None:
    """(created_at, id) of a `next_cursor`; None for ''. Raises InvalidArgument otherwise."""
    if cursor is None or cursor == "":
        return None
    rule = "must be the next_cursor of an earlier answer of this tool (or '' for the first page)"
    if not isinstance(cursor, str) or len(cursor) > 128:
        raise InvalidArgument("cursor", rule)
    created, sep, row_id = cursor.rpartition(_CURSOR_SEP)
    if not sep or not created or not (row_id.isascii() and row_id.isdigit()):
        raise InvalidArgument("cursor", rule)
    return created, int(row_id)


@dataclass(frozen=True, eq=False)
class ListingService:
    """The listing tools over the database (`steps`: the operating context's project rules)."""

    settings: Settings
    db: Database
    steps: Steps

    def list_memories(self, agent_id: str | None = None, limit: int = 100, project_id: str | None = None,
                      cursor: str = "") -> Report:
        """`{memories: [{id, agent_id, project_id, content, source, timestamp, created_at,
        locked, channel}], count, next_cursor?, budget_rows?, budget_tokens?}`, newest first;
        limit clamped to 0..500; `cursor` = a next_cursor to continue. InvalidArgument for a
        non-integer limit or a malformed cursor."""
        return self._list(MEMORIES, agent_id, limit, project_id, cursor)

    def list_episodes(self, agent_id: str | None = None, limit: int = 50, project_id: str | None = None,
                      cursor: str = "") -> Report:
        """`{episodes: [{id, agent_id, project_id, summary, keywords, start_time, end_time,
        resolved, channel, created_at}], count, next_cursor?, budget_rows?, budget_tokens?}`,
        newest first; limit clamped to 0..200."""
        return self._list(EPISODES, agent_id, limit, project_id, cursor)

    def _list(self, kind: Listing, agent_id: str | None, limit: int, project_id: str | None, cursor: str) -> Report:
        def run(project: object) -> Report:
            applied = validate.clamped_limit("limit", limit, maximum=kind.maximum)
            validate.identifier("agent_id", agent_id, allow_none=True)
            project_filter = validate.identifier("project_id", project, allow_none=True)
            before = parse_cursor(cursor)
            rows: list[dict[str, Any]] = []
            if applied:
                with self.db.read() as s:
                    rows = kind.rows(s, Scope(agent_id or None, project_filter, None), applied + 1, before)
            more, rows = len(rows) > applied, rows[:applied]
            for row in rows:
                kind.tidy(row)
            budget = self.settings.list_budget_tokens
            page = fit_budget(rows, kind, budget * BYTES_PER_TOKEN, self.settings.recall_preview_chars)
            out: dict[str, Any] = {kind.key: page, "count": len(page)}
            cut = len(page) < len(rows)
            if page and (more or cut):
                out["next_cursor"] = cursor_of(page[-1])
            if more and limit > kind.maximum:
                out["budget_rows"] = kind.maximum
            if cut:
                out["budget_tokens"] = budget
            if "next_cursor" in out:
                out["note"] = "more rows: call again with cursor=next_cursor"
            return out

        return self.steps.gated(f"list_{kind.key}", agent_id, project_id, False, run)
