"""Reading a Claude Code session transcript (the JSONL file named by a hook's
`transcript_path`) into conversation turns, verbatim.

The file holds one JSON object per line, appended as the session runs. The lines read here:

    {"type": "user", "uuid", "timestamp", "message": {"role": "user", "content": "text" | [blocks]}}
    {"type": "assistant", "uuid", "timestamp", "message": {"content": [blocks]}}
    {"type": "system", "subtype": "compact_boundary", "timestamp"}      (where a compaction happened)

Content blocks: `text` {text}, `tool_use` {name, input}, `tool_result` {content: text | [blocks]}
(carried by a user line), `thinking` and `image`. Every other line (summaries, snapshots,
queue operations) is passed over, as are lines marked `isSidechain` (a sub-agent's own
thread), `isMeta` (notices the host adds) or `isCompactSummary` (the host's generated summary).

A USER turn is one user line with text of its own: what the person typed, whole (command
markup the host writes for slash commands, and its "[Request interrupted" notices, are not).
An ASSISTANT turn is everything from the next assistant line up to the next user turn: its
text blocks in order, one line per tool call (`[tool Name] {input…}`), and the tool results —
of which at most `tool_chars` characters per turn are kept (the rest is named, not kept).
Thinking blocks are not kept (they are not part of what was said).

An assistant turn is complete once a user turn follows it; the last one is complete only when
the caller says the session has stopped (`final`). `Reading.resume_at` is the byte offset to
start the next reading from: after the last complete turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Characters of a tool call's input kept in its line of the turn.
TOOL_INPUT_CHARS = 300
#: Texts of user lines that the host wrote, not the person (slash-command markup, notices).
HOST_MARKUP = ("<command-name>", "<command-message>", "<command-args>", "<local-command-stdout>",
               "<local-command-stderr>", "[Request interrupted by user")
#: Bytes read from the end of the file for the last turns before a prompt.
TAIL_BYTES = 256 * 1024
#: Bytes searched (from the end) for the last compaction.
BOUNDARY_SCAN_BYTES = 8 * 1024 * 1024
_BOUNDARY = b'"compact_boundary"'


@dataclass(frozen=True)
class Turn:
    """One turn: `role` "user" | "assistant", its text, the uuid and timestamp of its first
    line ('' when the line has none), and the tool calls it made."""

    role: str
    text: str
    uuid: str
    timestamp: str
    tools: int = 0


@dataclass(frozen=True)
class Reading:
    """The complete turns read, where to resume, and how many lines were not JSON objects."""

    turns: tuple[Turn, ...]
    resume_at: int
    bad_lines: int = 0


@dataclass
class _Open:
    """A turn being assembled."""

    role: str
    uuid: str
    timestamp: str
    start: int
    parts: list[str] = field(default_factory=list)
    tools: int = 0
    tool_room: int = 0
    tool_dropped: int = 0

    def close(self) -> Turn | None:
        parts = list(self.parts)
        if self.tool_dropped:
            parts.append(f"[… {self.tool_dropped} more characters of tool output not kept]")
        text = "\n".join(p for p in parts if p.strip()).strip()
        return Turn(self.role, text, self.uuid, self.timestamp, self.tools) if text else None


def _lines(path: Path, start: int) -> Iterator[tuple[int, int, bytes]]:
    """(offset, end offset, line) of every complete line from `start` (a last line without
    its newline is still being written and is left for the next reading)."""
    with open(path, "rb") as f:
        f.seek(start)
        offset = start
        for raw in f:
            if not raw.endswith(b"\n"):
                return
            yield offset, offset + len(raw), raw
            offset += len(raw)


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text(content: Any) -> str:
    """A tool result's text (its image blocks named, not kept)."""
    if isinstance(content, str):
        return content
    parts = [b.get("text", "") if b.get("type") == "text" else f"[{b.get('type', 'block')}]"
             for b in _blocks(content)]
    return "\n".join(p for p in parts if isinstance(p, str))


def _own_text(blocks: list[dict[str, Any]]) -> str:
    """The text a person typed in a user line ('' for host markup and tool results)."""
    texts = [b.get("text") for b in blocks if b.get("type") == "text"]
    text = "\n".join(t for t in texts if isinstance(t, str)).strip()
    return "" if text.startswith(HOST_MARKUP) else text


def _kept(record: dict[str, Any]) -> bool:
    return record.get("type") in ("user", "assistant") and not any(
        record.get(flag) for flag in ("isSidechain", "isMeta", "isCompactSummary"))


