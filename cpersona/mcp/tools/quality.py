"""MCP tools of the recall quality layer:
recall_with_context, get_contents, get_profile, update_profile, calibrate_threshold,
set_recall_precision, get_recall_precision.

The schemas bound every argument (the SDK rejects violations before the handler runs);
the service validates again and answers rule violations with `ok: false`.
"""

# No `from __future__ import annotations`: the schemas below use values known only at
# registration (the configured caps), so annotations must be evaluated where they are written.
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from cpersona.calibration.precision import METHODS
from cpersona.mcp.registry import CALIBRATE, OVERWRITE, READ, WRITE, add_tools
from cpersona.mcp.results import call
from cpersona.mcp.tools.schemas import AgentId, Deep, FullContent, ReadChannel, ReadProject, RecallLimit, SourceId
from cpersona.retrieval.context import MAX_ENTRIES
from cpersona.retrieval.pipeline import RecallRequest
from cpersona.retrieval.preview import CONTENTS_BUDGET, MAX_REFS
from cpersona.service.engine import Engine

Number = StrictFloat | StrictInt


class ContextEntry(BaseModel):
    """One turn of the conversation you already have."""

    model_config = ConfigDict(extra="ignore")

    role: StrictStr | None = Field(None, description="user | assistant (echoed back); any other role only filters.")
    content: StrictStr = Field("", max_length=100_000, description="The turn's text.")
    name: StrictStr | None = Field(None, max_length=512, description="Speaker name (user turns).")
    user_id: StrictStr | None = Field(None, max_length=512, description="Speaker id (user turns).")
    timestamp: StrictStr | None = Field(None, max_length=512, description="ISO-8601 time of the turn.")


