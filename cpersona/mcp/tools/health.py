"""MCP tools of store health: check_health (integrity checks, optional repairs) and
deep_check (per-agent content inspections). Both are reports unless `fix` is true."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field, StrictBool, StrictStr

from cpersona.mcp.registry import add_tools
from cpersona.mcp.results import call
from cpersona.service.engine import Engine

#: Reads, and writes only when `fix` is true (the original declares only "not read-only").
CHECK = ToolAnnotations()  # fix repairs rows: no hint differs from the MCP defaults
Fix = Annotated[StrictBool, Field(description="Repair.")]


def register(app: MCPServer, engine: Engine) -> None:
    """Add check_health and deep_check to `app`, bound to `engine`."""

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

    add_tools(app, ((check_health, CHECK), (deep_check, CHECK)))
