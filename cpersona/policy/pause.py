"""The no-persist pause ("off the record"), partitioned by the caller's `session_key`.

While paused, write tools write nothing and answer with their "skipped body": the normal
success skeleton with `persisted: false`, `dry_run: true`, any `id` → "no-persist", action
ids (`deleted_id`, `updated_id`, `locked_id`, `unlocked_id`, `episode_id`) → null, and a
`reason` naming the tool and the time left. Expiry is lazy (checked on each read).

A pause belongs to a bucket: the `session_key` the call declared (an opaque string the
server only compares; it is neither authentication nor a filter of stored data), or the
one bucket every keyless caller shares (`scope: "process"`: under stdio that is the
session, over streamable HTTP every keyless client of the process). The MCP edge sets the
key for the duration of a call with `session(key)`; background work (the task queue, the
startup calibration) runs without one and so follows the keyless bucket.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from cpersona.errors import InvalidArgument

#: Longest pause, and the pause length when none is given (seconds).
MAX_TTL_SECONDS = 86400
DEFAULT_TTL_SECONDS = 1800
#: Longest session key (characters), as the original CPersona bounds it.
MAX_SESSION_KEY = 256
#: Most session buckets paused at once; a further pause is refused (forgetting a pause
#: would silently resume writes, so entries are never evicted).
MAX_PAUSED_SESSIONS = 10_000
_ACTION_IDS = ("deleted_id", "updated_id", "locked_id", "unlocked_id", "episode_id")
_SESSION: ContextVar[str] = ContextVar("cpersona_session_key", default="")


@contextmanager
def session(key: Any) -> Iterator[None]:
    """Run the enclosed calls in the pause bucket of `key` ('' or None = keyless; the key
    is stripped). Raises InvalidArgument for a non-string or a key over 256 characters."""
    if key is None:
        key = ""
    if not isinstance(key, str):
        raise InvalidArgument("session_key", f"must be a string, got {type(key).__name__}")
    if len(key) > MAX_SESSION_KEY:
        raise InvalidArgument("session_key", f"is {len(key)} characters; the limit is {MAX_SESSION_KEY}")
    token = _SESSION.set(key.strip())
    try:
        yield
    finally:
        _SESSION.reset(token)


class Pause:
    """Deadlines per session bucket ('' = the keyless bucket). Thread-safe."""

    def __init__(self, clock=time.time) -> None:
        self._clock = clock
        self._deadlines: dict[str, float] = {}
        self._lock = threading.Lock()

    def _deadline(self, key: str) -> float | None:
        """The live deadline of `key` (expired ones are dropped). Call with the lock held."""
        deadline = self._deadlines.get(key)
        if deadline is not None and self._clock() >= deadline:
            del self._deadlines[key]
            return None
        return deadline

    def pause(self, ttl_seconds: int) -> dict[str, Any]:
        """Start (or replace) the caller's pause of `ttl_seconds` (1..MAX_TTL_SECONDS)."""
        key = _SESSION.get()
        with self._lock:
            if key not in self._deadlines and len(self._deadlines) >= MAX_PAUSED_SESSIONS:
                for other in list(self._deadlines):
                    self._deadline(other)
                if len(self._deadlines) >= MAX_PAUSED_SESSIONS:
                    raise InvalidArgument("session_key", f"{MAX_PAUSED_SESSIONS} sessions are paused already")
            self._deadlines[key] = self._clock() + ttl_seconds
            return {"paused": True, "expires_at": _iso(self._deadlines[key]), "ttl_seconds": ttl_seconds,
                    "scope": _scope(key)}

    def resume(self) -> dict[str, Any]:
        """End the caller's pause now."""
        key = _SESSION.get()
        with self._lock:
            was = self._deadline(key) is not None
            self._deadlines.pop(key, None)
        return {"paused": False, "was_active": was, "scope": _scope(key)}

    def active(self) -> bool:
        """Is the caller's bucket paused?"""
        with self._lock:
            return self._deadline(_SESSION.get()) is not None

    def status(self) -> dict[str, Any]:
        key = _SESSION.get()
        with self._lock:
            deadline = self._deadline(key)
        if deadline is None:
            return {"paused": False, "expires_at": None, "ttl_remaining_seconds": None, "scope": _scope(key)}
        left = max(0, int(deadline - self._clock()))
        return {"paused": True, "expires_at": _iso(deadline), "ttl_remaining_seconds": left, "scope": _scope(key)}

    def skipped(self, tool: str, body: dict[str, Any]) -> dict[str, Any]:
        """The skipped body of `tool` built from its success skeleton `body`."""
        with self._lock:
            deadline = self._deadline(_SESSION.get())
        left = None if deadline is None else max(0, int(deadline - self._clock()))
        if left is None:
            when = "TTL expired"
        elif left >= 60:
            when = f"{left // 60}m left"
        else:
            when = f"{left}s left"
        out = dict(body)
        if "id" in out:
            out["id"] = "no-persist"
        for key in _ACTION_IDS:
            if key in out:
                out[key] = None
        out.update(persisted=False, dry_run=True,
                   reason=f"no-persist active ({when}), {tool} skipped; call resume_persistence or wait")
        return out


def _scope(key: str) -> str:
    return "session" if key else "process"


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()
