"""From parsed rows to rows fit to write: the write-path rules applied to imported text.

* memory: empty content is skipped; `[Memory from …]` markers are stripped and the text cut
  to CPERSONA_MAX_CONTENT_LENGTH (noted); a source / metadata longer than
  CPERSONA_MAX_METADATA_LENGTH is skipped (noted: metadata is never cut);
* episode: an empty summary is ignored; summary and keywords are cleaned the same way;
* profile: an empty text keeps the existing profile (noted); cut to the profile cap.
Identifiers (agent, project, channel, message id) follow the same rules as `store`; a
text with a NUL or a lone surrogate is a defect of its line (nothing is written).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpersona.errors import InvalidArgument
from cpersona.policy import validate
from cpersona.portable.formats import Item
from cpersona.portable.reader import YIELD_EVERY, FileDefect
from cpersona.util.text import sanitize
from cpersona.util.threads import yield_gil

_IDS = {"memory": ("agent_id", "project_id", "channel", "msg_id"), "episode": ("agent_id", "project_id", "channel"),
        "profile": ("agent_id", "user_id", "project_id")}
#: Longest free-text stamp kept (timestamps, created_at): ISO-8601 forms are far shorter.
MAX_STAMP_CHARS = 64
_STAMPS = ("timestamp", "created_at", "last_recalled_at", "start_time", "end_time", "updated_at")


@dataclass
class Caps:
    """The write-path limits (from the settings)."""

    content: int
    profile: int
    metadata: int


@dataclass
class Plan:
    """Rows ready to write, with what was skipped before writing and why."""

    memories: list[Item] = field(default_factory=list)
    episodes: list[Item] = field(default_factory=list)
    profiles: list[Item] = field(default_factory=list)
    skipped_memories: int = 0
    skipped_episodes: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.memories) + len(self.episodes) + len(self.profiles)


def _check(item: Item, keys: tuple[str, ...], max_chars: int) -> None:
    for key in keys:
        value = item.row.get(key)
        if value is None:
            continue
        try:
            validate.text(f"{item.kind}.{key}", value, max_chars=max_chars)
        except InvalidArgument as err:
            raise FileDefect(str(err), item.line) from None


def _clean(item: Item, key: str, cap: int, plan: Plan) -> str:
    text, cut = sanitize(item.row[key], cap)
    if cut:
        plan.notes.append(f"line {item.line}: {item.kind} {key} cut to {cap} characters")
    return text


def _memory(item: Item, caps: Caps, plan: Plan) -> None:
    if not item.row["content"].strip():
        plan.skipped_memories += 1
        return
    content = _clean(item, "content", caps.content, plan)
    too_long = next((k for k in ("source", "metadata") if len(item.row[k]) > caps.metadata), None)
    if not content or too_long:
        plan.skipped_memories += 1
        plan.notes.append(f"line {item.line}: memory skipped: " + (
            f"its {too_long} is longer than {caps.metadata} characters (CPERSONA_MAX_METADATA_LENGTH)" if too_long
            else "empty after removing [Memory from …] markers"))
        return
    item.row["content"] = content
    plan.memories.append(item)


def _episode(item: Item, caps: Caps, plan: Plan) -> None:
    if not item.row["summary"].strip():
        return  # ignored, not counted (the original's rule)
    summary = _clean(item, "summary", caps.content, plan)
    if not summary:
        plan.skipped_episodes += 1
        plan.notes.append(f"line {item.line}: episode skipped: empty after removing [Memory from …] markers")
        return
    item.row["summary"] = summary
    item.row["keywords"] = sanitize(item.row["keywords"], caps.content)[0]
    plan.episodes.append(item)


def _profile(item: Item, caps: Caps, plan: Plan) -> None:
    text = _clean(item, "content", caps.profile, plan) if item.row["content"].strip() else ""
    if not text:
        plan.notes.append(f"line {item.line}: empty profile of {item.row['agent_id']!r}: the existing one is kept")
        return
    item.row["content"] = text
    plan.profiles.append(item)


_RULES = {"memory": _memory, "episode": _episode, "profile": _profile}


def prepare(items: list[Item], caps: Caps) -> Plan:
    """Apply the write-path rules to every parsed row (module doc). Raises FileDefect."""
    plan = Plan()
    for n, item in enumerate(items, 1):
        if n % YIELD_EVERY == 0:
            yield_gil()
        _check(item, _IDS[item.kind], validate.MAX_ID_CHARS)
        _check(item, _STAMPS, MAX_STAMP_CHARS)
        body = ("content", "summary", "keywords", "source", "metadata")
        _check(item, tuple(k for k in body if k in item.row), max(caps.content, caps.metadata) * 8 + 4096)
        _RULES[item.kind](item, caps, plan)
    return plan

