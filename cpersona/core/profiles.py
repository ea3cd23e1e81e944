"""Profiles: accumulated attributes of an agent's user or project (seed §3つの記憶タイプ;
spec tools.md §9–§10, retrieval.md §2.5).

The server never synthesises a profile: `update_profile` stores the caller's text
(markers stripped, cut to CPERSONA_MAX_PROFILE_LENGTH). The agent profile is the row
(agent_id, user_id ''); profiles are scoped by agent only (no project/channel).

Recall injection: up to `MAX_INJECTED` profile rows `[Profile] <text>` are added to the
candidates — only when the gate's pool (memories + episodes in the recall's scope) holds at
least `PROFILE_MIN_POOL` rows. They carry no score and no ref, so with confidence scoring
off they sort after every scored row and are the first to be cut by `limit`.
"""

from __future__ import annotations

import sqlite3

from cpersona.core.retrieval.candidate import PROFILE, Candidate
from cpersona.core.text import sanitize
from cpersona.core.timeutil import utc_now_iso

MAX_INJECTED = 3
PROFILE_MIN_POOL = 50
PROFILE_PREFIX = "[Profile] "
PROFILE_SOURCE = {"System": "profile"}


def get(conn: sqlite3.Connection, agent_id: str) -> str:
    """The agent's profile text ('' when none)."""
    row = conn.execute("SELECT content FROM profiles WHERE agent_id = ? AND user_id = ''", (agent_id,)).fetchone()
    return row[0] if row else ""


def prepare(text: str, cap: int) -> tuple[str, bool]:
    """Sanitised profile text and whether it was cut to `cap`."""
    return sanitize(text, cap)


def upsert(conn: sqlite3.Connection, agent_id: str, text: str) -> None:
    """Replace the agent profile (inside a write transaction)."""
    conn.execute(
        "INSERT INTO profiles(agent_id, project_id, user_id, content, updated_at) VALUES (?, '', '', ?, ?) "
        "ON CONFLICT(agent_id, user_id) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at",
        (agent_id, text, utc_now_iso()),
    )


def injection(conn: sqlite3.Connection, agent_id: str) -> list[Candidate]:
    """Profile candidates of `agent_id` (newest first, at most MAX_INJECTED); ids -1, -2, …
    keep their identities distinct (they have no row id a caller could use)."""
    rows = conn.execute(
        "SELECT content FROM profiles WHERE agent_id = ? AND user_id = '' ORDER BY updated_at DESC LIMIT ?",
        (agent_id, MAX_INJECTED),
    ).fetchall()
    return [Candidate(PROFILE, -(i + 1), PROFILE_PREFIX + r[0], source=dict(PROFILE_SOURCE)) for i, r in enumerate(rows)]
