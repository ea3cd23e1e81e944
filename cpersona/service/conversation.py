"""recall_with_context: recall merged with the caller's conversation.

1. Every context entry with non-blank text — whatever its role — is added to the recall's
   exclusions, so a memory that merely repeats what is already in the conversation is not
   returned twice (exact text for short entries, prefix either way for ≥ 32 characters).
2. Recall runs as usual (gate, limit, worst → best).
3. `user` and `assistant` entries are appended as `{content, source, timestamp,
   context_type: "conversation"}` (no ref: never trimmed by the preview tier), identical
   entries once.
4. All messages are sorted CHRONOLOGICALLY (parsed timestamp ascending; stored rows without a
   timestamp first, conversation entries without one LAST — they are the live conversation,
   the newest turns — each in their previous order) — unlike recall, the last row is the
   newest, not the best. (The original sorted every untimed entry first, putting the turn
   being answered before last week's memories.)
Entries of other roles (system, tool, …) only filter: `context_filter_only` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cpersona.errors import InvalidArgument
from cpersona.policy import validate
from cpersona.util.time import parse_ts

MAX_ENTRIES = 200
MAX_ENTRY_CHARS = 100_000
ECHOED_ROLES = ("assistant", "user")


@dataclass(frozen=True)
class Entry:
    role: str | None
    content: str
    name: str = ""
    user_id: str = ""
    timestamp: str = ""


def _opt_str(argument: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a string, got {type(value).__name__}")
    return validate.text(argument, value, max_chars=validate.MAX_ID_CHARS)


def parse_context(raw: Any) -> list[Entry]:
    """Validate external_context: a list of ≤ MAX_ENTRIES objects {role, content, name?,
    user_id?, timestamp?}."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise InvalidArgument("external_context", f"must be a list of objects, got {type(raw).__name__}")
    if len(raw) > MAX_ENTRIES:
        raise InvalidArgument("external_context", f"has {len(raw)} entries; the limit is {MAX_ENTRIES}")
    entries = []
    for i, item in enumerate(raw):
        arg = f"external_context[{i}]"
        if not isinstance(item, dict):
            raise InvalidArgument(arg, f"must be an object, got {type(item).__name__}")
        role = item.get("role")
        if role is not None and not isinstance(role, str):
            raise InvalidArgument(f"{arg}.role", f"must be a string, got {type(role).__name__}")
        content = item.get("content", "")
        if not isinstance(content, str):
            raise InvalidArgument(f"{arg}.content", f"must be a string, got {type(content).__name__}")
        validate.text(f"{arg}.content", content, max_chars=MAX_ENTRY_CHARS)
        entries.append(Entry(role, content, _opt_str(f"{arg}.name", item.get("name")),
                             _opt_str(f"{arg}.user_id", item.get("user_id")),
                             _opt_str(f"{arg}.timestamp", item.get("timestamp"))))
    return entries


def exclusions(entries: list[Entry]) -> tuple[str, ...]:
    """The texts recall must leave out (every role)."""
    return tuple(dict.fromkeys(e.content.strip().lower() for e in entries if e.content.strip()))


def _echo(entry: Entry) -> dict[str, Any]:
    if entry.role == "assistant":
        source: dict[str, Any] = {"type": "Agent", "id": "self"}
    else:
        source = {"type": "User", "id": entry.user_id or entry.name, "name": entry.name or "User"}
    return {"content": entry.content, "source": source, "timestamp": entry.timestamp, "context_type": "conversation"}


def _order(msg: dict[str, Any]) -> tuple:
    stamp = parse_ts(msg.get("timestamp") or "")
    if stamp is None:
        return (2, "") if msg.get("context_type") == "conversation" else (0, "")
    return (1, stamp.isoformat())


def merge(response: Mapping[str, Any], entries: list[Entry]) -> dict[str, Any]:
    """The recall response with the echoed conversation, sorted chronologically."""
    echoed: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    filter_only: set[str] = set()
    for entry in entries:
        if not entry.content.strip():
            continue
        if entry.role not in ECHOED_ROLES:
            filter_only.add(entry.role if entry.role else "(unset)")
            continue
        key = (entry.role, entry.content, entry.timestamp)
        if key not in seen:
            seen.add(key)
            echoed.append(_echo(entry))
    out = dict(response)
    out["messages"] = sorted(list(response.get("messages") or []) + echoed, key=_order)
    if filter_only:
        out["context_filter_only"] = {
            "roles": sorted(filter_only),
            "note": "entries of these roles were only used to filter recalled memories; they are not echoed",
        }
    return out
