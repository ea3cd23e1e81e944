"""Editing, protecting and deleting stored rows (spec tools.md §14, §18–§22).

Every function runs on a connection inside the caller's write transaction (`Database.write()`,
BEGIN IMMEDIATE). The ownership and lock conditions are part of the changing statement
itself (`... WHERE id = ? AND locked = 0 AND agent_id = ?`), so no interleaving — another
thread, another process on the same file — can delete a locked row or another agent's row.
Only when the statement changed nothing is the reason looked up, in the same transaction,
to answer precisely (not found / locked / not owned).

A refusal raises `Refused`; the caller's transaction then rolls back (nothing was written).
`agent_id=None` means "no ownership check" (the tools' optional agent_id omitted or '').
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from cpersona.core import validate
from cpersona.core.errors import InvalidArgument


class Refused(Exception):
    """The row cannot be changed (absent, locked, another agent's, content collision).
    `str(err)` is the human-readable reason returned as `{ok: false, error}`."""


@dataclass(frozen=True)
class RowRef:
    """Where a changed row lives (for the resident vector index and the task queue)."""

    agent_id: str
    project_id: str
    channel: str
    created_at: str


#: SQLite's largest INTEGER PRIMARY KEY.
MAX_ROW_ID = 2**63 - 1


def row_id(argument: str, value: object) -> int:
    """A positive integer row id (booleans are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an integer, got {type(value).__name__}")
    if not 1 <= value <= MAX_ROW_ID:
        raise InvalidArgument(argument, f"must be an id between 1 and {MAX_ROW_ID}, got {value}")
    return value


def owner_filter(agent_id: object) -> str | None:
    """The optional ownership check: None or '' → no check; otherwise the agent id."""
    agent = validate.identifier("agent_id", agent_id, allow_none=True)
    return agent or None


def _memory(conn: sqlite3.Connection, memory_id: int) -> tuple | None:
    return conn.execute(
        "SELECT agent_id, project_id, channel, created_at, locked FROM memories WHERE id = ?", (memory_id,)
    ).fetchone()


def _why_memory(conn: sqlite3.Connection, memory_id: int, agent_id: str | None, *, lock_matters: bool) -> Refused:
    """Explain why a guarded statement on memory `memory_id` changed nothing."""
    row = _memory(conn, memory_id)
    if row is None:
        return Refused(f"memory {memory_id} not found")
    if lock_matters and row[4]:
        return Refused(f"memory {memory_id} is locked; call unlock_memory first")
    if agent_id is not None and row[0] != agent_id:
        return Refused(f"memory {memory_id} is not owned by agent {agent_id!r}")
    return Refused(f"memory {memory_id} was not changed")  # unreachable inside one transaction


def check_memory_writable(conn: sqlite3.Connection, memory_id: int, agent_id: str | None) -> None:
    """Raise Refused when update/delete would be refused now (a cheap early answer before
    embedding; the authoritative check is the guarded statement)."""
    row = _memory(conn, memory_id)
    if row is None or row[4] or (agent_id is not None and row[0] != agent_id):
        raise _why_memory(conn, memory_id, agent_id, lock_matters=True)


def update_memory(
    conn: sqlite3.Connection, memory_id: int, agent_id: str | None, content: str, blob: bytes | None
) -> RowRef:
    """Replace the content (and its vector; None = NULL until the queue embeds it).

    msg_id, timestamp, source, channel and project are kept; FTS follows by trigger.
    Raises Refused: not found / locked / not owned / another memory of the same agent,
    project and channel already has this exact content (the dedup unique index).
    """
    row = _memory(conn, memory_id)
    if row is not None:
        clash = conn.execute(
            "SELECT id FROM memories WHERE agent_id = ? AND project_id = ? AND channel = ? AND content = ? AND id <> ? "
            "LIMIT 1",
            (row[0], row[1], row[2], content, memory_id),
        ).fetchone()
        if clash and not row[4] and (agent_id is None or row[0] == agent_id):
            raise Refused(
                f"memory {clash[0]} of the same agent, project and channel already has exactly this content; "
                f"delete memory {memory_id} instead of updating it"
            )
    try:
        cur = conn.execute(
            "UPDATE memories SET content = ?, embedding = ? WHERE id = ? AND locked = 0 AND (? IS NULL OR agent_id = ?)",
            (content, blob, memory_id, agent_id, agent_id),
        )
    except sqlite3.IntegrityError as err:  # backstop; the probe above answers first
        raise Refused(f"memory {memory_id}: the new content collides with another memory ({err})") from None
    if cur.rowcount == 0:
        raise _why_memory(conn, memory_id, agent_id, lock_matters=True)
    return RowRef(row[0], row[1], row[2], row[3])


def delete_memory(conn: sqlite3.Connection, memory_id: int, agent_id: str | None) -> RowRef:
    """Delete an unlocked memory (of `agent_id` when given). Raises Refused otherwise."""
    row = _memory(conn, memory_id)
    cur = conn.execute(
        "DELETE FROM memories WHERE id = ? AND locked = 0 AND (? IS NULL OR agent_id = ?)",
        (memory_id, agent_id, agent_id),
    )
    if cur.rowcount == 0:
        raise _why_memory(conn, memory_id, agent_id, lock_matters=True)
    return RowRef(row[0], row[1], row[2], row[3])


def set_locked(conn: sqlite3.Connection, memory_id: int, agent_id: str | None, locked: bool) -> None:
    """Lock (protect from update/delete/repairs) or unlock; idempotent. Not a ranking boost."""
    cur = conn.execute(
        "UPDATE memories SET locked = ? WHERE id = ? AND (? IS NULL OR agent_id = ?)",
        (int(locked), memory_id, agent_id, agent_id),
    )
    if cur.rowcount == 0:
        raise _why_memory(conn, memory_id, agent_id, lock_matters=False)


def delete_episode(conn: sqlite3.Connection, episode_id: int, agent_id: str | None) -> str:
    """Delete an episode (of `agent_id` when given); returns its owner. Episodes have no lock."""
    row = conn.execute("SELECT agent_id FROM episodes WHERE id = ?", (episode_id,)).fetchone()
    cur = conn.execute(
        "DELETE FROM episodes WHERE id = ? AND (? IS NULL OR agent_id = ?)", (episode_id, agent_id, agent_id)
    )
    if cur.rowcount == 0:
        if row is None:
            raise Refused(f"episode {episode_id} not found")
        raise Refused(f"episode {episode_id} is not owned by agent {agent_id!r}")
    return row[0]


def delete_agent_data(conn: sqlite3.Connection, agent_id: str) -> dict[str, int]:
    """Delete every memory (locked ones too, by design), episode, profile and queued task
    of `agent_id`; returns the count per table."""
    tables = (
        ("deleted_memories", "memories"),
        ("deleted_profiles", "profiles"),
        ("deleted_episodes", "episodes"),
        ("deleted_pending_tasks", "pending_memory_tasks"),
    )
    return {key: conn.execute(f"DELETE FROM {table} WHERE agent_id = ?", (agent_id,)).rowcount for key, table in tables}
