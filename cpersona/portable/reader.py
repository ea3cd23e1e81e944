"""Reading an import file strictly: bounded in size, UTF-8, one JSON value per line.

Everything that can go wrong is found BEFORE anything is written, and reported as a
`FileDefect` naming the line and the problem:
* larger than the cap (CPERSONA_MAX_IMPORT_BYTES) — checked on the file's size before a
  byte is read, and again while reading (a file that grows is cut off at the cap);
* not UTF-8 — the line and byte offset of the first bad byte;
* a line that is not JSON (a truncated last line), or JSON nested deeper than
  `MAX_DEPTH` (parsing it would exhaust the stack) — the line number.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cpersona.util.threads import yield_gil

#: Deepest JSON nesting accepted on one line (an export line is 3 levels deep).
MAX_DEPTH = 64
#: Lines between two yields of the interpreter to other threads.
YIELD_EVERY = 256


class FileDefect(ValueError):
    """The import file is unusable; `str(err)` names the line (when there is one) and the
    problem. Nothing has been written when it is raised."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


def read_lines(path: Path, max_bytes: int) -> list[str]:
    """The file's lines as text (line endings removed). Raises FileDefect (not a regular
    file, larger than `max_bytes`, not UTF-8) or OSError (unreadable).

    Read and decoded line by line, so no single step holds the interpreter long (a recall
    served by another thread of the process is not held up) and a bad byte is reported with
    its line."""
    info = path.stat()
    if not path.is_file():
        raise FileDefect(f"{path} is not a regular file")
    if info.st_size > max_bytes:
        raise FileDefect(f"{path} is {info.st_size:,} bytes, larger than the import limit of {max_bytes:,} bytes "
                         "(CPERSONA_MAX_IMPORT_BYTES); split the file or raise the limit")
    lines: list[str] = []
    size = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            size += len(raw)
            if size > max_bytes:
                raise FileDefect(f"{path} grew past the import limit of {max_bytes:,} bytes while it was read")
            try:
                lines.append(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError as err:
                offset = size - len(raw) + err.start
                raise FileDefect(f"not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {offset}); save the file "
                                 "as UTF-8", number) from None
            if number % YIELD_EVERY == 0:
                yield_gil()
    return lines


def _depth(text: str) -> int:
    """Deepest bracket nesting outside strings (a linear scan, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_line(text: str, line: int) -> Any:
    """One JSON value. Raises FileDefect (nested deeper than MAX_DEPTH, not JSON)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise FileDefect(f"JSON nested deeper than {MAX_DEPTH} levels; an export line is never that deep", line)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise FileDefect(f"not valid JSON ({err}); the file may be truncated or damaged", line) from None


def json_lines(lines: list[str]) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line."""
    for number, raw in enumerate(lines, 1):
        if raw.strip():
            yield number, parse_line(raw, number)
        if number % YIELD_EVERY == 0:
            yield_gil()
