"""Timestamps: ISO-8601 with a trailing Z accepted; a naive timestamp means UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_ts(text: str | None) -> datetime | None:
    """Aware UTC datetime, or None when `text` is empty or not ISO-8601."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def utc_now_iso() -> str:
    """Server time for a caller timestamp: `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`."""
    return datetime.now(UTC).isoformat()
