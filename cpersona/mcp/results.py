"""How tool results travel: one JSON object in one text block.

`call(fn)` runs a core call and turns the failure kinds into the documented shapes:
an `InvalidArgument` becomes `{ok: false, error}` naming the argument; a `StorageUnavailable`
(busy past the busy timeout, disk full, I/O error, corrupt file) becomes `{ok: false, error,
error_kind, retryable, retry_after_ms?}` — the storage layer logs each condition once, so
no traceback per call; an unexpected exception becomes `{ok: false, error: "internal
error: …"}` — logged with its traceback to stderr, never swallowed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from cpersona.errors import InvalidArgument, StorageUnavailable
from cpersona.policy.pause import session

log = logging.getLogger("cpersona.mcp")


def dump(payload: Mapping[str, Any]) -> str:
    """Serialise a result: UTF-8 text kept verbatim (no \\u escapes)."""
    return json.dumps(payload, ensure_ascii=False)


def call(tool: str, fn: Callable[[], Mapping[str, Any]], failure: dict[str, Any] | None = None,
         session_key: str = "") -> str:
    """Run `fn` and serialise its dict. `failure` holds tool-specific keys added to an
    error result (e.g. `messages: []` for recall). `session_key` (the caller's declared
    session) selects the no-persist pause bucket for the call (policy/pause.py)."""
    try:
        with session(session_key):
            return dump(fn())
    except InvalidArgument as err:
        return dump({"ok": False, "error": str(err), **(failure or {})})
    except StorageUnavailable as err:
        return dump({"ok": False, "error": str(err), **err.fields(), **(failure or {})})
    except Exception as err:
        log.exception("tool %s failed", tool)
        return dump({"ok": False, "error": f"internal error in {tool}: {type(err).__name__}: {err}", **(failure or {})})
