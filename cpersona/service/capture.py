"""Keeping a host session verbatim: its user and assistant turns stored as memories, an
episode for the session, and forgetting all of it again — written once for every edge,
through the public tools (`SessionTools`: the `Engine` façade), so `store`'s rules apply
unchanged (validation, the content cap, dedup, the pause, the operating context).

Each turn is one memory: `source` {type User | Agent, id "<host>:<session id>", name "user" |
"assistant"}, its timestamp from the transcript, `msg_id` "<host>:<session id>:<line uuid>" —
`store` skips a msg_id it already holds in the scope, so storing the same turns again stores
nothing — and obvious secrets replaced first (policy/secrets.py). The source id names the
session: `recall(query="", source_id="<host>:<session id>")` lists its memories, which is how
`forget_session` (and an agent over MCP, with `delete_memory` on the refs) removes them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cpersona.policy.secrets import redact
from cpersona.portable.transcripts import Turn
from cpersona.service.context_block import MemoryTools, recall_request

#: Characters of the first prompt in a session's episode summary.
FIRST_PROMPT_CHARS = 600
#: Memories one forget pass asks recall for (recall's largest limit).
FORGET_PAGE = 100
_SOURCE = {"user": ("User", "user"), "assistant": ("Agent", "assistant")}


class SessionTools(MemoryTools, Protocol):
    """The write tools a session capture uses (`Engine` has them)."""

    def store(self, agent_id: object, content: object, **message: object) -> Any: ...

    def archive_episode(self, agent_id: object, summary: object, **fields: object) -> Any: ...

    def delete_memory(self, memory_id: object, agent_id: object = None) -> Any: ...

    def delete_episode(self, episode_id: object, agent_id: object = None) -> Any: ...


@dataclass(frozen=True)
class HostSession:
    """One session of a host: who stores it and where."""

    host: str
    session_id: str
    agent_id: str
    project_id: str = ""

    @property
    def source_id(self) -> str:
        return f"{self.host}:{self.session_id}"

    @property
    def keywords(self) -> str:
        """The episode keywords that mark this session's episode."""
        return f"{self.host} session {self.session_id}"

    def msg_id(self, turn: Turn) -> str:
        """The turn's message id: its first line's uuid, else a digest of its time and text."""
        key = turn.uuid or hashlib.sha256(f"{turn.timestamp}\n{turn.text}".encode()).hexdigest()[:32]
        return f"{self.source_id}:{key}"


@dataclass
class CaptureReport:
    """What one capture did. `done` = turns handled before a pause stopped it (all when not)."""

    stored: int = 0
    skipped: int = 0
    rejected: int = 0
    truncated: int = 0
    done: int = 0
    paused: bool = False
    redacted: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"stored": self.stored, "skipped": self.skipped, "rejected": self.rejected,
                "truncated": self.truncated, "paused": self.paused, "redacted": sum(self.redacted.values()),
                **({"errors": self.errors[:5]} if self.errors else {})}


def store_turns(tools: SessionTools, session: HostSession, turns: Sequence[Turn],
                metadata: Mapping[str, Any] | None = None) -> CaptureReport:
    """Store `turns` in order (module doc); stops at the first answer that says persistence
    is paused (`paused`, `done` = the turns handled before). A turn `store` rejects is
    counted and its reason kept in `errors` (the others are still stored)."""
    report = CaptureReport()
    for turn in turns:
        kind, name = _SOURCE[turn.role]
        text, found = redact(turn.text)
        report.redacted.update(found)
        answer = tools.store(session.agent_id, text, msg_id=session.msg_id(turn), timestamp=turn.timestamp or None,
                             source={"type": kind, "id": session.source_id, "name": name},
                             metadata={**(metadata or {}), "host": session.host, "session_id": session.session_id},
                             project_id=session.project_id)
        if answer.get("persisted") is False:
            report.paused = True
            return report
        report.done += 1
        result = answer.get("result")
        if result == "stored":
            report.stored += 1
        elif result == "skipped":
            report.skipped += 1
        else:
            report.rejected += 1
            report.errors.append(str(answer.get("reason") or answer.get("error") or answer))
        report.truncated += bool(answer.get("truncated"))
    return report


@dataclass(frozen=True)
class SessionFacts:
    """What an episode summary of a session says: where, how many turns, when, its first prompt."""

    place: str
    user_turns: int
    assistant_turns: int
    tool_calls: int
    first_prompt: str
    first_at: str
    last_at: str


def episode_summary(session: HostSession, facts: SessionFacts) -> str:
    """The session's episode text: counts and its own first prompt, no generated words."""
    prompt = " ".join(facts.first_prompt.split())
    if len(prompt) > FIRST_PROMPT_CHARS:
        prompt = prompt[: FIRST_PROMPT_CHARS - 1] + "…"
    span = f", {facts.first_at} – {facts.last_at}" if facts.first_at and facts.last_at else ""
    where = f" in {facts.place}" if facts.place else ""
    return (f"{session.host} session {session.session_id}{where}: {facts.user_turns} user turns, "
            f"{facts.assistant_turns} assistant turns, {facts.tool_calls} tool calls{span}. "
            f"First prompt: {redact(prompt)[0] or '(none)'}")


def archive_session(tools: SessionTools, session: HostSession, facts: SessionFacts) -> dict[str, Any]:
    """Archive the session's episode (keywords mark it for `forget_session`); the tool's
    answer (paused: its skipped body)."""
    history = [{"timestamp": t} for t in (facts.first_at, facts.last_at) if t]
    return dict(tools.archive_episode(session.agent_id, episode_summary(session, facts), keywords=session.keywords,
                                      history=history, project_id=session.project_id))


def forget_session(tools: SessionTools, session: HostSession) -> dict[str, Any]:
    """Delete the memories and episodes stored for `session` (by its source id and episode
    keywords, in every project). Returns {deleted_memories, deleted_episodes, kept: [refs a
    delete refused, e.g. locked], paused}."""
    deleted, kept, seen = 0, list[str](), set[str]()
    while True:
        answer = tools.recall(recall_request(session.agent_id, "", FORGET_PAGE, None, source_id=session.source_id),
                              verbose=False)
        page = [m for m in answer.get("messages", []) if str(m.get("ref", "")).startswith("mem:")
                and isinstance(m.get("source"), Mapping) and m["source"].get("id") == session.source_id
                and m["ref"] not in seen]
        if not page:
            break
        for msg in page:
            seen.add(msg["ref"])
            out = tools.delete_memory(int(msg["ref"][4:]), session.agent_id)
            if out.get("persisted") is False:
                return {"deleted_memories": deleted, "deleted_episodes": 0, "kept": kept, "paused": True}
            if out.get("ok"):
                deleted += 1
            else:
                kept.append(msg["ref"])
    episodes = 0
    cursor = ""
    while True:
        listing = tools.list_episodes(session.agent_id, 200, None, cursor)
        for row in listing.get("episodes", []):
            if row.get("keywords") == session.keywords:
                out = tools.delete_episode(row["id"], session.agent_id)
                episodes += bool(out.get("ok")) and out.get("persisted") is not False
        cursor = listing.get("next_cursor") or ""
        if not cursor:
            break
    return {"deleted_memories": deleted, "deleted_episodes": episodes, "kept": kept, "paused": False}
