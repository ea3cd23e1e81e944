"""Checks on the structured fields of rows: malformed `source` / `metadata` JSON,
timestamps SQLite cannot parse, episodes without a start time, mixed timestamp forms
(UTC, another offset, no offset), sources without a canonical `type`, anonymous sources.

Timestamps are rewritten only in forms that keep the instant: an offset time becomes the
same instant in UTC (`+00:00`); a time without an offset is left alone (its zone is
unknown) unless it is exactly the row's `created_at`, which SQLite writes in UTC.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from cpersona.health.model import Context, Issue, row_issue, sample
from cpersona.util.text import normalize_source
from cpersona.util.time import utc_text

#: Sources classified (and repaired) per run.
MAX_SOURCES = 1000
#: "[name] text": the speaker's name written into the content by older chat bridges.
NAMED = re.compile(r"^\[([^\]\n]{1,100})\] ")
_CANONICAL_TYPES = ("User", "Agent", "System")


#: The instant a text names, as `YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00`; a time without an
#: offset is read as UTC (SQLite's `datetime('now')` form). None when unparseable.
aware_utc = utc_text


def to_utc(text: str) -> str | None:
    """An offset time converted to UTC, or None when it has no offset or cannot be read."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return value.astimezone(UTC).isoformat() if value.tzinfo is not None else None


# ---------------------------------------------------------------------- JSON
def detect_json(ctx: Context) -> list[Issue]:
    if not ctx.census()["bad_json"]:
        return []
    rows = ctx.s.repairs.invalid_json(ctx.agent)
    return row_issue([(r[0], bool(r[3])) for r in rows], source=sum(r[1] for r in rows),
                     metadata=sum(r[2] for r in rows))


def fix_json(ctx: Context, issue: Issue) -> dict[str, Any]:
    fixed = 0
    for row_id, bad_source, bad_metadata, locked in ctx.s.repairs.invalid_json(ctx.agent):
        if locked:
            continue
        done = [ctx.s.repairs.reset_json(row_id, col) for col, bad in (("source", bad_source),
                                                                        ("metadata", bad_metadata)) if bad]
        fixed += any(done)
    return {"fixed": fixed}


# ---------------------------------------------------------------- timestamps
def detect_timestamp(ctx: Context) -> list[Issue]:
    if not ctx.census()["bad_timestamp"]:
        return []
    rows = ctx.s.repairs.unparseable_timestamps(ctx.agent)
    if not rows:
        return []
    locked = sum(1 for r in rows if r[3])
    fixable = sum(1 for r in rows if not r[3] and aware_utc(r[2]))
    return [{"count": len(rows), "locked": locked, "repairable": fixable,
             "samples": [{"id": r[0], "timestamp": r[1][:40]} for r in rows[:5]]}]


def fix_timestamp(ctx: Context, issue: Issue) -> dict[str, Any]:
    fixed = 0
    for row_id, old, created_at, locked in ctx.s.repairs.unparseable_timestamps(ctx.agent):
        new = aware_utc(created_at)
        if not locked and new:
            fixed += ctx.s.repairs.set_memory_timestamp(row_id, old, new)
    return {"fixed": fixed, "replacement": "the row's created_at (UTC)"}


def detect_episode_start(ctx: Context) -> list[Issue]:
    rows = ctx.s.repairs.episodes_without_start(ctx.agent)
    if not rows:
        return []
    return [{"count": len(rows), "repairable": sum(1 for r in rows if aware_utc(r[2])),
             "ids": sample([r[0] for r in rows])}]


def fix_episode_start(ctx: Context, issue: Issue) -> dict[str, Any]:
    fixed = 0
    for row_id, old, created_at in ctx.s.repairs.episodes_without_start(ctx.agent):
        if new := aware_utc(created_at):
            fixed += ctx.s.repairs.set_episode_time(row_id, "start_time", old, new)
    return {"fixed": fixed}


def _forms(counts: dict[str, int]) -> dict[str, int]:
    return {form: counts.get(form, 0) for form in ("utc", "aware", "naive")}


def detect_drift(ctx: Context) -> list[Issue]:
    forms = {form: ctx.census()[f"form:{form}"] for form in ("utc", "aware", "naive")}
    if sum(1 for n in forms.values() if n) < 2:
        return []
    aware = ctx.s.repairs.aware_timestamps(ctx.agent)
    locked = sum(1 for r in aware if r[2])
    return [{"forms": forms, "repairable": len(aware) - locked, "unfixable_naive": forms["naive"],
             "unfixable_locked": locked}]


