"""Process-wide no-persist pause ("off the record").

While paused, write tools write nothing and answer with their "skipped body": the normal
success skeleton with `persisted: false`, `dry_run: true`, any `id` → "no-persist", action
ids (`deleted_id`, `updated_id`, `locked_id`, `unlocked_id`, `episode_id`) → null, and a
`reason` naming the tool and the time left. Expiry is lazy (checked on each read).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

#: Longest pause, and the pause length when none is given (seconds).
MAX_TTL_SECONDS = 86400
DEFAULT_TTL_SECONDS = 1800
_ACTION_IDS = ("deleted_id", "updated_id", "locked_id", "unlocked_id", "episode_id")


class Pause:
    """One deadline shared by every client of this process. Thread-safe."""

    def __init__(self, clock=time.time) -> None:
        self._clock = clock
        self._deadline: float | None = None
        self._lock = threading.Lock()

    def _expire(self) -> None:
        if self._deadline is not None and self._clock() >= self._deadline:
            self._deadline = None

    def pause(self, ttl_seconds: int) -> dict[str, Any]:
        """Start (or replace) a pause of `ttl_seconds` (1..MAX_TTL_SECONDS)."""
        with self._lock:
            self._deadline = self._clock() + ttl_seconds
            return {"paused": True, "expires_at": _iso(self._deadline), "ttl_seconds": ttl_seconds, "scope": "process"}

    def resume(self) -> dict[str, Any]:
        with self._lock:
            self._expire()
            was = self._deadline is not None
            self._deadline = None
        return {"paused": False, "was_active": was, "scope": "process"}

    def active(self) -> bool:
        with self._lock:
            self._expire()
            return self._deadline is not None

    def status(self) -> dict[str, Any]:
        with self._lock:
            self._expire()
            if self._deadline is None:
                return {"paused": False, "expires_at": None, "ttl_remaining_seconds": None, "scope": "process"}
            left = max(0, int(self._deadline - self._clock()))
            return {"paused": True, "expires_at": _iso(self._deadline), "ttl_remaining_seconds": left,
                    "scope": "process"}

    def skipped(self, tool: str, body: dict[str, Any]) -> dict[str, Any]:
        """The skipped body of `tool` built from its success skeleton `body`."""
        with self._lock:
            self._expire()
            left = None if self._deadline is None else max(0, int(self._deadline - self._clock()))
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


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()