class _Assembler:
    """Turns from records, in file order."""

    def __init__(self, tool_chars: int) -> None:
        self.tool_chars = tool_chars
        self.done: list[Turn] = []
        self.open: _Open | None = None
        self.last_end = 0

    def finish(self) -> None:
        if self.open is not None:
            turn = self.open.close()
            if turn is not None:
                self.done.append(turn)
            self.open = None

    def _start(self, role: str, record: dict[str, Any], offset: int) -> _Open:
        self.finish()
        uuid, stamp = record.get("uuid"), record.get("timestamp")
        self.open = _Open(role, uuid if isinstance(uuid, str) else "", stamp if isinstance(stamp, str) else "",
                          offset, tool_room=self.tool_chars)
        return self.open

    def add(self, record: dict[str, Any], offset: int, end: int) -> None:
        message = record.get("message")
        blocks = _blocks(message.get("content") if isinstance(message, dict) else None)
        if record["type"] == "user":
            own = _own_text(blocks)
            if own:
                self._start("user", record, offset).parts.append(own)
                self.finish()
            elif self.open is not None:
                for block in blocks:
                    if block.get("type") == "tool_result":
                        self._tool_output(self.open, _result_text(block.get("content")))
        else:
            turn = self.open if self.open is not None and self.open.role == "assistant" else \
                self._start("assistant", record, offset)
            for block in blocks:
                self._assistant_block(turn, block)
        self.last_end = end

    def _assistant_block(self, turn: _Open, block: dict[str, Any]) -> None:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            turn.parts.append(block["text"])
        elif kind == "tool_use":
            turn.tools += 1
            given = json.dumps(block.get("input", {}), ensure_ascii=False, sort_keys=True)
            cut = given if len(given) <= TOOL_INPUT_CHARS else given[:TOOL_INPUT_CHARS] + "…"
            turn.parts.append(f"[tool {block.get('name', '?')}] {cut}")

    @staticmethod
    def _tool_output(turn: _Open, text: str) -> None:
        kept = text[: turn.tool_room]
        turn.tool_room -= len(kept)
        turn.tool_dropped += len(text) - len(kept)
        if kept.strip():
            turn.parts.append(f"[tool output] {kept}")


def read_turns(path: str | Path, start: int = 0, final: bool = True, tool_chars: int = 8000) -> Reading:
    """The complete turns of the transcript at `path` from byte offset `start` (which must be
    a line start: a `resume_at`). `final` = the session has stopped, so its last assistant
    turn is complete. Raises OSError when the file cannot be read."""
    asm = _Assembler(tool_chars)
    bad = 0
    asm.last_end = start
    for offset, end, raw in _lines(Path(path), start):
        record = _record(raw)
        if record is None:
            bad += raw.strip() != b""
            asm.last_end = end
            continue
        if _kept(record):
            asm.add(record, offset, end)
        else:
            asm.last_end = end
    if final or asm.open is None:
        asm.finish()
        return Reading(tuple(asm.done), asm.last_end, bad)
    return Reading(tuple(asm.done), asm.open.start, bad)


def last_turns(path: str | Path, count: int) -> tuple[Turn, ...]:
    """The last `count` turns (text as read, tool output not kept) found in the last
    TAIL_BYTES of the transcript; () when the file cannot be read."""
    if count <= 0:
        return ()
    p = Path(path)
    try:
        size = p.stat().st_size
        start = 0
        if size > TAIL_BYTES:
            with open(p, "rb") as f:
                f.seek(size - TAIL_BYTES)
                f.readline()  # the rest of a line cut by the seek
                start = f.tell()
        return read_turns(p, start, final=True, tool_chars=0).turns[-count:]
    except OSError:
        return ()


def last_compaction(path: str | Path) -> str:
    """The timestamp of the transcript's last compaction boundary among its last
    BOUNDARY_SCAN_BYTES ('' when there is none there, or the file cannot be read)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - BOUNDARY_SCAN_BYTES)
            f.seek(start)
            buf = f.read()
    except OSError:
        return ""
    end = len(buf)
    while (at := buf.rfind(_BOUNDARY, 0, end)) >= 0:
        line_start = buf.rfind(b"\n", 0, at) + 1
        if line_start == 0 and start > 0:
            return ""  # the line began before the part read
        line_end = buf.find(b"\n", at)
        record = _record(buf[line_start: line_end if line_end >= 0 else len(buf)])
        stamp = record.get("timestamp") if record else None
        if isinstance(stamp, str) and record and record.get("subtype") == "compact_boundary":
            return stamp
        end = line_start
    return ""
