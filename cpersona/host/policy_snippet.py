"""The memory-policy snippet: when an agent should recall, store and archive, written into
the instructions file its host reads (AGENTS.md for Codex and other AGENTS.md readers,
CLAUDE.md for Claude Code) between two marker comments, so writing it again replaces it and
removing it leaves the rest of the file as it was.

Where each host reads it (`target`): Codex — `AGENTS.md` in the project, or
`$CODEX_HOME/AGENTS.md` (default ~/.codex) for every project; Claude Code — `CLAUDE.md` in the
project, or `~/.claude/CLAUDE.md` ($CLAUDE_CONFIG_DIR) for every project; `agents-md` — the
project's `AGENTS.md` only.
"""

from __future__ import annotations

import os
from pathlib import Path

START = "<!-- cpersona:memory-policy:start -->"
END = "<!-- cpersona:memory-policy:end -->"


def claude_dir() -> Path:
    """Claude Code's per-user folder: $CLAUDE_CONFIG_DIR, else ~/.claude."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude").expanduser()


def target(host: str, scope: str, cwd: Path) -> Path:
    """The instructions file of `host` ("codex", "agents-md", "claude-code") for `scope`
    ("user": every project; "project" / "local": the one in `cwd`). Raises ValueError for
    a host that has no file for the scope."""
    if scope == "user":
        if host == "codex":
            return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser() / "AGENTS.md"
        if host == "claude-code":
            return claude_dir() / "CLAUDE.md"
        raise ValueError(f"--host {host} has no per-user file: use --scope project")
    return cwd / ("CLAUDE.md" if host == "claude-code" else "AGENTS.md")


def snippet(agent_id: str, hooks: bool) -> str:
    """The policy text between its markers; `hooks` = the host's hooks are installed (they
    bring memories into context and keep the session's turns)."""
    kept = ("The hooks already put related memories in your context (a <cpersona-memory> block) and keep "
            "this session's turns verbatim; recall only for what that block does not hold, and store the "
            "distilled fact anyway." if hooks else
            "Nothing is remembered unless you store it.")
    return "\n".join([
        START,
        "## Memory (cpersona)",
        "",
        f"You have persistent memory through the cpersona MCP server. Use agent_id \"{agent_id}\" in every "
        "call, so your calls and this host's hooks share one memory.",
        "",
        "- Recall before you answer when the user refers to earlier work, decisions, preferences or names you "
        "do not know: `recall(agent_id, query)` — the best match is the LAST row; an empty answer means nothing "
        "stored relates.",
        "- Store what should outlive this session, one fact per call, in the user's words: decisions and their "
        "reasons, preferences, names, commitments, fixes that worked — `store(agent_id, content)`. Never store "
        "secrets. " + kept,
        "- At the end of a task or session archive it: `archive_episode(agent_id, summary)` with your own "
        "summary (what was done, what is open).",
        "- To forget: find the rows with `recall` or `list_memories` and `delete_memory` their refs. Off the "
        "record: `pause_persistence` (nothing is stored until `resume_persistence`).",
        END,
    ])


def upsert(text: str, block: str) -> tuple[str, bool]:
    """`text` with the marked block replaced by `block` (appended when there is none);
    whether anything changed. Raises ValueError when only one marker is there."""
    start, end = text.find(START), text.find(END)
    if (start < 0) != (end < 0) or (start >= 0 and end < start):
        raise ValueError(f"the file holds a broken cpersona block (one of {START} / {END} without the other)")
    if start < 0:
        new = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text.strip() else "") + block + "\n"
    else:
        new = text[:start] + block + text[end + len(END):]
    return new, new != text


def remove(text: str) -> tuple[str, bool]:
    """`text` without the marked block (and the blank line written before it)."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        return text, False
    head, tail = text[:start], text[end + len(END):]
    if tail.startswith("\n"):
        tail = tail[1:]
    if head.endswith("\n\n"):
        head = head[:-1]
    return head + tail, True
