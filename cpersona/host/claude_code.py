"""Claude Code's hook events, answered from stored memory (docs/memory-without-asking.md).

Each hook gets Claude Code's documented JSON on stdin — `session_id`, `transcript_path`,
`cwd`, `hook_event_name`, and per event `source` (SessionStart), `prompt` (UserPromptSubmit),
`trigger` (PreCompact), `reason` (SessionEnd) — and answers with a `HookAnswer`: the text to
print on stdout ('' = nothing) and one line for the hook log.

    SessionStart       the session block (service/context_block.py): profile, latest
                       episodes, memories recalled for the project, its newest memories
    UserPromptSubmit   the prompt block: what recall's gate passes for the prompt (and, with
                       CPERSONA_HOOKS_PROMPT_TURNS, the turns before it), best last
    PreCompact         store the session's complete new turns (service/capture.py)
    Stop               the same, the reply just finished being complete
    SessionEnd         the same, then archive the session's episode (CPERSONA_HOOKS_ARCHIVE_EPISODES)

Context reaches the model as Claude Code's JSON output for these two events:
{"hookSpecificOutput": {"hookEventName": <event>, "additionalContext": <block>}}. A prompt
block leaves out the rows of this session that are still in the model's context (stored after
its last compaction). The project is the working directory's (`project_for`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cpersona.config import Settings
from cpersona.errors import InvalidArgument
from cpersona.host import capture_state
from cpersona.policy.projects import OperatingContext
from cpersona.portable import transcripts
from cpersona.service import capture, context_block

log = logging.getLogger(__name__)

HOST = "claude-code"
#: Folders walked up from the working directory looking for the repository root.
MAX_DEPTH = 40


@dataclass(frozen=True)
class HostContext:
    """What a hook is answered with: the tools, the settings of the answering process, the
    database's key (for the capture state) and the operating context (for projects)."""

    tools: capture.SessionTools
    settings: Settings
    db_key: str
    operating: OperatingContext


@dataclass(frozen=True)
class HookAnswer:
    output: str = ""
    note: str = ""


def repository_folder(cwd: str) -> Path:
    """The folder holding `.git` at or above `cwd`, else `cwd` itself."""
    start = Path(cwd).expanduser()
    for i, folder in enumerate((start, *start.parents)):
        if i >= MAX_DEPTH:
            break
        if (folder / ".git").exists():
            return folder
    return start


def project_for(ctx: HostContext, cwd: str, agent_id: str) -> str:
    """The project of a working directory (CPERSONA_HOOKS_PROJECT): none → '' (global);
    context → the operating context's [paths] / [defaults] entry, else ''; folder → that,
    else the repository folder's name."""
    mode = ctx.settings.hooks_project
    if mode == "none" or not cwd:
        return ""
    mapped = ctx.operating.project_for_dir(cwd, agent_id)
    if mapped is not None:
        return mapped
    return repository_folder(cwd).name if mode == "folder" else ""


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise InvalidArgument(key, "must be a string")
    return value


