"""MCP tools of the everyday memory surface: store, recall, archive_episode,
list_memories, list_episodes.

Each tool declares its JSON schema and calls the service; the SDK answers schema
violations with an error result naming the argument, and the service's rule checks come
back as `ok: false`. `store` accepts both call shapes of the original CPersona: the flat
one of its current release (`content`, `id`, `source`, `timestamp`, `metadata`, `lock`)
and the 2.5 line's `message` object; translating them is this edge's job.
"""

# No `from __future__ import annotations`: pydantic reads these annotations at registration.
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field, StrictBool, StrictStr

from cpersona.mcp.registry import APPEND, READ, WRITE, add_tools
from cpersona.mcp.results import call
from cpersona.mcp.tools.schemas import (
    AgentId,
    Cursor,
    Deep,
    FullContent,
    JsonObject,
    ListLimit,
    Project,
    ReadChannel,
    ReadProject,
    RecallLimit,
    SessionKey,
    SourceId,
    Verbose,
    WriteChannel,
    WriteProject,
)
from cpersona.service.engine import Engine
from cpersona.service.requests import RecallRequest

#: Fields of the legacy `message` object and the flat arguments they map to.
MESSAGE_FIELDS = ("content", "id", "source", "timestamp", "metadata")


def message_fields(message: Any, flat: dict[str, Any]) -> dict[str, Any]:
    """One memory's fields from either call shape: the flat arguments given (not None) win
    over the same fields of `message`; a numeric message id is read as its decimal text."""
    fields = dict(message) if isinstance(message, dict) else {}
    fields.update({k: v for k, v in flat.items() if v is not None})
    if isinstance(fields.get("id"), int | float) and not isinstance(fields.get("id"), bool):
        fields["id"] = str(fields["id"])
    return fields


def register(app: MCPServer, engine: Engine) -> None:
    """Add the five tools to `app`, bound to `engine`."""

    def store(
        agent_id: AgentId,
        content: Annotated[StrictStr | None, Field()] = None,
        id: Annotated[StrictStr | None, Field(description="Your message id (dedup).")] = None,
        source: Annotated[JsonObject | StrictStr | None,
                          Field(description="{type: User|Agent|System, id, name} or a name.")] = None,
        timestamp: Annotated[StrictStr | None, Field(description="ISO-8601; default now.")] = None,
        metadata: JsonObject | None = None,
        lock: Annotated[StrictBool, Field(description="Also lock it.")] = False,
        message: Annotated[JsonObject | None, Field(description="Legacy: the 5 fields above.")] = None,
        channel: WriteChannel = "",
        project_id: WriteProject = "",
        associations: Annotated[JsonObject | None, Field(description="As declare_associations.")] = None,
        session_key: SessionKey = "",
    ) -> str:
        """Keep one fact, decision or rule; the same content or id in this scope is skipped, never overwritten
        (update_memory corrects). {ok, result, id}."""
        fields = message_fields(message, {"content": content, "id": id, "source": source, "timestamp": timestamp,
                                          "metadata": metadata})

        def run() -> Any:
            if fields.get("content") is None:
                return {"ok": False, "result": "rejected", "reason": "content: is required (or message.content)"}
            return engine.store(
                agent_id, fields.get("content"), msg_id=fields.get("id", ""), source=fields.get("source"),
                timestamp=fields.get("timestamp") or None, metadata=fields.get("metadata"), lock=lock,
                channel=channel, project_id=project_id, associations=associations)

        return call("store", run, {"result": "rejected"}, session_key)


    def recall(
        agent_id: AgentId,
        query: Annotated[StrictStr, Field(description="Question, keywords or an id; '' = newest.")],
        limit: RecallLimit = 10,
        channel: ReadChannel = "",
        project_id: ReadProject = None,
        source_id: SourceId = "",
        exclude_contents: Annotated[list[StrictStr], Field(max_length=200,
                                                           description="Texts you already have.")] = [],  # noqa: B006
        deep: Deep = False,
        full_content: FullContent = False,
        verbose: Verbose = False,
        session_key: SessionKey = "",
    ) -> str:
        """Memories and session summaries for query; call it at a task's start. messages run WORST to BEST:
        the LAST is the best. get_contents expands previews. advisory: degraded search, tell the user;
        gate: act on its fix."""
        req = RecallRequest(agent_id, query, limit, deep, channel, project_id, source_id, tuple(exclude_contents))
        return call("recall", lambda: engine.recall(req, preview_rows=True, full_content=full_content,
                                                    verbose=verbose), {"messages": []}, session_key)

    def archive_episode(
        agent_id: StrictStr,
        summary: StrictStr,
        keywords: Annotated[StrictStr, Field(description="Space-separated.")] = "",
        history: Annotated[list[JsonObject], Field(max_length=10000,
                                                   description="Turns (timestamps date it).")] = [],  # noqa: B006
        resolved: Annotated[StrictBool, Field(description="The topic was concluded.")] = False,
        channel: StrictStr = "",
        project_id: StrictStr = "",
        session_key: SessionKey = "",
    ) -> str:
        """Keep your summary of a finished session; older memories then rank lower. {ok, episode_id}."""
        return call("archive_episode", lambda: engine.archive_episode(
            agent_id, summary, keywords=keywords, history=history, resolved=resolved, channel=channel,
            project_id=project_id), {"episode_id": None}, session_key)

    def list_memories(
        agent_id: Annotated[StrictStr, Field(description="'' = every agent.")] = "",
        limit: ListLimit = 100,
        project_id: Project = None,
        cursor: Cursor = "",
    ) -> str:
        """Memories newest first: {memories, next_cursor?}."""
        return call("list_memories", lambda: engine.list_memories(agent_id, limit, project_id, cursor),
                    {"memories": [], "count": 0})

    def list_episodes(
        agent_id: Annotated[StrictStr, Field(description="'' = every agent.")] = "",
        limit: ListLimit = 50,
        project_id: Project = None,
        cursor: Cursor = "",
    ) -> str:
        """Session summaries newest first: {episodes, next_cursor?}."""
        return call("list_episodes", lambda: engine.list_episodes(agent_id, limit, project_id, cursor),
                    {"episodes": [], "count": 0})

    add_tools(app, ((store, WRITE), (recall, READ), (archive_episode, APPEND), (list_memories, READ),
                    (list_episodes, READ)))
