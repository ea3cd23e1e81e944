"""Dashboard listings: list_memories / list_episodes, newest first, no scoring.

agent_id None or '' lists every agent (a deliberate cross-agent scan); project_id follows
the read rule of the isolation axes (None = no filter, '' = global, 'X' = X ∪ global).
Responses spend a character budget (newest rows whole); rows past it become previews with
a `ref` for get_contents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cpersona.policy import validate
from cpersona.service.base import ServiceBase
from cpersona.storage import Session
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


def _tidy_memory(row: dict[str, Any]) -> None:
    row["source"] = loads_or_empty(row["source"])
    row["locked"] = bool(row["locked"])


def _tidy_episode(row: dict[str, Any]) -> None:
    row["resolved"] = bool(row["resolved"])


@dataclass(frozen=True)
class Listing:
    """One listing tool: its answer key, limit, budget and how its rows are read."""

    key: str
    maximum: int
    budget: int
    fields: tuple[str, ...]
    ref_kind: str
    rows: Callable[[Session, Scope, int], list[dict[str, Any]]]
    tidy: Callable[[dict[str, Any]], None]


MEMORIES = Listing("memories", MAX_LIST_MEMORIES, MEMORIES_BUDGET, ("content",), "mem",
                   lambda s, scope, n: s.memories.listing(scope, n), _tidy_memory)
EPISODES = Listing("episodes", MAX_LIST_EPISODES, EPISODES_BUDGET, ("summary", "keywords"), "ep",
                   lambda s, scope, n: s.episodes.listing(scope, n), _tidy_episode)


class ListingService(ServiceBase):
    """The listing tools; mixed into `Engine`."""

    def list_memories(self, agent_id: str | None = None, limit: int = 100, project_id: str | None = None) -> dict:
        """`{memories: [{id, agent_id, project_id, content, source, timestamp, created_at,
        locked, channel}], count, budget_chars?}`, newest first; limit 1..500
        (InvalidArgument otherwise)."""
        return self._list(MEMORIES, agent_id, limit, project_id)

    def list_episodes(self, agent_id: str | None = None, limit: int = 50, project_id: str | None = None) -> dict:
        """`{episodes: [{id, agent_id, project_id, summary, keywords, start_time, end_time,
        resolved, channel, created_at}], count, budget_chars?}`, newest first; limit 1..200."""
        return self._list(EPISODES, agent_id, limit, project_id)

    def _list(self, kind: Listing, agent_id: str | None, limit: int, project_id: str | None) -> dict:
        def run(project: str | None) -> dict[str, Any]:
            validate.limit("limit", limit, maximum=kind.maximum)
            validate.identifier("agent_id", agent_id, allow_none=True)
            validate.identifier("project_id", project, allow_none=True)
            with self.db.read() as s:
                rows = kind.rows(s, Scope(agent_id or None, project, None), limit)
            for row in rows:
                kind.tidy(row)
            out: dict[str, Any] = {kind.key: rows, "count": len(rows)}
            if apply_budget(rows, kind.fields, kind.budget, self.settings.recall_preview_chars, kind.ref_kind):
                out["budget_chars"] = kind.budget
            return out

        return self.gated(f"list_{kind.key}", agent_id, project_id, False, run)
