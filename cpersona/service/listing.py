"""Dashboard listings: list_memories / list_episodes, newest first, no scoring.

agent_id None or '' lists every agent (a deliberate cross-agent scan); project_id follows
the read rule of the isolation axes (None = no filter, '' = global, 'X' = X ∪ global).
Responses spend a character budget (newest rows whole); rows past it become previews with
a `ref` for get_contents.
"""

from __future__ import annotations

from typing import Any, Callable

from cpersona.config import Settings
from cpersona.policy import validate
from cpersona.storage import Database
from cpersona.storage.scope import Scope
from cpersona.util.jsonutil import loads_or_empty

MAX_LIST_MEMORIES = 500
MAX_LIST_EPISODES = 200
#: Response budgets in characters of text.
MEMORIES_BUDGET = 1_000_000
EPISODES_BUDGET = 800_000


def apply_budget(rows: list[dict], fields: tuple[str, ...], budget: int, preview: int, ref_kind: str) -> bool:
    """Spend `budget` characters of `fields` front to back (newest rows first); the first
    row is always whole. Once the budget is crossed, every later field longer than
    `preview` becomes its prefix with `<field>_truncated` / `<field>_len`, and the row gets a
    `ref` for get_contents. Returns True when any row was cut. `preview` 0 disables it."""
    if preview <= 0:
        return False
    spent, cut = 0, False
    for i, row in enumerate(rows):
        size = sum(len(row[f]) for f in fields)
        if i > 0 and spent + size > budget:
            for f in fields:
                if len(row[f]) > preview:
                    row[f + "_len"], row[f], row[f + "_truncated"] = len(row[f]), row[f][:preview], True
                    row["ref"], cut = f"{ref_kind}:{row['id']}", True
        spent += sum(len(row[f]) for f in fields)
    return cut


def _scope(agent_id: str | None, project_id: str | None) -> Scope:
    validate.identifier("agent_id", agent_id, allow_none=True)
    validate.identifier("project_id", project_id, allow_none=True)
    return Scope(agent_id or None, project_id, None)


class ListingService:
    """The listing tools; mixed into `Engine`, which provides the attributes below."""

    settings: Settings
    db: Database
    gated: Callable[..., Any]

    def list_memories(self, agent_id: str | None = None, limit: int = 100, project_id: str | None = None) -> dict:
        """`{memories: [{id, agent_id, project_id, content, source, timestamp, created_at,
        locked, channel}], count, budget_chars?}`, newest first; limit 1..500
        (InvalidArgument otherwise)."""
        return self.gated("list_memories", agent_id, project_id, False,  # type: ignore[no-any-return]
                          lambda project: self._list_memories(agent_id, limit, project))

    def _list_memories(self, agent_id: str | None, limit: int, project_id: str | None) -> dict:
        validate.limit("limit", limit, maximum=MAX_LIST_MEMORIES)
        scope = _scope(agent_id, project_id)
        with self.db.read() as s:
            memories = s.memories.listing(scope, limit)
        for m in memories:
            m["source"] = loads_or_empty(m["source"])
            m["locked"] = bool(m["locked"])
        out: dict[str, Any] = {"memories": memories, "count": len(memories)}
        if apply_budget(memories, ("content",), MEMORIES_BUDGET, self.settings.recall_preview_chars, "mem"):
            out["budget_chars"] = MEMORIES_BUDGET
        return out

    def list_episodes(self, agent_id: str | None = None, limit: int = 50, project_id: str | None = None) -> dict:
        """`{episodes: [{id, agent_id, project_id, summary, keywords, start_time, end_time,
        resolved, channel, created_at}], count, budget_chars?}`, newest first; limit 1..200."""
        return self.gated("list_episodes", agent_id, project_id, False,  # type: ignore[no-any-return]
                          lambda project: self._list_episodes(agent_id, limit, project))

    def _list_episodes(self, agent_id: str | None, limit: int, project_id: str | None) -> dict:
        validate.limit("limit", limit, maximum=MAX_LIST_EPISODES)
        scope = _scope(agent_id, project_id)
        with self.db.read() as s:
            episodes = s.episodes.listing(scope, limit)
        for e in episodes:
            e["resolved"] = bool(e["resolved"])
        out: dict[str, Any] = {"episodes": episodes, "count": len(episodes)}
        if apply_budget(episodes, ("summary", "keywords"), EPISODES_BUDGET, self.settings.recall_preview_chars, "ep"):
            out["budget_chars"] = EPISODES_BUDGET
        return out
