"""JSON helpers shared by the storage and response layers."""

from __future__ import annotations

import json
from typing import Any


def loads_or_empty(text: Any) -> Any:
    """`json.loads(text)`, or `{}` when `text` is not valid JSON (stored `source` /
    `metadata` written by other tools may be malformed; a read never fails on it). The empty
    object — what most rows store — is answered without the parser (a recall reads ~60 rows)."""
    if text == "{}":
        return {}
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return {}
