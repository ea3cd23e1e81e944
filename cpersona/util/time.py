"""Timestamps: ISO-8601 with a trailing Z accepted; a naive timestamp means UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_ts(text: str | None) -> datetime | None:
    """Aware UTC datetime, or None when `text` is empty or not ISO-8601.

    A valid timestamp whose UTC instant falls outside Python's datetime range (years
    1–9999), e.g. `0001-01-01T00:00:00+14:00` (= 0000-12-31T10:00Z), is clamped to the
    first / last representable instant: it still sorts before / after every other time
    instead of raising OverflowError."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        edge = datetime.min if value.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)


def utc_text(text: str | None) -> str | None:
    """The instant `text` names as `YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00` (a time without an
    offset read as UTC, as `parse_ts` does); None when it is not ISO-8601 or its UTC instant
    falls outside years 1–9999."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    except (ValueError, OverflowError):
        return None


def utc_now_iso() -> str:
    """Server time for a caller timestamp: `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`."""
    return datetime.now(UTC).isoformat()
