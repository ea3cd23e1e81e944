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


def _json(text: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return {}


def _scope(agent_id: str | None, project_id: str | None) -> Scope:
    validate.identifier("agent_id", agent_id, allow_none=True)
    validate.identifier("project_id", project_id, allow_none=True)
    return Scope(agent_id or None, project_id, None)


def list_memories(conn: sqlite3.Connection, agent_id: str | None, limit: int, project_id: str | None) -> dict:
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
    return {"memories": memories, "count": len(memories)}


def list_episodes(conn: sqlite3.Connection, agent_id: str | None, limit: int, project_id: str | None) -> dict:
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
    return {"episodes": episodes, "count": len(episodes)}
