"""Validating what is about to be written: `prepare_memory` and `prepare_episode` check
every argument (raising `InvalidArgument` naming it, before anything is written) and return
the draft the storage layer inserts, with the texts that were cut to their cap.

Text longer than its cap (CPERSONA_MAX_CONTENT_LENGTH) is cut, not refused, as the
original CPersona does; the caller reports every cut (`truncated: true` and the original
length) so nothing is lost silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cpersona.errors import InvalidArgument
from cpersona.policy import validate
from cpersona.storage.records import EpisodeDraft, MemoryDraft
from cpersona.util.text import normalize_source, sanitize
from cpersona.util.time import parse_ts, utc_now_iso
from cpersona.util.words import visible


@dataclass(frozen=True)
class Cut:
    """A text cut to its cap: which argument, its length as sent, and the cap (characters)."""

    argument: str
    original_length: int
    cap: int


#: Characters past the cap still scanned for `[Memory from …]` markers before the cut
#: (markers are removed first, so text a little over the cap may fit after removing them).
_SCAN_SLACK = 4096


def clean_text(argument: str, raw: Any, cap: int) -> tuple[str, Cut | None]:
    """Sanitise (marker removal, strip) and require non-empty text; text longer than `cap`
    characters is cut to `cap`. Returns (text, the Cut or None).

    Only the first 2·cap + 4096 characters are scanned, so a huge text costs no more than
    that (the marker regex would otherwise rescan it for every unclosed marker)."""
    validate.text(argument, raw, max_chars=len(raw) if isinstance(raw, str) else 0)
    if not raw.strip():
        raise InvalidArgument(argument, "must not be empty")
    if not visible(raw[: 2 * cap + _SCAN_SLACK]):
        raise InvalidArgument(argument, "must not be empty: it holds only invisible format characters "
                                        "(zero-width spaces, joiners, byte-order marks)")
    clean, cut = _sanitized(argument, raw, cap)
    if not visible(clean):
        raise InvalidArgument(argument, "is empty after removing [Memory from …] markers")
    return clean, cut


def _sanitized(argument: str, raw: str, cap: int) -> tuple[str, Cut | None]:
    """`sanitize` over the scanned window of `raw`, cut to `cap`; the Cut when text was dropped."""
    window = 2 * cap + _SCAN_SLACK
    clean, cut = sanitize(raw[:window], cap)
    return clean, Cut(argument, len(raw), cap) if cut or len(raw) > window else None


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
) -> tuple[MemoryDraft, list[Cut]]:
    """Validate one memory; returns the draft and the texts cut to their cap. Raises
    InvalidArgument naming the offending argument."""
    content, cut = clean_text("message.content", content, max_content)
    return MemoryDraft(
        agent_id=validate.identifier("agent_id", agent_id),
        project_id=validate.identifier("project_id", project_id if project_id is not None else ""),
        channel=validate.identifier("channel", channel if channel is not None else ""),
        msg_id=validate.identifier("message.id", msg_id if msg_id is not None else ""),
        content=content,
        source=validate.json_object("message.source", normalize_source(source), max_chars=max_metadata),
        timestamp=utc_now_iso() if timestamp in (None, "") else validate.timestamp("message.timestamp", timestamp),
        metadata=validate.json_object("message.metadata", metadata, max_chars=max_metadata),
    ), [cut] if cut else []


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
    return (min(stamps, key=_instant), max(stamps, key=_instant)) if stamps else (None, None)


def _instant(stamp: str) -> datetime:
    """The UTC instant of a validated timestamp (offsets differ, so text order is not time order)."""
    return parse_ts(stamp) or datetime.min.replace(tzinfo=UTC)


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
) -> tuple[EpisodeDraft, list[Cut]]:
    """Validate one episode; returns the draft and the texts cut to their cap. The summary
    is computed by the caller (the server never summarises). Raises InvalidArgument naming
    the offending argument."""
    if not isinstance(resolved, bool):
        raise InvalidArgument("resolved", "must be true or false")
    keywords = "" if keywords is None else keywords
    validate.text("keywords", keywords, max_chars=len(keywords) if isinstance(keywords, str) else 0)
    start, end = _history_times(history)
    summary, cut = clean_text("summary", summary, max_content)
    clean_keywords, keywords_cut = _sanitized("keywords", keywords, max_content)
    cuts = [c for c in (cut, keywords_cut) if c is not None]
    return EpisodeDraft(
        agent_id=validate.identifier("agent_id", agent_id),
        project_id=validate.identifier("project_id", project_id if project_id is not None else ""),
        channel=validate.identifier("channel", channel if channel is not None else ""),
        summary=summary,
        keywords=clean_keywords,
        start_time=start,
        end_time=end,
        resolved=resolved,
    ), cuts


def cut_report(cuts: list[Cut]) -> dict[str, Any]:
    """The answer keys saying what was cut: `truncated: true`, `original_length`
    ({argument: characters as sent}) and `max_length` (the cap); {} when nothing was."""
    if not cuts:
        return {}
    return {"truncated": True, "original_length": {c.argument: c.original_length for c in cuts},
            "max_length": cuts[0].cap}
