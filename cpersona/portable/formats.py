"""The file formats `import_memories` reads, turned into one list of rows to write.

* `cpersona-export/1.0` and `/1.1` — a header line, then memory / episode / profile lines
  (1.1 adds the declared associations: entity / mention / relation lines, read into
  `Parsed.graph` by portable/graph_lines.py, keyed on the file's ids — which every memory and
  episode row keeps as `file_id`). The header's counts must equal the lines found, else the
  file is truncated or inconsistent.
* the knowledge graph of the reference MCP memory server (`memory.jsonl`: lines
  `{"type": "entity", "name", "entityType", "observations": [...]}` and
  `{"type": "relation", "from", "to", "relationType"}`): one memory per observation
  ("name (type): observation"), one per relation ("from relationType to"), the structure
  kept in `metadata`.
* plain JSONL or CSV of `{content, timestamp?, agent_id?, tags?}` (optionally project_id,
  channel, msg_id, metadata): tags are kept as `metadata.tags`.

A value of the wrong type is a `FileDefect` naming the line and the field: nothing is
written from a file with a defect. Rows are plain dicts with the export's field names;
`source` / `metadata` are JSON text, `embedding` the decoded bytes (or None).
"""

from __future__ import annotations

import base64
import binascii
import csv
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cpersona.portable import graph_lines
from cpersona.portable.reader import FileDefect, json_lines
from cpersona.storage.records import Graph
from cpersona.util.time import parse_ts, utc_now_iso

VERSIONS = ("cpersona-export/1.0", "cpersona-export/1.1")
#: Header count key → the `_type` of the lines it counts.
COUNTED = {"memory_count": "memory", "episode_count": "episode", "profile_count": "profile",
           "entity_count": "entity", "mention_count": "mention", "relation_count": "relation"}
GRAPH = "mcp-memory-graph"
_TAG_SPLIT = re.compile(r"[;,|]")


@dataclass
class Item:
    """One row to write: kind memory | episode | profile, the line it came from, its fields."""

    kind: str
    line: int
    row: dict[str, Any]


@dataclass
class Parsed:
    """A whole file, understood: its format, header (cpersona exports), rows and notes."""

    format: str
    header: dict[str, Any] | None = None
    items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # lines per _type
    graph: Graph = field(default_factory=lambda: Graph({}, [], []))  # declared associations (1.1)


# ------------------------------------------------------------ field checks
def _get(obj: dict, key: str, line: int, kinds: tuple[type, ...], default: Any, what: str) -> Any:
    value = obj.get(key, default)
    if value is None and default is None:
        return None
    if value is None or not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join("true/false" if k is bool else {str: "a string", int: "an integer"}.get(k, k.__name__)
                            for k in kinds)
        raise FileDefect(f"{what}.{key} must be {names}, got {type(value).__name__}", line)
    return value


def _text(obj: dict, key: str, line: int, what: str, default: str | None = "") -> Any:
    return _get(obj, key, line, (str,), default, what)


def _json_text(value: Any, default: str) -> str:
    """A source / metadata value as the JSON text stored (absent → `default`)."""
    return default if value is None else json.dumps(value, ensure_ascii=False)


def _embedding(obj: dict, line: int) -> bytes | None:
    raw = obj.get("embedding_b64")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise FileDefect("memory.embedding_b64 must be base64 text", line)
    try:
        blob = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise FileDefect("memory.embedding_b64 is not valid base64", line) from None
    return blob if blob and len(blob) % 4 == 0 else None


def _agent(obj: dict, line: int, what: str, target: str) -> str | None:
    return target or _text(obj, "agent_id", line, what, default=None)


def _file_id(obj: dict) -> int | None:
    """The id a record has in the file (what its declarations name), when it is an integer."""
    value = obj.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ------------------------------------------------------- cpersona-export lines
def _memory(obj: dict, line: int, target: str) -> dict[str, Any] | None:
    agent = _agent(obj, line, "memory", target)
    if agent is None:
        return None
    return {"agent_id": agent, "msg_id": _text(obj, "msg_id", line, "memory"),
            "content": _text(obj, "content", line, "memory"), "source": _json_text(obj.get("source"), "{}"),
            "timestamp": _text(obj, "timestamp", line, "memory"),
            "metadata": _json_text(obj.get("metadata"), "{}"),
            "created_at": _text(obj, "created_at", line, "memory", None),
            "project_id": _text(obj, "project_id", line, "memory"), "channel": _text(obj, "channel", line, "memory"),
            "locked": int(_get(obj, "locked", line, (int, bool), 0, "memory")),
            "recall_count": _get(obj, "recall_count", line, (int,), 0, "memory"),
            "last_recalled_at": _text(obj, "last_recalled_at", line, "memory", None),
            "embedding": _embedding(obj, line), "file_id": _file_id(obj)}


