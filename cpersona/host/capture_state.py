"""How far the hooks have kept each session: a small JSON file per (database, session) in
the per-user state directory (`<state>/sessions/<db digest>-<session id>.json`), so a Stop,
PreCompact or SessionEnd hook reads only the part of the transcript it has not stored yet.

The file is a hint, never the record: without it (deleted, unreadable, another transcript
file) the whole transcript is read again, and `store`'s message-id dedup stores nothing twice.
Its counts feed the session's episode. Files untouched for PRUNE_DAYS are removed when a new
one is written. While a capture runs, the file's `flock` keeps a second capture of the same
session waiting (POSIX; elsewhere dedup alone keeps turns single).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from cpersona.errors import InvalidArgument
from cpersona.util.places import state_dir

#: What a session id may be (Claude Code's are UUIDs); anything else is refused, never a path.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
PRUNE_DAYS = 30


@dataclass
class SessionState:
    """A session's progress: the transcript read, the byte offset to resume from, its
    counts so far, its first prompt and time span, and the turn count at its last episode."""

    transcript: str = ""
    offset: int = 0
    user_turns: int = 0
    assistant_turns: int = 0
    tool_calls: int = 0
    first_prompt: str = ""
    first_at: str = ""
    last_at: str = ""
    archived_turns: int = 0


def valid_session_id(value: object) -> str:
    """The session id. Raises InvalidArgument naming the rule."""
    if not isinstance(value, str) or not SESSION_ID.fullmatch(value):
        raise InvalidArgument("session_id", "must be 1-128 letters, digits, '_', '.' or '-' (starting with a letter "
                                            "or digit)")
    return value


def state_file(db_key: str, session_id: str) -> Path:
    digest = hashlib.sha256(db_key.encode("utf-8")).hexdigest()[:16]
    return state_dir() / "sessions" / f"{digest}-{valid_session_id(session_id)}.json"


def load(path: Path, transcript: str) -> SessionState:
    """The saved state of `transcript`, or a fresh one (missing, unreadable, or kept for
    another transcript file, or a file shorter than the offset: read it whole again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(SessionState)}
        state = SessionState(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError):
        return SessionState(transcript=transcript)
    try:
        size = os.path.getsize(transcript)
    except OSError:
        size = -1
    if state.transcript != transcript or not isinstance(state.offset, int) or not 0 <= state.offset <= size:
        return SessionState(transcript=transcript)
    return state


def save(path: Path, state: SessionState) -> None:
    """Write `state` atomically (mode 0600); prune old files when this one is new."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fresh = not path.exists()
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(state), f, ensure_ascii=False)
    os.replace(tmp, path)
    if fresh:
        _prune(path.parent)


def _prune(folder: Path) -> None:
    horizon = time.time() - PRUNE_DAYS * 86400
    for old in [*folder.glob("*.json"), *folder.glob("*.lock")]:
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < horizon:
                old.unlink()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the session's lock (a `.lock` file beside its state) while the block runs."""
    try:
        import fcntl
    except ImportError:  # not POSIX: dedup keeps turns single
        yield
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
