"""MCP tools of the everyday memory surface: store, recall, archive_episode,
list_memories, list_episodes.

Each tool only declares its JSON schema (types, bounds, descriptions a model can act on)
and calls the service; the SDK answers schema violations with an error result naming the
argument, and the service's rule checks come back as `ok: false`.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field, StrictBool, StrictInt, StrictStr

from cpersona.mcp.registry import APPEND, READ, WRITE, add_tools
from cpersona.mcp.results import call
from cpersona.mcp.tools.schemas import (
    AgentId,
    Deep,
    FullContent,
    HistoryEntry,
    ReadChannel,
    ReadProject,
    RecallLimit,
    SourceId,
    StoreMessage,
    WriteChannel,
    WriteProject,
)
from cpersona.retrieval.pipeline import RecallRequest
from cpersona.service.engine import Engine


def register(app: MCPServer, engine: Engine) -> None:
    """Add the five tools to `app`, bound to `engine`."""

    def store(
        agent_id: AgentId,
        message: Annotated[
            StoreMessage, Field(description="The memory: content plus optional id, source, timestamp, metadata.")
        ],
        channel: WriteChannel = "",
        project_id: WriteProject = "",
    ) -> str:
        """Keep one fact, decision or rule for later recall.

        Returns {ok, result: "stored"|"skipped"|"rejected", id?, embedded?, reason?}. A memory
        already visible in the same agent/project/channel (same content or same message id)
        is skipped, never overwritten — use update_memory to correct a fact.
        """
        return call("store", lambda: engine.store(
            agent_id, message.content, msg_id=message.id, source=message.source,
            timestamp=message.timestamp or None, metadata=message.metadata, channel=channel, project_id=project_id,
        ), {"result": "rejected"})

    def recall(
        agent_id: AgentId,
        query: Annotated[StrictStr, Field(description="What to remember: a question, keywords, an identifier or "
                                                      "error string. '' = most recent memories.")],
        limit: RecallLimit = 10,
        channel: ReadChannel = "",
        project_id: ReadProject = None,
        source_id: SourceId = "",
        exclude_contents: Annotated[
            list[StrictStr],
            Field(max_length=200, description="Texts you already have in context; rows equal to them are left out."),
        ] = [],  # noqa: B006 — the SDK publishes this default in the tool's JSON schema; never mutated
        deep: Deep = False,
        full_content: FullContent = False,
    ) -> str:
        """Find the memories and session summaries relevant to `query` (hybrid vector + full-text search).

        Returns {messages: [...], advisory?, gate?, gate_fallback?, full_content_budget_chars?}.
        Messages are ordered WORST to BEST: the LAST element is the best match. Each has content,
        ref ("mem:<id>" / "ep:<id>"), timestamp, source and match_reason {signal, score}. Long rows
        are previews (content_truncated: true, content_len): pass their refs to get_contents for
        the full text, or call with full_content=true. An `advisory` means search is degraded
        (e.g. keyword-only): tell the user as it says. A `gate` object means the quality gate runs
        on its uncalibrated heuristic because calibration is missing, unreadable, stale or failed
        ({state, reason, fix}): act on `fix`. An empty list means nothing stored is relevant enough.
        """
        req = RecallRequest(agent_id, query, limit, deep, channel, project_id, source_id, tuple(exclude_contents))
        return call("recall", lambda: engine.recall(req, preview_rows=True, full_content=full_content),
                    {"messages": []})

    def archive_episode(
        agent_id: AgentId,
        summary: Annotated[
            StrictStr, Field(description="Your summary of the session (required; the server never summarises).")
        ],
        keywords: Annotated[
            StrictStr, Field(description="Space-separated keywords that should find this episode.")
        ] = "",
        history: Annotated[
            list[HistoryEntry],
            Field(max_length=10000, description="Turns of the session; their timestamps give start/end time."),
        ] = [],  # noqa: B006 — the SDK publishes this default in the tool's JSON schema; never mutated
        resolved: Annotated[StrictBool, Field(description="True when the session's topic was concluded.")] = False,
        channel: WriteChannel = "",
        project_id: WriteProject = "",
    ) -> str:
        """Keep a summary of a finished session (episodic memory), searchable next to memories.

        Archiving also marks older memories as older context (they rank a little lower).
        Returns {ok, episode_id, embedded} or {ok: false, episode_id: null, error}.
        """
        return call("archive_episode", lambda: engine.archive_episode(
            agent_id, summary, keywords=keywords, history=[h.model_dump() for h in history], resolved=resolved,
            channel=channel, project_id=project_id,
        ), {"episode_id": None})

    def list_memories(
        agent_id: Annotated[StrictStr, Field(description="Whose memories; '' (default) = every agent.")] = "",
        limit: Annotated[StrictInt, Field(ge=1, le=500, description="Maximum rows (1–500, default 100).")] = 100,
        project_id: ReadProject = None,
    ) -> str:
        """List stored memories newest first (no ranking). Returns {memories: [...], count}."""
        return call("list_memories", lambda: engine.list_memories(agent_id, limit, project_id),
                    {"memories": [], "count": 0})

    def list_episodes(
        agent_id: Annotated[StrictStr, Field(description="Whose episodes; '' (default) = every agent.")] = "",
        limit: Annotated[StrictInt, Field(ge=1, le=200, description="Maximum rows (1–200, default 50).")] = 50,
        project_id: ReadProject = None,
    ) -> str:
        """List archived session summaries newest first. Returns {episodes: [...], count}."""
        return call("list_episodes", lambda: engine.list_episodes(agent_id, limit, project_id),
                    {"episodes": [], "count": 0})

    add_tools(app, ((store, WRITE), (recall, READ), (archive_episode, APPEND), (list_memories, READ),
                    (list_episodes, READ)))
