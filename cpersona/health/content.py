"""Checks on the text of memories and profiles: `[Memory from …]` markers, chat mentions,
oversized and blank content, the same content kept in several channels, oversized profiles,
content another program stored as something other than UTF-8 text.

The rewrite rule (markers, mentions, oversize): an unlocked row's content is replaced and
its vector dropped (queued for re-embedding); when another memory of the same agent,
project and channel already holds the new text, the row is deleted instead (the dedup
unique index); a row left blank is deleted. Locked rows are counted, never changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import groupby
from typing import Any

from cpersona.health.model import MARKER_TEXT, MENTION_TEXT, Context, Issue, row_issue, sample
from cpersona.util.text import strip_markers

#: A Discord user mention: <@123> or the nickname form <@!123>, and the space after it.
MENTION = re.compile(r"<@!?\d+>[ \t]?")

Transform = Callable[[str], str]
Rows = list[tuple[int, str, int]]


def strip_mentions(text: str) -> str:
    """`text` without Discord user mentions (unchanged when it has none)."""
    clean = MENTION.sub("", text)
    return clean.strip() if clean != text else text


def _changes(rows: Rows, transform: Transform) -> list[tuple[int, str, int]]:
    """(id, new content, locked) of the rows the transform changes."""
    out = []
    for row_id, content, locked in rows:
        new = transform(content)
        if new != content:
            out.append((row_id, new, locked))
    return out


def _rewrite_issue(rows: Rows, transform: Transform, **extra: Any) -> list[Issue]:
    return row_issue([(row_id, bool(locked)) for row_id, _, locked in _changes(rows, transform)], **extra)


def _rewrite(ctx: Context, rows: Rows, transform: Transform) -> dict[str, Any]:
    return _write_changes(ctx, _changes(rows, transform))


def _write_changes(ctx: Context, changes: Rows) -> dict[str, Any]:
    """Apply (id, new content, locked) rows by the rewrite rule of the module doc."""
    rewritten = deleted = 0
    for row_id, new, locked in changes:
        if locked:
            continue
        outcome = ctx.s.repairs.rewrite_memory(row_id, new) if new.strip() else (
            "deleted" if ctx.s.repairs.delete_memory(row_id) else "locked")
        if outcome == "rewritten":
            rewritten += 1
            ctx.vector_dropped("memories", row_id)
        elif outcome == "deleted":
            deleted += 1
            ctx.row_deleted("memories", row_id)
    return {"fixed": rewritten + deleted, "rewritten": rewritten, "deleted": deleted}


def _annotated(ctx: Context) -> Rows:
    return ctx.s.repairs.memories_containing(MARKER_TEXT, ctx.agent)


def _mentioned(ctx: Context) -> Rows:
    return ctx.s.repairs.memories_containing(MENTION_TEXT, ctx.agent)


def _oversized(ctx: Context) -> Rows:
    return ctx.s.repairs.oversized_memories(ctx.settings.max_content_length, ctx.agent)


def _truncate(ctx: Context) -> Transform:
    cap = ctx.settings.max_content_length
    return lambda text: text[:cap]


# ------------------------------------------------------------------ checks
def detect_annotation(ctx: Context) -> list[Issue]:
    if not ctx.census()[f"contains:{MARKER_TEXT}"]:
        return []
    return _rewrite_issue(_annotated(ctx), strip_markers)


def fix_annotation(ctx: Context, issue: Issue) -> dict[str, Any]:
    return _rewrite(ctx, _annotated(ctx), strip_markers)


def detect_mention(ctx: Context) -> list[Issue]:
    if not ctx.census()[f"contains:{MENTION_TEXT}"]:
        return []
    return _rewrite_issue(_mentioned(ctx), strip_mentions)


def fix_mention(ctx: Context, issue: Issue) -> dict[str, Any]:
    return _rewrite(ctx, _mentioned(ctx), strip_mentions)


def detect_oversized(ctx: Context) -> list[Issue]:
    if not ctx.census()["oversized"]:
        return []
    return _rewrite_issue(_oversized(ctx), _truncate(ctx), max_len=ctx.settings.max_content_length)


def fix_oversized(ctx: Context, issue: Issue) -> dict[str, Any]:
    return _rewrite(ctx, _oversized(ctx), _truncate(ctx))


def _duplicate_groups(ctx: Context) -> list[tuple[list[tuple[int, str, int]], bool]]:
    """[(rows (id, channel, locked), has a channel-less copy)] per duplicate group."""
    groups = []
    for _, members in groupby(ctx.s.repairs.duplicate_rows(ctx.agent), key=lambda r: r[3]):
        rows = [(r[0], r[1], r[2]) for r in members]
        groups.append((rows, any(channel == "" for _, channel, _ in rows)))
    return groups


def _redundant(rows: list[tuple[int, str, int]]) -> list[tuple[int, int]]:
    """(id, locked) of the channel copies made redundant by the channel-less row (which is
    visible from every channel, so deleting them changes no reader's results)."""
    return [(row_id, locked) for row_id, channel, locked in rows if channel != ""]


def detect_duplicates(ctx: Context) -> list[Issue]:
    groups = _duplicate_groups(ctx)
    if not groups:
        return []
    redundant = [r for rows, has_global in groups if has_global for r in _redundant(rows)]
    total_extra = sum(len(rows) - 1 for rows, _ in groups)
    locked = sum(1 for _, lk in redundant if lk)
    return [{"groups": len(groups), "total_extra": total_extra, "locked": locked,
             "repairable": len(redundant) - locked,
             "without_global_copy": sum(1 for _, has_global in groups if not has_global),
             "ids": sample([r[0] for rows, _ in groups for r in rows])}]


def fix_duplicates(ctx: Context, issue: Issue) -> dict[str, Any]:
    deleted = 0
    for rows, has_global in _duplicate_groups(ctx):
        if not has_global:
            continue
        for row_id, locked in _redundant(rows):
            if not locked and ctx.s.repairs.delete_memory(row_id):
                deleted += 1
                ctx.row_deleted("memories", row_id)
    return {"fixed": deleted}


def detect_empty(ctx: Context) -> list[Issue]:
    if not ctx.census()["blank"]:
        return []
    return row_issue([(row_id, bool(locked)) for row_id, locked in ctx.s.repairs.blank_memories(ctx.agent)])


def fix_empty(ctx: Context, issue: Issue) -> dict[str, Any]:
    deleted = 0
    for row_id, locked in ctx.s.repairs.blank_memories(ctx.agent):
        if not locked and ctx.s.repairs.delete_memory(row_id):
            deleted += 1
            ctx.row_deleted("memories", row_id)
    return {"fixed": deleted}


def detect_not_text(ctx: Context) -> list[Issue]:
    memories = ctx.s.repairs.non_text_rows("memories", ctx.agent)
    episodes = [row_id for row_id, _, _ in ctx.s.repairs.non_text_rows("episodes", ctx.agent)]
    if not memories and not episodes:
        return []
    found = row_issue([(row_id, bool(locked)) for row_id, _, locked in memories]) or [
        {"count": 0, "locked": 0, "repairable": 0, "ids": []}]
    issue = found[0]
    if episodes:
        issue.update(episodes=len(episodes), episode_ids=sample(episodes),
                     repairable=issue["repairable"] + len(episodes))
    return [issue]


def _clean(text: str) -> str:
    return text.replace("\x00", "")


def fix_not_text(ctx: Context, issue: Issue) -> dict[str, Any]:
    """Each row's text rewritten as it reads (U+FFFD for bytes that are not UTF-8), without
    NUL, so search, exports (which import again) and other programs see one kind of value;
    the row is re-embedded."""
    found = ctx.s.repairs.non_text_rows("memories", ctx.agent)
    memories = [(row_id, _clean(text), locked) for row_id, text, locked in found]
    done = _write_changes(ctx, memories)
    episodes = 0
    for row_id, text, _ in ctx.s.repairs.non_text_rows("episodes", ctx.agent):
        if _clean(text).strip() and ctx.s.repairs.rewrite_episode_summary(row_id, _clean(text)):
            episodes += 1
            ctx.vector_dropped("episodes", row_id)
    return {**done, "fixed": done["fixed"] + episodes, "episodes_rewritten": episodes}


def detect_oversized_profile(ctx: Context) -> list[Issue]:
    cap = ctx.settings.max_profile_length
    rows = ctx.s.repairs.oversized_profiles(cap, ctx.agent)
    if not rows:
        return []
    return [{"count": len(rows), "max_len": cap, "repairable": len(rows),
             "profiles": [{"id": r[0], "agent_id": r[1], "length": r[2]} for r in rows[:10]]}]


def fix_oversized_profile(ctx: Context, issue: Issue) -> dict[str, Any]:
    cap = ctx.settings.max_profile_length
    done = sum(ctx.s.repairs.truncate_profile(r[0], cap) for r in ctx.s.repairs.oversized_profiles(cap, ctx.agent))
    return {"fixed": done}
