"""MCP tools of store health: check_health (integrity checks, optional repairs) and
deep_check (per-agent content inspections), both reports unless `fix` is true; and
get_session_findings (check_health's issues over the whole store as findings, read-only)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field, StrictBool, StrictInt, StrictStr

from cpersona.mcp.registry import READ, add_tools
from cpersona.mcp.results import call
from cpersona.mcp.tools.schemas import WHOLE, SessionKey
from cpersona.service.engine import Engine

#: Reads, and writes only when `fix` is true (the original declares only "not read-only").
CHECK = ToolAnnotations()  # fix repairs rows: no hint differs from the MCP defaults
Fix = Annotated[StrictBool, Field(description="Repair.")]


def register(app: MCPServer, engine: Engine) -> None:
    """Add check_health, deep_check and get_session_findings to `app`, bound to `engine`."""

    def check_health(
        agent_id: Annotated[StrictStr, Field(description="'' = whole store.")] = "",
        fix: Fix = False,
        checks: Annotated[list[StrictStr], Field(max_length=100)] = [],  # noqa: B006 — published default, never mutated
    ) -> str:
        """Integrity checks of the store, repaired with fix. {status, severity_summary, issues}."""
        return call("check_health", lambda: engine.check_health(agent_id, fix, checks))

    def deep_check(
        agent_id: StrictStr,
        fix: Fix = False,
        checks: Annotated[list[StrictStr], Field(max_length=20)] = [],  # noqa: B006 — published default, never mutated
    ) -> str:
        """Per-agent content checks (sources, tiny rows, profile, episodes, near-duplicates). {results}."""
        return call("deep_check", lambda: engine.deep_check(agent_id, fix, checks))

    def get_session_findings(
        per_kind_limit: Annotated[StrictInt, Field(ge=1), WHOLE] = 5,
        include_summary: StrictBool = True,
        session_key: SessionKey = "",
    ) -> str:
        """check_health(fix=false) of the whole store as findings, capped per kind."""
        return call("get_session_findings", lambda: engine.get_session_findings(per_kind_limit, include_summary),
                    {"findings": []}, session_key)

    add_tools(app, ((check_health, CHECK), (deep_check, CHECK), (get_session_findings, READ)))
