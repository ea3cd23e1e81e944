"""Context blocks: what stored memory to put in front of a model without it asking — at the
start of a session (`session_block`) and with each prompt (`prompt_block`) — within a token
budget, written once for every edge (the host hooks, `cpersona context`, the local endpoint).

Everything is read through the public tools (`MemoryTools`: the `Engine` façade), so the
rules of those tools apply unchanged: recall's gate decides what relates to a prompt (a block
holds only rows that pass it, best LAST, as recall orders them), the operating context's
project rules apply to project_id, and nothing is written.

Tokens are estimated as ceil(UTF-8 bytes / 3) — the rule of the listing tools' budget
(service/listing.py: ASCII text runs about 4 bytes per token and CJK about 3, so the estimate
errs high). A block never exceeds its budget: a row is added whole (its text first cut to
`ENTRY_CHARS` characters, ending in "…", its ref naming the full row for get_contents) or not
at all, and a block with no row is the empty string.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cpersona.service.listing import BYTES_PER_TOKEN
from cpersona.service.requests import RecallRequest

#: Characters of one row's text in a session block / a prompt block (the rest: get_contents).
SESSION_ENTRY_CHARS = 400
PROMPT_ENTRY_CHARS = 700
#: Latest episodes in a session block; rows recalled for the project; newest rows added.
LATEST_EPISODES = 2
RELATED_ROWS = 6
NEWEST_ROWS = 4
#: Rows a prompt block shows at most, and the rows recall is asked for to allow for the ones
#: a caller leaves out (`skip`).
PROMPT_ROWS = 5
PROMPT_FETCH = 10
#: Characters of a prompt's recall query (the prompt first, then the turns before it).
QUERY_CHARS = 2000
#: The share of a session block the profile may take.
PROFILE_SHARE = 0.5
_WHO = {"User": "user", "Agent": "assistant", "System": "system"}


class MemoryTools(Protocol):
    """The read tools a context block uses (`Engine` has them)."""

    def recall(self, req: RecallRequest, trace: dict | None = None, preview_rows: bool = False,
               full_content: bool = False, verbose: bool | None = None) -> Any: ...

    def list_memories(self, agent_id: str | None = None, limit: int = 100, project_id: str | None = None,
                      cursor: str = "") -> Mapping[str, Any]: ...

    def list_episodes(self, agent_id: str | None = None, limit: int = 50, project_id: str | None = None,
                      cursor: str = "") -> Mapping[str, Any]: ...

    def get_profile(self, agent_id: object) -> Mapping[str, Any]: ...


def tokens(text: str) -> int:
    """Estimated tokens of `text`: ceil(UTF-8 bytes / 3) (module doc)."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


def recall_request(agent_id: str, query: str, limit: int, project_id: str | None,
                   exclude: Iterable[str] = (), source_id: str = "", deep: bool = False) -> RecallRequest:
    """The recall a block makes (the one place outside retrieval/ and the tools that builds a
    RecallRequest)."""
    return RecallRequest(agent_id, query, limit, deep=deep, project_id=project_id, source_id=source_id,
                         exclude_contents=tuple(exclude))