def register(app: MCPServer, engine: Engine) -> None:
    """Add the seven quality-layer tools to `app`, bound to `engine`."""
    max_sample = engine.settings.calibrate_max_sample

    def recall_with_context(
        agent_id: AgentId,
        query: Annotated[StrictStr, Field(description="What to remember (as for recall).")],
        external_context: Annotated[
            list[ContextEntry],
            Field(max_length=MAX_ENTRIES, description="The conversation you already have: "
                  "{role, content, name?, user_id?, timestamp?}. Memories repeating it are left out."),
        ] = [],  # noqa: B006 — the SDK publishes this default in the tool's JSON schema; never mutated
        limit: RecallLimit = 10,
        channel: ReadChannel = "",
        project_id: ReadProject = None,
        source_id: SourceId = "",
        deep: Deep = False,
        full_content: FullContent = False,
    ) -> str:
        """Recall merged with your conversation, deduplicated, in CHRONOLOGICAL order (oldest first;
        rows without a timestamp first) — unlike recall, the last row is the newest, not the best.

        Returns {messages, context_filter_only?, advisory?, gate?, gate_fallback?}. Recalled rows
        carry refs and match_reason; your user/assistant turns come back with
        context_type: "conversation". Entries of other roles only filter.
        """
        req = RecallRequest(agent_id, query, limit, deep, channel, project_id, source_id)
        context = [e.model_dump() for e in external_context]
        return call("recall_with_context", lambda: engine.recall_with_context(
            req, context, preview_rows=True, full_content=full_content), {"messages": []})

    def get_contents(
        agent_id: AgentId,
        refs: Annotated[
            list[StrictStr], Field(min_length=1, max_length=MAX_REFS, description=f"Up to {MAX_REFS} refs from recall, "
                                   "e.g. [\"mem:12\", \"ep:3\"].")
        ],
    ) -> str:
        """Full text of recalled rows (expand previews). Only your own rows: another agent's or an
        unknown ref is listed in `missing`.

        Returns {items: [{ref, content, source?, timestamp?, id?, resolved?}], missing, count,
        deferred?, budget_chars?, note?}. Rows are never cut: past """ + f"{CONTENTS_BUDGET:,}" + """ characters
        the remaining refs are listed in `deferred` — call again with them.
        """
        return call("get_contents", lambda: engine.get_contents(agent_id, refs))

    def get_profile(agent_id: AgentId) -> str:
        """Read the agent's profile (accumulated attributes of its user or project). Returns {profile}."""
        return call("get_profile", lambda: engine.get_profile(agent_id))

    def update_profile(
        agent_id: AgentId,
        profile: Annotated[StrictStr, Field(description="The whole profile text you computed (replaces the old one); "
                                            f"cut to {engine.settings.max_profile_length} characters.")],
    ) -> str:
        """Replace the agent's profile with text you computed (the server never summarises).
        Recall adds it as a "[Profile] …" row once the agent has ≥ 50 memories + episodes.

        Returns {ok, profiles_updated, length?, truncated?, reason?}.
        """
        return call("update_profile", lambda: engine.update_profile(agent_id, profile))

    def calibrate_threshold(
        agent_id: Annotated[
            StrictStr, Field(description="Agent to calibrate; '' = the global vector threshold over all agents.")
        ],
        sample_size: Annotated[StrictInt, Field(ge=0, le=max_sample,
                                                description=f"Stored vectors to sample (1–{max_sample}; "
                                                "0 = default 200).")] = 0,
        z_factor: Annotated[Number, Field(ge=-10, le=10,
                                          description="zscore method: threshold = mean + z·std of random "
                                          "pairs (0 = default 1.0).")] = 0,
        method: Annotated[StrictStr, Field(description=f"{' | '.join(METHODS)} ('' = separation).")] = "",
        percentile: Annotated[Number, Field(ge=0, le=100, description="percentile method: quantile of random pairs, "
                                            "in (0, 1] or a percent (0 = default 0.95).")] = 0,
    ) -> str:
        """Derive the quality gate from the corpus itself (no labels): the agent's vector threshold
        (where similarity beats random pairs) and the fused gate at the agent's precision.
        Needs ≥ 10 embedded memories. Saved in <db>.calibration.json; survives restarts.

        Returns {ok, new_threshold, old_threshold, distribution, null_admit_rate, proxy_source?,
        fused_gate?, fused_gate_note? (measured, heuristic kept), fused_gate_error?, sidecar_persisted, ...}
        or {ok: false, error}.
        """
        return call("calibrate_threshold", lambda: engine.calibrate_threshold(
            agent_id, sample_size, z_factor, method, percentile))

    def set_recall_precision(
        agent_id: AgentId,
        precision: Annotated[StrictStr, Field(description="strict (fewer, surer rows) | balanced | lenient "
                                              "(more rows); '' with beta 0 = back to the server default.")] = "",
        beta: Annotated[Number, Field(ge=0, le=100,
                                      description="Custom operating point β > 0 (strict = 2.0, balanced = 1.0, "
                                      "lenient = 0.5); overrides precision.")] = 0,
    ) -> str:
        """Move the agent's quality-gate operating point and recalibrate at once (takes effect on the
        next recall). Returns {ok, agent_id, precision, beta, cleared, fused_gate, calibrate}; a failed
        recalibration leaves the precision unchanged ({ok: false, error})."""
        return call("set_recall_precision", lambda: engine.set_recall_precision(agent_id, precision, beta))

    def get_recall_precision(agent_id: AgentId) -> str:
        """The agent's precision and calibration state. Returns {ok, agent_id, precision, beta,
        overridden, global_precision, global_beta, calibration: {state, vector_threshold, fused_gate,
        signal, sidecar, notice?}}."""
        return call("get_recall_precision", lambda: engine.get_recall_precision(agent_id))

    tools = ((recall_with_context, READ), (get_contents, READ), (get_profile, READ), (update_profile, OVERWRITE),
             (calibrate_threshold, CALIBRATE), (set_recall_precision, WRITE), (get_recall_precision, READ))
    add_tools(app, tools)