def _episode(obj: dict, line: int, target: str) -> dict[str, Any] | None:
    agent = _agent(obj, line, "episode", target)
    if agent is None:
        return None
    keywords = obj.get("keywords", "")
    if isinstance(keywords, list) and all(isinstance(k, str) for k in keywords):
        keywords = " ".join(keywords)
    if not isinstance(keywords, str):
        raise FileDefect("episode.keywords must be a string or a list of strings", line)
    return {"agent_id": agent, "summary": _text(obj, "summary", line, "episode"), "keywords": keywords,
            "start_time": _text(obj, "start_time", line, "episode", None),
            "end_time": _text(obj, "end_time", line, "episode", None),
            "created_at": _text(obj, "created_at", line, "episode", None),
            "resolved": int(_get(obj, "resolved", line, (bool, int), False, "episode")),
            "project_id": _text(obj, "project_id", line, "episode"), "channel": _text(obj, "channel", line, "episode"),
            "embedding": None, "file_id": _file_id(obj)}


def _profile(obj: dict, line: int, target: str) -> dict[str, Any] | None:
    agent = _agent(obj, line, "profile", target)
    if agent is None:
        return None
    return {"agent_id": agent, "user_id": _text(obj, "user_id", line, "profile"),
            "content": _text(obj, "content", line, "profile"),
            "updated_at": _text(obj, "updated_at", line, "profile", None),
            "project_id": _text(obj, "project_id", line, "profile")}


_ROWS = {"memory": _memory, "episode": _episode, "profile": _profile}


def _cpersona(line: int, first: Any, lines: Iterator[tuple[int, Any]], target: str) -> Parsed:
    out = Parsed(VERSIONS[0])
    body: Iterator[tuple[int, Any]] = itertools.chain([(line, first)], lines)
    if first.get("_type") == "header":
        version = first.get("version")
        if version not in VERSIONS:
            raise FileDefect(f"export format {version!r} is not one this cpersona reads ({', '.join(VERSIONS)})", line)
        out.format, out.header, body = version, first, lines
    else:
        out.notes.append("the file has no header line: its row counts could not be checked")
    missing = 0
    for number, obj in body:
        if not isinstance(obj, dict):
            raise FileDefect("every line must be a JSON object", number)
        kind = obj.get("_type")
        if kind is None:
            continue  # lines without _type are ignored (the original's rule)
        if not isinstance(kind, str):
            raise FileDefect("_type must be a string", number)
        out.seen[kind] = out.seen.get(kind, 0) + 1
        if kind in _ROWS:
            row = _ROWS[kind](obj, number, target)
            if row is None:
                missing += 1
            else:
                out.items.append(Item(kind, number, row))
        elif kind in graph_lines.KINDS:
            graph_lines.add(out.graph, kind, obj, number, target)
        elif kind == "header":
            raise FileDefect("a second header line (two exports concatenated?)", number)
        else:
            out.notes.append(f"line {number}: unknown _type {kind!r} ignored")
    if missing:
        out.notes.append(f"{missing} rows without agent_id skipped (pass target_agent_id to import them)")
    _check_counts(out)
    return out


def _check_counts(parsed: Parsed) -> None:
    """Header counts (integers only) must equal the lines of each kind found."""
    if parsed.header is None:
        return
    for key, kind in COUNTED.items():
        want = parsed.header.get(key)
        if isinstance(want, int) and not isinstance(want, bool) and want != parsed.seen.get(kind, 0):
            raise FileDefect(f"the header announces {want} {kind} lines ({key}) but the file has "
                             f"{parsed.seen.get(kind, 0)}: the file is truncated or inconsistent")


