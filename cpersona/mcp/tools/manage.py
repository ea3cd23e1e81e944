"""MCP tools for managing memory: edit, protect, delete, pause, queue, operating context.

Write tools answer with their "skipped body" while persistence is paused (`persisted: false`,
action ids null) and write nothing. A refused change (absent, locked, not owned) is
`{ok: false, error}`; a schema violation is the SDK's error result naming the argument.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field, StrictInt, StrictStr

from cpersona.mcp.registry import DELETE, OVERWRITE, READ, WRITE, add_tools
from cpersona.mcp.results import call
from cpersona.policy.pause import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS
from cpersona.policy.validate import MAX_ROW_ID
from cpersona.service.engine import Engine

MemoryId = Annotated[
    StrictInt,
    Field(ge=1, le=MAX_ROW_ID, description="The memory's id: the N of its ref 'mem:N' (recall, list_memories)."),
]
EpisodeId = Annotated[
    StrictInt,
    Field(ge=1, le=MAX_ROW_ID, description="The episode's id: the N of its ref 'ep:N' (recall, list_episodes)."),
]
Owner = Annotated[
    StrictStr,
    Field(description="Your agent id: the change is refused unless the row belongs to it. "
                      "'' (default) = no ownership check."),
]


def register(app: MCPServer, engine: Engine) -> None:
    """Add the eleven management tools to `app`, bound to `engine`."""

    def pause_persistence(
        ttl_seconds: Annotated[
            StrictInt, Field(ge=1, le=MAX_TTL_SECONDS,
                             description="How long to pause, in seconds (1–86400, default 1800 = 30 min).")
        ] = DEFAULT_TTL_SECONDS,
    ) -> str:
        """Stop persisting: for ttl_seconds every write tool (store, archive_episode, update/delete/lock…)
        writes nothing and answers {persisted: false, reason}. Use it for an off-the-record part of a
        session. Applies to the whole server process (every client of it). Calling again replaces the
        deadline. Returns {paused: true, expires_at, ttl_seconds, scope: "process"}.
        """
        return call("pause_persistence", lambda: engine.pause_persistence(ttl_seconds))

    def resume_persistence() -> str:
        """End a pause now; writes persist again. Returns {paused: false, was_active, scope}."""
        return call("resume_persistence", engine.resume_persistence)

    def persistence_status() -> str:
        """Is persistence paused? Returns {paused, expires_at, ttl_remaining_seconds, scope}."""
        return call("persistence_status", engine.persistence_status)

    def get_operating_context(
        section: Annotated[StrictStr, Field(description="A doctrine section name; '' (default) = the overview.")] = "",
    ) -> str:
        """Read the operator's operating context (valid project ids, per-agent default projects,
        doctrine sections). Overview: {ok, context_revision, instructions_summary, registry:
        {project_ids, enforce}, defaults, doctrine_sections}; with section: {ok, section, body}.
        {ok: false, enabled: false, error} when none is configured (or the file is invalid).
        Pass project_id "@auto" to store/recall/list tools to use your default project.
        """
        return call("get_operating_context", lambda: engine.get_operating_context(section))

    def update_memory(
        memory_id: MemoryId,
        content: Annotated[
            StrictStr, Field(description="The corrected full text that replaces the old content (non-empty).")
        ],
        agent_id: Owner = "",
    ) -> str:
        """Correct a stored fact: replace memory memory_id's content (re-embedded; id, source,
        timestamp, channel and project kept). The only way to change a memory — store never
        overwrites. Refused while the memory is locked. Returns {ok: true, updated_id, embedded}
        or {ok: false, error}.
        """
        return call("update_memory", lambda: engine.update_memory(memory_id, content, agent_id))

    def delete_memory(memory_id: MemoryId, agent_id: Owner = "") -> str:
        """Delete one memory for good (e.g. a wrong or obsolete fact). Refused while it is locked.
        Returns {ok: true, deleted_id} or {ok: false, error}.
        """
        return call("delete_memory", lambda: engine.delete_memory(memory_id, agent_id))

    def delete_episode(episode_id: EpisodeId, agent_id: Owner = "") -> str:
        """Delete one archived session summary for good. Returns {ok: true, deleted_id} or {ok: false, error}."""
        return call("delete_episode", lambda: engine.delete_episode(episode_id, agent_id))

    def lock_memory(memory_id: MemoryId, agent_id: Owner = "") -> str:
        """Protect a memory from update_memory and delete_memory (and automatic repairs) until
        unlock_memory. Protection only: it does not rank the memory higher. Idempotent.
        Returns {ok: true, locked_id} or {ok: false, error}.
        """
        return call("lock_memory", lambda: engine.lock_memory(memory_id, agent_id))

    def unlock_memory(memory_id: MemoryId, agent_id: Owner = "") -> str:
        """Remove lock_memory's protection so the memory can be edited or deleted again. Idempotent.
        Returns {ok: true, unlocked_id} or {ok: false, error}.
        """
        return call("unlock_memory", lambda: engine.unlock_memory(memory_id, agent_id))

    def delete_agent_data(
        agent_id: Annotated[StrictStr, Field(description="The agent whose data to erase (required, non-empty).")],
    ) -> str:
        """Erase EVERYTHING of one agent: all its memories (locked ones too), episodes, profile,
        queued tasks and calibration. Cannot be undone. Returns {ok: true, agent_id,
        deleted_memories, deleted_episodes, deleted_profiles, deleted_pending_tasks, deleted_calibration}.
        """
        return call("delete_agent_data", lambda: engine.delete_agent_data(agent_id))

    def get_queue_status() -> str:
        """Background work queue (embedding of memories stored while the embedding backend was
        unavailable). Returns {enabled, running, state, pending, failed, retrying, retries,
        max_retries, retry_delay, oldest_pending_age_s, waiting_reason?, recent_failures?}.
        An empty queue (pending 0, failed 0) is the normal, healthy reading.
        """
        return call("get_queue_status", engine.queue_status)

    tools = (
        (pause_persistence, WRITE), (resume_persistence, WRITE), (persistence_status, READ),
        (get_operating_context, READ), (update_memory, OVERWRITE), (delete_memory, DELETE), (delete_episode, DELETE),
        (lock_memory, WRITE), (unlock_memory, WRITE), (delete_agent_data, DELETE), (get_queue_status, READ),
    )
    add_tools(app, tools)