def _cut(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def _who(source: Any) -> str:
    if not isinstance(source, Mapping):
        return ""
    return _WHO.get(str(source.get("type")), "") or str(source.get("name") or "")


def entry_line(ref: str, when: str, who: str, text: str, chars: int) -> str:
    """`- [mem:12 · 2025-05-01 09:12 · user] text` (empty labels left out; `when` shown to the
    minute, as stored: UTC)."""
    stamp = when.replace("T", " ")[:16] if when else ""
    label = " · ".join(p for p in (ref, stamp, who) if p)
    return f"- [{label}] {_cut(text, chars)}" if label else f"- {_cut(text, chars)}"


def recalled_line(msg: Mapping[str, Any], chars: int) -> str:
    return entry_line(str(msg.get("ref", "")), str(msg.get("timestamp") or ""), _who(msg.get("source")),
                      str(msg.get("content", "")), chars)


def memory_line(row: Mapping[str, Any], chars: int) -> str:
    return entry_line(f"mem:{row['id']}", str(row.get("timestamp") or row.get("created_at") or ""),
                      _who(row.get("source")), str(row.get("content", "")), chars)


def episode_line(row: Mapping[str, Any], chars: int) -> str:
    return entry_line(f"ep:{row['id']}", str(row.get("end_time") or row.get("created_at") or ""), "",
                      str(row.get("summary", "")), chars)


@dataclass(frozen=True)
class Section:
    """A titled group of lines, in the order shown."""

    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """A context block: its text ('' = nothing to add), estimated tokens, rows shown."""

    text: str
    tokens: int
    rows: int


EMPTY = Block("", 0, 0)


def _assemble(head: str, sections: list[Section], foot: str) -> str:
    parts = [head]
    for section in sections:
        if section.lines:
            parts.append(f"{section.title}:" if section.title else "")
            parts.extend(section.lines)
    parts.append(foot)
    return "\n".join(p for p in parts if p)


def fit(head: str, foot: str, wanted: list[tuple[str, list[str]]], budget: int, reverse: bool = False) -> Block:
    """The block of `head`, the sections `wanted` ((title, candidate lines) in priority order:
    a section's lines are taken in order, each whole or not at all, while the whole block
    stays within `budget` tokens) and `foot`; each section's lines shown in the order taken,
    or the reverse with `reverse`. EMPTY when no line fits."""
    chosen: list[Section] = [Section(title, ()) for title, _ in wanted]
    used = tokens(_assemble(head, [], foot))
    rows = 0
    for i, (title, lines) in enumerate(wanted):
        kept: list[str] = []
        for line in lines:
            cost = tokens(line + "\n") + (0 if kept else tokens(f"{title}:\n"))
            if used + cost <= budget:
                kept.append(line)
                used += cost
        chosen[i] = Section(title, tuple(reversed(kept)) if reverse else tuple(kept))
        rows += len(kept)
    if not rows:
        return EMPTY
    text = _assemble(head, chosen, foot)
    return Block(text, tokens(text), rows)


def session_block(tools: MemoryTools, agent_id: str, project_id: str, topic: str, budget: int,
                  skip: Callable[[Mapping[str, Any]], bool] = lambda _row: False) -> Block:
    """The block for the start of a session: the agent's profile, its latest episodes, the
    memories recall finds for `topic` (the project's name, the folder's name) and the newest
    memories of the project, within `budget` tokens (in that priority). Memories for which
    `skip(row)` is true (the session's own turns) are left out."""
    if budget <= 0:
        return EMPTY
    scope = project_id or None
    profile = str(tools.get_profile(agent_id).get("profile") or "")
    episodes = tools.list_episodes(agent_id, LATEST_EPISODES, scope).get("episodes", [])
    related: list[Mapping[str, Any]] = []
    if topic.strip():
        answer = tools.recall(recall_request(agent_id, topic, RELATED_ROWS, scope), verbose=False)
        related = [m for m in reversed(answer.get("messages", [])) if m.get("ref") and not skip(m)]
    shown = {str(m["ref"]) for m in related}
    newest = [r for r in tools.list_memories(agent_id, NEWEST_ROWS + len(shown) + 4, scope).get("memories", [])
              if f"mem:{r['id']}" not in shown and not skip(r)][:NEWEST_ROWS]
    profile_chars = max(0, int(budget * PROFILE_SHARE) * BYTES_PER_TOKEN // 2)
    where = f", project {project_id!r}" if project_id else ""
    head = (f"<cpersona-memory>\nStored memory of agent {agent_id!r}{where} (cpersona). [mem:N] / [ep:N] are refs: "
            "the get_contents tool returns a row in full.")
    return fit(head, "</cpersona-memory>", [
        ("Profile", [_cut(profile, profile_chars)] if profile.strip() and profile_chars else []),
        ("Latest sessions", [episode_line(e, SESSION_ENTRY_CHARS) for e in episodes]),
        ("Related to this project", [recalled_line(m, SESSION_ENTRY_CHARS) for m in related]),
        ("Most recent", [memory_line(r, SESSION_ENTRY_CHARS) for r in newest]),
    ], budget)


def prompt_query(prompt: str, before: Iterable[str] = (), chars: int = QUERY_CHARS) -> str:
    """The recall query for a prompt: the prompt, then the turns before it (latest first),
    within `chars` characters (the prompt is kept whole up to that bound)."""
    parts = [prompt.strip()]
    room = chars - len(parts[0])
    for text in before:
        text = " ".join(text.split())
        if room <= 1 or not text:
            break
        parts.append(text[: room - 1])
        room -= len(parts[-1]) + 1
    return "\n".join(parts)[:chars]


def prompt_block(tools: MemoryTools, agent_id: str, project_id: str, query: str, budget: int,
                 exclude: Iterable[str] = (), skip: Callable[[Mapping[str, Any]], bool] = lambda _msg: False,
                 rows: int = PROMPT_ROWS) -> Block:
    """The memories recall returns for `query` (its gate decides; nothing when nothing
    passes), best LAST, at most `rows`, within `budget` tokens. Texts in `exclude` are not
    returned (recall's exclude_contents); neither are rows for which `skip(msg)` is true, nor
    the profile rows recall may attach (no ref: the session block carries the profile)."""
    if budget <= 0 or not query.strip():
        return EMPTY
    answer = tools.recall(recall_request(agent_id, query, PROMPT_FETCH, project_id or None, exclude), verbose=False)
    best_first = [m for m in reversed(answer.get("messages", [])) if m.get("ref") and not skip(m)][:rows]
    head = "<cpersona-memory>\nStored memories that may relate to this prompt (cpersona recall; best match last):"
    foot = "Refs ([mem:N], [ep:N]) give the full row with the get_contents tool.\n</cpersona-memory>"
    return fit(head, foot, [("", [recalled_line(m, PROMPT_ENTRY_CHARS) for m in best_first])], budget, reverse=True)
