"""Validating what is about to be written: `prepare_memory` and `prepare_episode` check
every argument (raising `InvalidArgument` naming it, before anything is written) and return
the draft the storage layer inserts.
"""

from __future__ import annotations

from typing import Any

from cpersona.errors import InvalidArgument
from cpersona.policy import validate
from cpersona.storage.records import EpisodeDraft, MemoryDraft
from cpersona.util.text import normalize_source, sanitize
from cpersona.util.time import utc_now_iso
from cpersona.util.words import visible


def clean_text(argument: str, raw: Any, cap: int) -> str:
    """Sanitise and require non-empty text of at most `cap` chars (after marker removal).

    Text far beyond the cap is refused before the marker regex runs on it."""
    validate.text(argument, raw, max_chars=len(raw) if isinstance(raw, str) else 0)
    too_long = f"the limit is {cap} characters (CPERSONA_MAX_CONTENT_LENGTH); split it into several memories"
    if len(raw) > 2 * cap + 4096:
        raise InvalidArgument(argument, f"is {len(raw)} characters; {too_long}")
    if not raw.strip():
        raise InvalidArgument(argument, "must not be empty")
    if not visible(raw):
        raise InvalidArgument(argument, "must not be empty: it holds only invisible format characters "
                                        "(zero-width spaces, joiners, byte-order marks)")
    clean, _ = sanitize(raw, len(raw))
    if not visible(clean):
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
        content=clean_text("message.content", content, max_content),
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
        summary=clean_text("summary", summary, max_content),
        keywords=sanitize(keywords, max_content)[0],
        start_time=start,
        end_time=end,
        resolved=resolved,
    )
