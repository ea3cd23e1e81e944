"""Argument checks shared by every entry point (MCP tools, CLI, direct service callers).

Each check returns the clean value or raises `InvalidArgument(argument, rule)`; none of
them touches the database, so a rejected call changes nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, overload

from cpersona.errors import InvalidArgument
from cpersona.util.time import parse_ts, utc_text

#: Longest accepted identifier (agent_id, project_id, channel, msg_id, source_id).
MAX_ID_CHARS = 512
MAX_TIMESTAMP_CHARS = 64
MAX_LIMIT = 100
#: Longest accepted recall query.
MAX_QUERY_CHARS = 16000
#: SQLite's largest INTEGER PRIMARY KEY.
MAX_ROW_ID = 2**63 - 1


def text(argument: str, value: Any, *, max_chars: int, allow_empty: bool = True) -> str:
    """A string of at most `max_chars` characters (non-blank unless `allow_empty`)."""
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArgument(argument, "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(argument, "must be valid Unicode text (it contains a lone surrogate)") from None
    if len(value) > max_chars:
        raise InvalidArgument(argument, f"is {len(value)} characters; the limit is {max_chars}")
    if not allow_empty and not value.strip():
        raise InvalidArgument(argument, "must not be empty")
    return value


@overload
def identifier(argument: str, value: Any, *, allow_none: Literal[False] = False) -> str: ...


@overload
def identifier(argument: str, value: Any, *, allow_none: bool) -> str | None: ...


def identifier(argument: str, value: Any, *, allow_none: bool = False) -> str | None:
    """agent_id / project_id / channel / msg_id: a string ≤ MAX_ID_CHARS ('' allowed)."""
    if value is None and allow_none:
        return None
    return text(argument, value, max_chars=MAX_ID_CHARS)


def limit(argument: str, value: Any, *, maximum: int = MAX_LIMIT, minimum: int = 1) -> int:
    """An integer in minimum..maximum (booleans are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an integer, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidArgument(argument, f"must be between {minimum} and {maximum}, got {value}")
    return value


def clamped_limit(argument: str, value: Any, *, maximum: int) -> int:
    """A listing's row count clamped to 0..maximum, as the original CPersona clamps it
    (an integer is required; booleans are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an integer, got {type(value).__name__}")
    return min(max(value, 0), maximum)


def query(value: Any) -> str:
    """A recall query: NUL characters separate words (as in the original CPersona) and
    become spaces; otherwise the rules of `text`."""
    if isinstance(value, str) and "\x00" in value:
        value = value.replace("\x00", " ")
    return text("query", value, max_chars=MAX_QUERY_CHARS)


def boolean(argument: str, value: Any) -> bool:
    """A real boolean (no truthy strings or integers)."""
    if not isinstance(value, bool):
        raise InvalidArgument(argument, f"must be true or false, got {type(value).__name__}")
    return value


#: The end of a time already in UTC.
_UTC_SUFFIX = re.compile(r"(Z|[+-]00:?00)$")


def timestamp(argument: str, value: Any) -> str:
    """An ISO-8601 timestamp (e.g. 2026-11-29T10:00:00Z; naive means UTC). A UTC time
    (`Z`, `+00:00`) is returned as given; any other is returned as the same instant in UTC,
    `YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00` (the form the server writes for "now"), so that
    stored times compare as text in time order: listings and the scan window order by the
    text, and a `+09:00` time beside UTC ones would sort up to 9 h off (the health check
    `timestamp_format_drift`). An instant outside years 1–9999 in UTC is kept as given.
    Raises InvalidArgument naming `argument` for anything else."""
    text(argument, value, max_chars=MAX_TIMESTAMP_CHARS)
    if parse_ts(value) is None:
        raise InvalidArgument(argument, f"must be an ISO-8601 timestamp like 2026-11-29T10:00:00Z, got {value!r}")
    return value if _UTC_SUFFIX.search(value.strip()) else utc_text(value) or value


def json_object(argument: str, value: Any, *, max_chars: int) -> str:
    """A JSON object (dict) whose serialised form is at most `max_chars`; returns the JSON text."""
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise InvalidArgument(argument, f"must be an object, got {type(value).__name__}")
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(argument, f"must be JSON-serialisable ({err})") from None
    if len(encoded) > max_chars:
        raise InvalidArgument(argument, f"is {len(encoded)} characters as JSON; the limit is {max_chars}")
    return encoded


def string_list(argument: str, value: Any, *, max_items: int, max_chars: int) -> tuple[str, ...]:
    """A list of at most `max_items` strings, each at most `max_chars`."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise InvalidArgument(argument, f"must be a list of strings, got {type(value).__name__}")
    if len(value) > max_items:
        raise InvalidArgument(argument, f"has {len(value)} items; the limit is {max_items}")
    return tuple(text(f"{argument}[{i}]", item, max_chars=max_chars) for i, item in enumerate(value))


#: The ref prefix of each row kind, as recall and list_* print it ("mem:12", "ep:3").
REF_KINDS = {"memory_id": "mem", "episode_id": "ep"}


def row_id(argument: str, value: Any) -> int:
    """A positive integer row id. Also accepted: the row's ref as recall prints it
    ("mem:12" for a memory_id, "ep:3" for an episode_id) or the id as a digit string.
    Booleans are not integers."""
    if isinstance(value, str):
        value = _ref_number(argument, value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an integer id or a ref like 'mem:12', got {type(value).__name__}")
    if not 1 <= value <= MAX_ROW_ID:
        raise InvalidArgument(argument, f"must be an id between 1 and {MAX_ROW_ID}, got {value}")
    return value


def _ref_number(argument: str, value: str) -> int:
    kind = REF_KINDS.get(argument, "")
    head, sep, number = value.strip().partition(":")
    if not sep:
        head, number = kind, head
    if head != kind or not (number.isascii() and number.isdigit()):
        other = next((a for a, k in REF_KINDS.items() if k == head and a != argument), None)
        hint = f" ({value!r} names a row of the other kind: pass it as {other})" if other else ""
        raise InvalidArgument(argument, f"must be an id like 12 or a ref like '{kind}:12', got {value!r}{hint}")
    return int(number)


def owner(value: Any) -> str | None:
    """The optional ownership check of the row tools: None or '' → no check; else the agent."""
    agent = identifier("agent_id", value, allow_none=True)
    return agent or None


def required_agent(value: Any, purpose: str, argument: str = "agent_id") -> str:
    """A non-empty agent id passed as `argument`; `purpose` completes "is required: name the agent …"."""
    agent = identifier(argument, value)
    if agent == "":
        raise InvalidArgument(argument, "is required: name the agent" + (f" {purpose}" if purpose else ""))
    return agent