# ------------------------------------------------------------- other servers
def _plain_row(obj: dict, line: int, target: str | None, what: str) -> dict[str, Any]:
    agent = target if target is not None else _text(obj, "agent_id", line, what, None)
    if agent is None:
        raise FileDefect(f"{what} has no agent_id and no target agent was given (target_agent_id / --agent)", line)
    stamp = _text(obj, "timestamp", line, what)
    if stamp and parse_ts(stamp) is None:
        raise FileDefect(f"{what}.timestamp must be ISO-8601 (e.g. 2026-11-29T10:00:00Z), got {stamp!r}", line)
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise FileDefect(f"{what}.metadata must be an object", line)
    tags = obj.get("tags")
    if isinstance(tags, str):
        tags = [t.strip() for t in _TAG_SPLIT.split(tags) if t.strip()]
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise FileDefect(f"{what}.tags must be a list of strings (or one string of ; separated tags)", line)
        metadata = {**metadata, "tags": tags}
    return {"agent_id": agent, "msg_id": _text(obj, "msg_id", line, what), "content": _text(obj, "content", line, what),
            "source": "{}", "timestamp": stamp or utc_now_iso(), "metadata": _json_text(metadata, "{}"),
            "created_at": None, "project_id": _text(obj, "project_id", line, what),
            "channel": _text(obj, "channel", line, what), "locked": 0, "recall_count": 0, "last_recalled_at": None,
            "embedding": None}


def _graph(lines: Iterator[tuple[int, Any]], target: str | None) -> Parsed:
    out = Parsed(GRAPH)
    for number, obj in lines:
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "entity":
            name, etype = _text(obj, "name", number, "entity"), _text(obj, "entityType", number, "entity")
            observations = obj.get("observations", [])
            if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
                raise FileDefect("entity.observations must be a list of strings", number)
            for obs in observations:
                meta = {"imported_from": GRAPH, "entity": name, "entity_type": etype}
                content = f"{name} ({etype}): {obs}" if etype else f"{name}: {obs}"
                out.items.append(Item("memory", number, _plain_row(
                    {"content": content, "metadata": meta}, number, target, "entity")))
        elif kind == "relation":
            rel = {k: _text(obj, k, number, "relation") for k in ("from", "relationType", "to")}
            out.items.append(Item("memory", number, _plain_row(
                {"content": f"{rel['from']} {rel['relationType']} {rel['to']}",
                 "metadata": {"imported_from": GRAPH, "relation": rel}}, number, target, "relation")))
        else:
            raise FileDefect('expected a knowledge-graph line {"type": "entity" | "relation", ...}', number)
        out.seen[kind] = out.seen.get(kind, 0) + 1
    return out


def _plain_jsonl(lines: Iterator[tuple[int, Any]], target: str | None) -> Parsed:
    out = Parsed("jsonl")
    for number, obj in lines:
        if not isinstance(obj, dict) or "content" not in obj:
            raise FileDefect('expected an object with "content"', number)
        out.items.append(Item("memory", number, _plain_row(obj, number, target, "row")))
    return out


def _csv(lines: list[str], target: str | None) -> Parsed:
    out = Parsed("csv")
    reader = csv.DictReader(line + "\n" for line in lines)
    if not reader.fieldnames or "content" not in reader.fieldnames:
        raise FileDefect('a CSV file needs a header row with a "content" column', 1)
    try:
        for record in reader:
            if None in record:
                raise FileDefect("more cells than header columns", reader.line_num)
            row = {k: v for k, v in record.items() if v not in (None, "")}
            row.setdefault("content", "")
            out.items.append(Item("memory", reader.line_num, _plain_row(row, reader.line_num, target, "row")))
    except csv.Error as err:
        raise FileDefect(f"not valid CSV ({err})", reader.line_num) from None
    return out


def parse(lines: list[str], suffix: str, target: str | None) -> Parsed:
    """Understand a whole import file, given as its lines (see the module doc). `target` =
    the agent every row goes to; '' or None = keep each row's agent_id (a row of another
    server's format without one is then a defect).

    Raises:
        FileDefect: the first problem found, naming its line.
    """
    if suffix.lower() == ".csv":
        return _csv(lines, target or None)
    values = json_lines(lines)  # parsed one line at a time: the file's text and its rows are never both whole
    number, first = next(values, (0, None))
    if number == 0:
        raise FileDefect("the file is empty")
    if not isinstance(first, dict):
        raise FileDefect("expected a JSON object per line", number)
    if "_type" in first:
        return _cpersona(number, first, values, target or "")
    rest = itertools.chain([(number, first)], values)
    if first.get("type") in ("entity", "relation"):
        return _graph(rest, target or None)
    if "content" in first:
        return _plain_jsonl(rest, target or None)
    raise FileDefect("unrecognised format: expected a cpersona export (header line), a knowledge-graph memory.jsonl "
                     '(lines with "type": "entity"/"relation") or JSONL rows with "content"', number)
