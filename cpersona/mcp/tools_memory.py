"""MCP tools of the everyday memory surface: store, recall, archive_episode,
list_memories, list_episodes (spec tools.md §5, §6, §11–§13).

Each tool only declares its JSON schema (types, bounds, descriptions a model can act on)
and calls the core; the SDK answers schema violations with an error result naming the
argument, and the core's rule checks come back as `ok: false`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from cpersona.core.engine import Engine
from cpersona.core.preview import RECALL_BUDGET, shape_recall
from cpersona.core.retrieval.pipeline import RecallRequest
from cpersona.mcp.context_gate import gated
from cpersona.mcp.registry import APPEND, READ, WRITE, add_tools

AgentId = Annotated[
    StrictStr,
    Field(description="Whose memory this is. Rows are never shared between agent ids; '' is a real (empty) agent id."),
]
WriteProject = Annotated[
    StrictStr,
    Field(description="Project bucket to write into; '' (default) = the global pool visible from every project; "
                      "'@auto' = your default project from the operating context."),
]
ReadProject = Annotated[
    StrictStr | None,
    Field(description="Omit = all projects; '' = global pool only; 'X' = project X plus the global pool; "
                      "'@auto' = your default project from the operating context."),
]
WriteChannel = Annotated[StrictStr, Field(description="Channel to file under; '' (default) = visible from every channel.")]
ReadChannel = Annotated[StrictStr, Field(description="'' (default) = all channels; 'X' = channel X plus channel-less rows.")]
RecallLimit = Annotated[
    StrictInt, Field(ge=1, le=100, description="Maximum rows returned (1–100, default 10); also each retriever's depth.")
]


class StoreMessage(BaseModel):
    """The memory to keep."""

    model_config = ConfigDict(extra="ignore")

    content: StrictStr = Field(description="The fact, decision or rule to remember (non-empty; ≤16000 chars by default).")
    id: StrictStr = Field("", description="Your message id; a second store with the same id is skipped (dedup).")
    source: dict[str, Any] = Field(
        default_factory=dict,
        description='Who said it: {"type": "User"|"Agent"|"System", "id": "...", "name": "..."}.',
    )
    timestamp: StrictStr = Field("", description="When it was said, ISO-8601 (e.g. 2026-11-29T10:00:00Z); default now.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form JSON object kept with the memory.")


class HistoryEntry(BaseModel):
    """One turn of the summarised session; only `timestamp` is used (start/end time)."""

    model_config = ConfigDict(extra="allow")

    timestamp: StrictStr = Field("", description="ISO-8601 time of this turn.")


FULL_CONTENT_HELP = (
    f"Return whole rows instead of previews, within {RECALL_BUDGET:,} characters spent on the best rows first; "
    "weaker rows past the budget stay previews (full_content_budget_chars is then set)."
)



def register(app: MCPServer, engine: Engine) -> None:
    """Add the five tools to `app`, bound to `engine`."""

    def store(
        agent_id: AgentId,
        message: Annotated[StoreMessage, Field(description="The memory: content plus optional id, source, timestamp, metadata.")],
        channel: WriteChannel = "",
        project_id: WriteProject = "",
    ) -> str:
        """Keep one fact, decision or rule for later recall.

        Returns {ok, result: "stored"|"skipped"|"rejected", id?, embedded?, reason?}. A memory
        already visible in the same agent/project/channel (same content or same message id)
        is skipped, never overwritten — use update_memory to correct a fact.
        """
        return gated(engine, "store", agent_id, project_id, True, lambda project: engine.store(
            agent_id, message.content, msg_id=message.id, source=message.source,
            timestamp=message.timestamp or None, metadata=message.metadata, channel=channel, project_id=project,
        ), {"result": "rejected"})

    def recall(
        agent_id: AgentId,
        query: Annotated[StrictStr, Field(description="What to remember: a question, keywords, an identifier or error string. '' = most recent memories.")],
        limit: RecallLimit = 10,
        channel: ReadChannel = "",
        project_id: ReadProject = None,
        source_id: Annotated[StrictStr, Field(description="Only memories whose source.id starts with this prefix.")] = "",
        exclude_contents: Annotated[
            list[StrictStr], Field(max_length=200, description="Texts you already have in context; rows equal to them are left out.")
        ] = [],
        deep: Annotated[StrictBool, Field(description="Search harder: halves the quality gate.")] = False,
        full_content: Annotated[StrictBool, Field(description=FULL_CONTENT_HELP)] = False,
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
        return gated(engine, "recall", agent_id, project_id, False, lambda project: shape_recall(
            engine.recall(replace(req, project_id=project)), engine.settings.recall_preview_chars, full_content,
        ), {"messages": []})

    def archive_episode(
        agent_id: AgentId,
        summary: Annotated[StrictStr, Field(description="Your summary of the session (required; the server never summarises).")],
        keywords: Annotated[StrictStr, Field(description="Space-separated keywords that should find this episode.")] = "",
        history: Annotated[
            list[HistoryEntry], Field(max_length=10000, description="Turns of the session; their timestamps give start/end time.")
        ] = [],
        resolved: Annotated[StrictBool, Field(description="True when the session's topic was concluded.")] = False,
        channel: WriteChannel = "",
        project_id: WriteProject = "",
    ) -> str:
        """Keep a summary of a finished session (episodic memory), searchable next to memories.

        Archiving also marks older memories as older context (they rank a little lower).
        Returns {ok, episode_id, embedded} or {ok: false, episode_id: null, error}.
        """
        return gated(engine, "archive_episode", agent_id, project_id, True, lambda project: engine.archive_episode(
            agent_id, summary, keywords=keywords, history=[h.model_dump() for h in history], resolved=resolved,
            channel=channel, project_id=project,
        ), {"episode_id": None})

    def list_memories(
        agent_id: Annotated[StrictStr, Field(description="Whose memories; '' (default) = every agent.")] = "",
        limit: Annotated[StrictInt, Field(ge=1, le=500, description="Maximum rows (1–500, default 100).")] = 100,
        project_id: ReadProject = None,
    ) -> str:
        """List stored memories newest first (no ranking). Returns {memories: [...], count}."""
        return gated(engine, "list_memories", agent_id, project_id, False,
                     lambda project: engine.list_memories(agent_id, limit, project), {"memories": [], "count": 0})

    def list_episodes(
        agent_id: Annotated[StrictStr, Field(description="Whose episodes; '' (default) = every agent.")] = "",
        limit: Annotated[StrictInt, Field(ge=1, le=200, description="Maximum rows (1–200, default 50).")] = 50,
        project_id: ReadProject = None,
    ) -> str:
        """List archived session summaries newest first. Returns {episodes: [...], count}."""
        return gated(engine, "list_episodes", agent_id, project_id, False,
                     lambda project: engine.list_episodes(agent_id, limit, project), {"episodes": [], "count": 0})

    add_tools(app, ((store, WRITE), (recall, READ), (archive_episode, APPEND), (list_memories, READ),
                    (list_episodes, READ)))
