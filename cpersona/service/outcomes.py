"""The typed shapes of what the service answers: one TypedDict per tool body. They are
plain dicts at run time — the MCP layer serialises them as one JSON object, the CLI prints
them — so a type checker sees every field while the wire format stays exactly the JSON the
tools have always returned. Optional keys are marked `NotRequired`."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class StoreResult(TypedDict):
    """store: stored, skipped (duplicate / paused) or rejected (reason names the argument)."""

    ok: bool
    result: str  # "stored" | "skipped" | "rejected"
    id: NotRequired[int | str | None]
    embedded: NotRequired[bool]
    embedded_chars: NotRequired[int]  # the vector stands for the first n characters only
    locked: NotRequired[bool]
    reason: NotRequired[str]
    truncated: NotRequired[bool]
    original_length: NotRequired[dict[str, int]]
    max_length: NotRequired[int]
    timestamp: NotRequired[str]  # the UTC form stored, when the given timestamp was in another offset


class ArchiveResult(TypedDict):
    """archive_episode."""

    ok: bool
    episode_id: int | None
    embedded: NotRequired[bool]
    embedded_chars: NotRequired[int]
    error: NotRequired[str]
    truncated: NotRequired[bool]
    original_length: NotRequired[dict[str, int]]
    max_length: NotRequired[int]


class RowChange(TypedDict, total=False):
    """update_memory / delete_memory / delete_episode / lock_memory / unlock_memory:
    `ok` plus the changed id under the tool's key, or `error`."""

    ok: bool
    updated_id: int | None
    deleted_id: int | None
    locked_id: int | None
    unlocked_id: int | None
    embedded: bool
    embedded_chars: int
    error: str
    truncated: bool
    original_length: dict[str, int]
    max_length: int


class RecallResult(TypedDict):
    """recall: messages WORST → BEST (the last is the best match)."""

    messages: list[dict[str, Any]]
    advisory: NotRequired[dict[str, Any]]
    gate: NotRequired[dict[str, Any]]
    gate_fallback: NotRequired[bool]
    withheld: NotRequired[dict[str, Any]]
    note: NotRequired[str]
    full_content_budget_chars: NotRequired[int]
    update_notice: NotRequired[str]


class AgentErased(TypedDict):
    """delete_agent_data: the count of each kind of row removed."""

    ok: bool
    agent_id: str | None
    deleted_memories: int
    deleted_profiles: int
    deleted_episodes: int
    deleted_pending_tasks: int
    deleted_calibration: int
    calibration_warning: NotRequired[str]


class Profile(TypedDict):
    """get_profile: the agent's profile text ("" when it has none)."""

    profile: str


class ProfileUpdate(TypedDict):
    """update_profile."""

    ok: bool
    profiles_updated: int
    length: NotRequired[int]
    truncated: NotRequired[bool]
    max_length: NotRequired[int]
    reason: NotRequired[str]


#: Bodies whose fields are open-ended reports (calibration, queue status, listings).
Report = dict[str, Any]
