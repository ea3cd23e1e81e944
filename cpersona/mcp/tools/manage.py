"""MCP tools for managing memory: edit, protect, delete, pause, queue, operating context.

Write tools answer with their "skipped body" while persistence is paused (`persisted: false`,
action ids null) and write nothing. A refused change (absent, locked, not owned) is
`{ok: false, error}`; a schema violation is the SDK's error result naming the argument.
Row tools take the row's id or its ref as recall prints it ("mem:12", "ep:3").
"""

# No `from __future__ import annotations`: pydantic reads these annotations at registration.
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field, StrictInt, StrictStr

from cpersona.mcp.registry import DELETE, OVERWRITE, READ, WRITE, add_tools
from cpersona.mcp.results import call
from cpersona.mcp.tools.schemas import WHOLE, EpisodeRef, MemoryRef, Owner, SessionKey
from cpersona.policy.pause import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS
from cpersona.service.engine import Engine


def register(app: MCPServer, engine: Engine) -> None:
    """Add the eleven management tools to `app`, bound to `engine`."""

    def pause_persistence(
        ttl_seconds: Annotated[StrictInt, Field(ge=1, le=MAX_TTL_SECONDS), WHOLE] = DEFAULT_TTL_SECONDS,
        session_key: SessionKey = "",
    ) -> str:
        """Off the record for ttl_seconds: write tools write nothing (persisted: false)."""
        return call("pause_persistence", lambda: engine.pause_persistence(ttl_seconds), session_key=session_key)

    def resume_persistence(session_key: SessionKey = "") -> str:
        """End the pause now."""
        return call("resume_persistence", engine.resume_persistence, session_key=session_key)

    def persistence_status(session_key: SessionKey = "") -> str:
        """Is persistence paused?"""
        return call("persistence_status", engine.persistence_status, session_key=session_key)

    def get_operating_context(
        section: Annotated[StrictStr, Field(description="'' = overview.")] = "",
    ) -> str:
        """The operator's rules: project ids, default projects ("@auto"), doctrine."""
        return call("get_operating_context", lambda: engine.get_operating_context(section))

    def update_memory(memory_id: MemoryRef, content: StrictStr, agent_id: Owner = "",
                      session_key: SessionKey = "") -> str:
        """Correct a memory's text (re-embedded, same id); refused while locked."""
        return call("update_memory", lambda: engine.update_memory(memory_id, content, agent_id),
                    session_key=session_key)

    def delete_memory(memory_id: MemoryRef, agent_id: Owner = "", session_key: SessionKey = "") -> str:
        """Delete one memory for good. Refused while locked."""
        return call("delete_memory", lambda: engine.delete_memory(memory_id, agent_id), session_key=session_key)

    def delete_episode(episode_id: EpisodeRef, agent_id: Owner = "", session_key: SessionKey = "") -> str:
        """Delete one session summary for good."""
        return call("delete_episode", lambda: engine.delete_episode(episode_id, agent_id), session_key=session_key)

    def lock_memory(memory_id: MemoryRef, agent_id: Owner = "", session_key: SessionKey = "") -> str:
        """Protect a memory from update and delete (no ranking boost)."""
        return call("lock_memory", lambda: engine.lock_memory(memory_id, agent_id), session_key=session_key)

    def unlock_memory(memory_id: MemoryRef, agent_id: Owner = "", session_key: SessionKey = "") -> str:
        """Remove lock_memory's protection."""
        return call("unlock_memory", lambda: engine.unlock_memory(memory_id, agent_id), session_key=session_key)

    def delete_agent_data(agent_id: StrictStr, session_key: SessionKey = "") -> str:
        """Erase EVERYTHING of one agent (locked rows too). Cannot be undone."""
        return call("delete_agent_data", lambda: engine.delete_agent_data(agent_id), session_key=session_key)

    def get_queue_status() -> str:
        """Embedding queue; 0 pending, 0 failed = healthy."""
        return call("get_queue_status", engine.queue_status)

    tools = (
        (pause_persistence, WRITE), (resume_persistence, WRITE), (persistence_status, READ),
        (get_operating_context, READ), (update_memory, OVERWRITE), (delete_memory, DELETE), (delete_episode, DELETE),
        (lock_memory, WRITE), (unlock_memory, WRITE), (delete_agent_data, DELETE), (get_queue_status, READ),
    )
    add_tools(app, tools)