def fix_drift(ctx: Context, issue: Issue) -> dict[str, Any]:
    normalized = 0
    for row_id, old, locked in ctx.s.repairs.aware_timestamps(ctx.agent):
        new = to_utc(old)
        if not locked and new:
            normalized += ctx.s.repairs.set_memory_timestamp(row_id, old, new)
    return {"fixed": normalized, "normalized": normalized}


def _episode_repairs(ctx: Context) -> list[tuple[int, str, str, str, str]]:
    """(id, column, old, new, form) of the episode times a fix run rewrites."""
    out = []
    for row_id, col, value, _ in ctx.s.repairs.episode_times(ctx.agent, "aware"):
        if new := to_utc(value):
            out.append((row_id, col, value, new, "aware"))
    for row_id, col, value, created_at in ctx.s.repairs.episode_times(ctx.agent, "naive"):
        if value == created_at and (new := aware_utc(created_at)):
            out.append((row_id, col, value, new, "naive"))
    return out


def detect_episode_drift(ctx: Context) -> list[Issue]:
    forms = _forms(ctx.s.repairs.episode_time_forms(ctx.agent))
    if sum(1 for n in forms.values() if n) < 2:
        return []
    repairs = _episode_repairs(ctx)
    naive_fixed = sum(1 for r in repairs if r[4] == "naive")
    return [{"forms": forms, "repairable": len(repairs), "unfixable_naive": forms["naive"] - naive_fixed}]


def fix_episode_drift(ctx: Context, issue: Issue) -> dict[str, Any]:
    done = sum(ctx.s.repairs.set_episode_time(row_id, col, old, new) for row_id, col, old, new, _ in
               _episode_repairs(ctx))
    return {"fixed": done, "normalized": done}


# ------------------------------------------------------------------- sources
def _classify(rows: list[tuple[int, str, int]]) -> tuple[list[tuple[int, str, str]], int, int]:
    """([(id, old, new JSON)] mappable and unlocked, unmapped, locked-and-mappable)."""
    mapped, unmapped, locked = [], 0, 0
    for row_id, text, is_locked in rows:
        old = json.loads(text)
        new = normalize_source(old)
        if new == old or not (isinstance(new, dict) and new.get("type") in _CANONICAL_TYPES):
            unmapped += 1
        elif is_locked:
            locked += 1
        else:
            mapped.append((row_id, text, json.dumps(new, ensure_ascii=False)))
    return mapped, unmapped, locked


def detect_source_type(ctx: Context) -> list[Issue]:
    if not ctx.census()["noncanonical_source"]:
        return []
    total, rows = ctx.s.repairs.noncanonical_sources(ctx.agent, MAX_SOURCES)
    if not total:
        return []
    mapped, unmapped, locked = _classify(rows)
    out: Issue = {"count": total, "classified": len(rows), "mappable": len(mapped), "unmapped": unmapped,
                  "locked": locked, "repairable": len(mapped), "ids": sample([r[0] for r in rows])}
    if total > len(rows):
        out["hint"] = f"only the first {MAX_SOURCES} rows are classified per run; run the fix again"
    return [out]


def fix_source_type(ctx: Context, issue: Issue) -> dict[str, Any]:
    total, rows = ctx.s.repairs.noncanonical_sources(ctx.agent, MAX_SOURCES)
    mapped, unmapped, locked = _classify(rows)
    fixed = sum(ctx.s.repairs.set_source(row_id, old, new) for row_id, old, new in mapped)
    return {"fixed": fixed, "mapped": fixed, "unmapped": unmapped, "locked": locked, "remaining": total - fixed}


def detect_anonymous(ctx: Context) -> list[Issue]:
    """Memories without a named source whose speaker deep_check(fix) can recover (content
    written "[name] …"). A store without `source` is normal use and nothing can name its
    speaker afterwards, so unrecoverable rows alone are no finding."""
    n = ctx.census()["anonymous_source"]
    if not n:
        return []
    agents = [ctx.agent] if ctx.agent else ctx.s.inventory.memory_agents()
    named = {a: k for a in agents
             if (k := sum(1 for _, content, _, _ in ctx.s.inventory.user_sentinel_rows(a) if NAMED.match(content)))}
    if not named:
        return []
    return [{"unattributed": n, "recoverable": sum(named.values()), "agents": sorted(named),
             "hint": "deep_check(agent_id, fix=true) for each listed agent sets the source of the rows written as "
                     "'[name] …' to that name"}]
