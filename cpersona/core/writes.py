"""The write path of `store` and `archive_episode` (spec tools.md §5, §11).

`prepare_*` validate and sanitise (raising InvalidArgument before anything is written);
`find_duplicate` runs the γ-visible dedup probes of spec isolation.md §3; `insert_*` write
one row on a connection inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from cpersona.core import validate
from cpersona.core.errors import InvalidArgument
from cpersona.core.text import normalize_source, sanitize
from cpersona.core.timeutil import utc_now_iso


@dataclass(frozen=True)
class MemoryDraft:
    agent_id: str
    project_id: str
    channel: str
    msg_id: str
    content: str
    source: str
    timestamp: str
    metadata: str


@dataclass(frozen=True)
class EpisodeDraft:
    agent_id: str
    project_id: str
    channel: str
    summary: str
    keywords: str
    start_time: str | None
    end_time: str | None
    resolved: bool


def _clean_text(argument: str, raw: Any, cap: int) -> str:
    """Sanitise and require non-empty text of at most `cap` chars (after marker removal).

    Text far beyond the cap is refused before the marker regex runs on it."""
    validate.text(argument, raw, max_chars=len(raw) if isinstance(raw, str) else 0)
    too_long = f"the limit is {cap} characters (CPERSONA_MAX_CONTENT_LENGTH); split it into several memories"
    if len(raw) > 2 * cap + 4096:
        raise InvalidArgument(argument, f"is {len(raw)} characters; {too_long}")
    if not raw.strip():
        raise InvalidArgument(argument, "must not be empty")
    clean, _ = sanitize(raw, len(raw))
    if not clean:
        raise InvalidArgument(argument, "is empty after removing [Memory from …] markers")
    if len(clean) > cap:
        raise InvalidArgument(argument, f"is {len(clean)} characters; {too_long}")
    return clean


def prepare_memory(
    agent_id: Any,
    content: Any,
    *,
    msg_id: Any = "",
    source: Any = None,
    timestamp: Any = None,
    metadata: Any = None,
    channel: Any = "",
    project_id: Any = "",
    max_content: int = 16000,
    max_metadata: int = 8000,
) -> MemoryDraft:
    """Validate one memory. Raises InvalidArgument naming the offending argument."""
    return MemoryDraft(
        agent_id=validate.identifier("agent_id", agent_id),
        project_id=validate.identifier("project_id", project_id if project_id is not None else ""),
        channel=validate.identifier("channel", channel if channel is not None else ""),
        msg_id=validate.identifier("message.id", msg_id if msg_id is not None else ""),
        content=_clean_text("message.content", content, max_content),
        source=validate.json_object("message.source", normalize_source(source), max_chars=max_metadata),
        timestamp=utc_now_iso() if timestamp in (None, "") else validate.timestamp("message.timestamp", timestamp),
        metadata=validate.json_object("message.metadata", metadata, max_chars=max_metadata),
    )


def _history_times(history: Any) -> tuple[str | None, str | None]:
    if history is None:
        return None, None
    if not isinstance(history, list):
        raise InvalidArgument("history", f"must be a list of objects, got {type(history).__name__}")
    stamps = []
    for i, item in enumerate(history):
        if not isinstance(item, dict):
            raise InvalidArgument(f"history[{i}]", "must be an object")
        if item.get("timestamp") not in (None, ""):
            stamps.append(validate.timestamp(f"history[{i}].timestamp", item["timestamp"]))
    return (min(stamps), max(stamps)) if stamps else (None, None)


def prepare_episode(
    agent_id: Any,
    summary: Any,
    *,
    keywords: Any = "",
    history: Any = None,
    resolved: Any = False,
    channel: Any = "",
    project_id: Any = "",
    max_content: int = 16000,
) -> EpisodeDraft:
    """Validate one episode. The summary is computed by the caller (the server never
    summarises). Raises InvalidArgument naming the offending argument."""
    if not isinstance(resolved, bool):
        raise InvalidArgument("resolved", "must be true or false")
    keywords = "" if keywords is None else keywords
    validate.text("keywords", keywords, max_chars=max_content)
    start, end = _history_times(history)
    return EpisodeDraft(
        agent_id=validate.identifier("agent_id", agent_id),
        project_id=validate.identifier("project_id", project_id if project_id is not None else ""),
        channel=validate.identifier("channel", channel if channel is not None else ""),
        summary=_clean_text("summary", summary, max_content),
        keywords=sanitize(keywords, max_content)[0],
        start_time=start,
        end_time=end,
        resolved=resolved,
    )


def find_duplicate(conn: sqlite3.Connection, d: MemoryDraft) -> tuple[str, int] | None:
    """(reason, existing id) when the memory is already visible to its own scope.

    msg_id: same agent, project ∈ {P, ''}, any channel. content: same agent,
    project ∈ {P, ''}, channel ∈ {C, ''}. A global write never collides with a bucket copy.
    """
    projects = (d.project_id, "")
    channels = (d.channel, "")
    if d.msg_id:
        row = conn.execute(
            "SELECT id FROM memories WHERE agent_id = ? AND project_id IN (?, ?) AND msg_id = ? ORDER BY id LIMIT 1",
            (d.agent_id, *projects, d.msg_id),
        ).fetchone()
        if row:
            return "duplicate msg_id", row[0]
    row = conn.execute(
        "SELECT id FROM memories WHERE agent_id = ? AND project_id IN (?, ?) AND channel IN (?, ?) AND content = ? "
        "ORDER BY id LIMIT 1",
        (d.agent_id, *projects, *channels, d.content),
    ).fetchone()
    return ("duplicate content", row[0]) if row else None


def insert_memory(conn: sqlite3.Connection, d: MemoryDraft, blob: bytes | None) -> tuple[int, str] | None:
    """INSERT OR IGNORE; (id, created_at) or None when a unique index refused the row."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO memories (agent_id, project_id, msg_id, content, source, timestamp, metadata, "
        "embedding, channel) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (d.agent_id, d.project_id, d.msg_id, d.content, d.source, d.timestamp, d.metadata, blob, d.channel),
    )
    if cur.rowcount == 0:
        return None
    row_id = cur.lastrowid
    return row_id, conn.execute("SELECT created_at FROM memories WHERE id = ?", (row_id,)).fetchone()[0]


def insert_episode(conn: sqlite3.Connection, d: EpisodeDraft, blob: bytes | None) -> tuple[int, str]:
    """Plain INSERT (episodes have no dedup); returns (id, created_at)."""
    cur = conn.execute(
        "INSERT INTO episodes (agent_id, project_id, summary, keywords, embedding, start_time, end_time, resolved, "
        "channel) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (d.agent_id, d.project_id, d.summary, d.keywords, blob, d.start_time, d.end_time, int(d.resolved), d.channel),
    )
    row_id = cur.lastrowid
    return row_id, conn.execute("SELECT created_at FROM episodes WHERE id = ?", (row_id,)).fetchone()[0]
