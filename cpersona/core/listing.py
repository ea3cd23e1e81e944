"""Dashboard listings (spec tools.md §12–§13): newest first, no scoring.

agent_id None or '' lists every agent (a deliberate cross-agent scan); project_id follows
the read rule of spec isolation.md (None = no filter, '' = global, 'X' = X ∪ global).
"""

from __future__ import annotations

import json
import sqlite3

from cpersona.core import validate
from cpersona.core.isolation import Scope

MAX_LIST_MEMORIES = 500
MAX_LIST_EPISODES = 200
#: Response budgets in characters of text (spec tools.md §12–§13).
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


def _json(text: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return {}


def _scope(agent_id: str | None, project_id: str | None) -> Scope:
    validate.identifier("agent_id", agent_id, allow_none=True)
    validate.identifier("project_id", project_id, allow_none=True)
    return Scope(agent_id or None, project_id, None)


def list_memories(conn: sqlite3.Connection, agent_id: str | None, limit: int, project_id: str | None,
                  preview: int = 500) -> dict:
    """`{memories: [{id, agent_id, project_id, content, source, timestamp, created_at,
    locked, channel}], count}`; limit 1..500 (InvalidArgument otherwise)."""
    validate.limit("limit", limit, maximum=MAX_LIST_MEMORIES)
    where, params = _scope(agent_id, project_id).predicate()
    rows = conn.execute(
        "SELECT id, agent_id, project_id, content, source, timestamp, created_at, locked, channel FROM memories "
        f"WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    keys = ("id", "agent_id", "project_id", "content", "source", "timestamp", "created_at", "locked", "channel")
    memories = [dict(zip(keys, r)) for r in rows]
    for m in memories:
        m["source"] = _json(m["source"])
        m["locked"] = bool(m["locked"])
    out = {"memories": memories, "count": len(memories)}
    if apply_budget(memories, ("content",), MEMORIES_BUDGET, preview, "mem"):
        out["budget_chars"] = MEMORIES_BUDGET
    return out


def list_episodes(conn: sqlite3.Connection, agent_id: str | None, limit: int, project_id: str | None,
                  preview: int = 500) -> dict:
    """`{episodes: [{id, agent_id, project_id, summary, keywords, start_time, end_time,
    resolved, channel, created_at}], count}`; limit 1..200."""
    validate.limit("limit", limit, maximum=MAX_LIST_EPISODES)
    where, params = _scope(agent_id, project_id).predicate()
    keys = ("id", "agent_id", "project_id", "summary", "keywords", "start_time", "end_time", "resolved", "channel",
            "created_at")
    rows = conn.execute(
        f"SELECT {', '.join(keys)} FROM episodes WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    episodes = [dict(zip(keys, r)) for r in rows]
    for e in episodes:
        e["resolved"] = bool(e["resolved"])
    out = {"episodes": episodes, "count": len(episodes)}
    if apply_budget(episodes, ("summary", "keywords"), EPISODES_BUDGET, preview, "ep"):
        out["budget_chars"] = EPISODES_BUDGET
    return out