def _instant(stamp: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(stamp))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def in_context(session: capture.HostSession, since: str) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a row is one of `session`'s own turns still in the model's context: stored
    for this session at or after `since` (its last compaction; '' = the whole session)."""
    floor = _instant(since) if since else None

    def check(row: Mapping[str, Any]) -> bool:
        source = row.get("source")
        if not isinstance(source, Mapping) or source.get("id") != session.source_id:
            return False
        moment = _instant(row.get("timestamp"))
        return floor is None or moment is None or moment >= floor

    return check


def _session(ctx: HostContext, data: Mapping[str, Any], agent_id: str) -> capture.HostSession:
    sid = capture_state.valid_session_id(data.get("session_id"))
    return capture.HostSession(HOST, sid, agent_id, project_for(ctx, _text(data, "cwd"), agent_id))


def _context_output(event: str, block: context_block.Block) -> str:
    if not block.text:
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": block.text}},
                      ensure_ascii=False)


def session_start(ctx: HostContext, data: Mapping[str, Any], agent_id: str) -> HookAnswer:
    session = _session(ctx, data, agent_id)
    cwd = _text(data, "cwd")
    topic = " ".join(dict.fromkeys(w for w in (session.project_id, repository_folder(cwd).name if cwd else "") if w))
    block = context_block.session_block(ctx.tools, agent_id, session.project_id, topic,
                                        ctx.settings.hooks_session_tokens, skip=in_context(session, ""))
    return HookAnswer(_context_output("SessionStart", block),
                      f"SessionStart {session.session_id}: {block.rows} rows, ~{block.tokens} tokens")


def user_prompt(ctx: HostContext, data: Mapping[str, Any], agent_id: str) -> HookAnswer:
    session = _session(ctx, data, agent_id)
    prompt = _text(data, "prompt")
    transcript = _text(data, "transcript_path")
    turns = ctx.settings.hooks_prompt_turns
    before = [t.text for t in reversed(transcripts.last_turns(transcript, turns + 1))
              if t.text.strip() != prompt.strip()] if turns and transcript else []
    since = transcripts.last_compaction(transcript) if transcript else ""
    block = context_block.prompt_block(ctx.tools, agent_id, session.project_id,
                                       context_block.prompt_query(prompt, before[:turns]),
                                       ctx.settings.hooks_prompt_tokens, skip=in_context(session, since))
    return HookAnswer(_context_output("UserPromptSubmit", block),
                      f"UserPromptSubmit {session.session_id}: {block.rows} rows, ~{block.tokens} tokens")


def _capture(event: str, final: bool, archive: bool) -> Callable[[HostContext, Mapping[str, Any], str], HookAnswer]:
    def run(ctx: HostContext, data: Mapping[str, Any], agent_id: str) -> HookAnswer:
        if not ctx.settings.hooks_capture:
            return HookAnswer(note=f"{event}: capture off (CPERSONA_HOOKS_CAPTURE=false)")
        session = _session(ctx, data, agent_id)
        transcript = os.path.abspath(_text(data, "transcript_path"))
        if not os.path.isfile(transcript):
            raise InvalidArgument("transcript_path", f"is not a readable file: {transcript}")
        where = capture_state.state_file(ctx.db_key, session.session_id)
        with capture_state.locked(where):
            state = capture_state.load(where, transcript)
            reading = transcripts.read_turns(transcript, state.offset, final=final,
                                             tool_chars=ctx.settings.hooks_tool_output_chars)
            report = capture.store_turns(ctx.tools, session, reading.turns, {"cwd": _text(data, "cwd")})
            note = f"{event} {session.session_id}: {_described(report)}"
            if report.paused:
                return HookAnswer(note=note + " (persistence paused: nothing more stored)")
            _count(state, reading)
            state.offset = reading.resume_at
            if archive and ctx.settings.hooks_archive_episodes:
                note += _archive(ctx, session, state, _text(data, "cwd"))
            capture_state.save(where, state)
        return HookAnswer(note=note)

    return run


def _count(state: capture_state.SessionState, reading: transcripts.Reading) -> None:
    for turn in reading.turns:
        if turn.role == "user":
            state.user_turns += 1
            state.first_prompt = state.first_prompt or turn.text
        else:
            state.assistant_turns += 1
            state.tool_calls += turn.tools
        if turn.timestamp:
            state.first_at = state.first_at or turn.timestamp
            state.last_at = turn.timestamp


def _archive(ctx: HostContext, session: capture.HostSession, state: capture_state.SessionState, cwd: str) -> str:
    turns = state.user_turns + state.assistant_turns
    if not state.user_turns or turns == state.archived_turns:
        return ""
    place = repository_folder(cwd).name if cwd else ""
    facts = capture.SessionFacts(place, state.user_turns, state.assistant_turns, state.tool_calls,
                                 state.first_prompt, state.first_at, state.last_at)
    answer = capture.archive_session(ctx.tools, session, facts)
    if answer.get("persisted") is False or not answer.get("ok"):
        return f"; episode not archived: {answer.get('reason') or answer.get('error')}"
    state.archived_turns = turns
    return f"; episode ep:{answer.get('episode_id')} archived"


def _described(report: capture.CaptureReport) -> str:
    parts = [f"{report.stored} turns stored", f"{report.skipped} already kept"]
    if report.rejected:
        parts.append(f"{report.rejected} rejected ({report.errors[0]})")
    if report.truncated:
        parts.append(f"{report.truncated} cut to the content cap")
    if report.redacted:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(report.redacted.items()))
        parts.append(f"secrets redacted: {kinds}")
    return ", ".join(parts)


#: event → its handler.
EVENTS: dict[str, Callable[[HostContext, Mapping[str, Any], str], HookAnswer]] = {
    "SessionStart": session_start,
    "UserPromptSubmit": user_prompt,
    "PreCompact": _capture("PreCompact", final=False, archive=False),
    "Stop": _capture("Stop", final=True, archive=False),
    "SessionEnd": _capture("SessionEnd", final=True, archive=True),
}


def answer(ctx: HostContext, event: str, data: Any, agent_id: str | None = None) -> HookAnswer:
    """The answer to one hook event. Raises InvalidArgument for an unknown event or malformed
    input (the caller logs it; the hook exits 0 with nothing on stdout)."""
    handler = EVENTS.get(event)
    if handler is None:
        raise InvalidArgument("event", f"must be one of {', '.join(EVENTS)}; got {event!r}")
    if not isinstance(data, Mapping):
        raise InvalidArgument("input", "must be a JSON object (the hook's stdin)")
    return handler(ctx, data, agent_id or ctx.settings.hooks_agent_id)
