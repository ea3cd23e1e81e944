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
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from cpersona.calibration.precision import METHODS
from cpersona.mcp.registry import CALIBRATE, OVERWRITE, READ, WRITE, add_tools
from cpersona.mcp.results import call
from cpersona.mcp.tools.schemas import WHOLE, Agent, JsonObject, Project, RecallLimit, SessionKey
from cpersona.retrieval.contents import MAX_REFS
from cpersona.service.conversation import MAX_ENTRIES
from cpersona.service.engine import Engine
from cpersona.service.requests import RecallRequest

#: A number argument (integers accepted; booleans are not numbers).
Number = StrictFloat


def register(app: MCPServer, engine: Engine) -> None:
    """Add the seven quality-layer tools to `app`, bound to `engine`."""
    max_sample = engine.settings.calibrate_max_sample

    def recall_with_context(
        agent_id: Agent,
        query: StrictStr,
        external_context: Annotated[list[JsonObject], Field(
            max_length=MAX_ENTRIES, description="[{role, content, timestamp?}]")] = [],  # noqa: B006
        limit: RecallLimit = 10,
        channel: StrictStr = "",
        project_id: Project = None,
        source_id: StrictStr = "",
        deep: StrictBool = False,
        full_content: StrictBool = False,
        verbose: StrictBool = False,
        session_key: SessionKey = "",
    ) -> str:
        """recall merged with your conversation, deduplicated, CHRONOLOGICAL: the last row is the newest."""
        req = RecallRequest(agent_id, query, limit, deep, channel, project_id, source_id)
        return call("recall_with_context", lambda: engine.recall_with_context(
            req, external_context, preview_rows=True, full_content=full_content, verbose=verbose),
            {"messages": []}, session_key)

    def get_contents(
        agent_id: Agent,
        refs: Annotated[list[StrictStr], Field(max_length=MAX_REFS, description="e.g. [\"mem:12\", \"ep:3\"]")],
    ) -> str:
        """Full text of recall previews (your rows): {items, missing, deferred?}; ask again for deferred."""
        return call("get_contents", lambda: engine.get_contents(agent_id, refs))


    def get_profile(agent_id: Agent) -> str:
        """The agent's profile text: {profile}."""
        return call("get_profile", lambda: engine.get_profile(agent_id))

    def update_profile(agent_id: Agent, profile: StrictStr, session_key: SessionKey = "") -> str:
        """Replace the agent's profile with your text; recall adds it from 50 rows on."""
        return call("update_profile", lambda: engine.update_profile(agent_id, profile), session_key=session_key)


    def calibrate_threshold(
        agent_id: Annotated[StrictStr, Field(description="'' = the global threshold.")],
        sample_size: Annotated[StrictInt, Field(description=f"0 = 200; at most {max_sample}."), WHOLE] = 0,
        z_factor: Number = 0,
        method: Annotated[StrictStr, Field(description=" | ".join(METHODS))] = "",
        percentile: Number = 0,
        session_key: SessionKey = "",
    ) -> str:
        """Measure the agent's quality gate from its corpus (needs 10 embedded memories)."""
        return call("calibrate_threshold", lambda: engine.calibrate_threshold(
            agent_id, sample_size, z_factor, method, percentile), session_key=session_key)

    def set_recall_precision(
        agent_id: Agent,
        precision: Annotated[StrictStr, Field(description="strict | balanced | lenient")] = "",
        beta: Annotated[Number, Field(description="Custom β > 0 (wins).")] = 0,
        session_key: SessionKey = "",
    ) -> str:
        """Move the agent's gate (strict: fewer, surer rows; lenient: more) and recalibrate."""
        return call("set_recall_precision", lambda: engine.set_recall_precision(agent_id, precision, beta),
                    session_key=session_key)

    def get_recall_precision(agent_id: Agent) -> str:
        """The agent's precision and calibration state."""
        return call("get_recall_precision", lambda: engine.get_recall_precision(agent_id))

    tools = ((recall_with_context, READ), (get_contents, READ), (get_profile, READ), (update_profile, OVERWRITE),
             (calibrate_threshold, CALIBRATE), (set_recall_precision, WRITE), (get_recall_precision, READ))
    add_tools(app, tools)
