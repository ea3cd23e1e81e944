"""MCP tool of the update check: check_update."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field, StrictBool

from cpersona.mcp.registry import add_tools
from cpersona.mcp.results import call
from cpersona.service.engine import Engine

#: Reads a verdict; with apply=true installs software (not read-only, not idempotent).
CHECK = ToolAnnotations(destructive_hint=False)  # only hints that differ from MCP's defaults


def register(app: MCPServer, engine: Engine) -> None:
    """Add check_update to `app`, bound to `engine`."""

    def check_update(
        refresh: StrictBool = False,
        apply: Annotated[StrictBool, Field(description="Install it (then restart).")] = False,
    ) -> str:
        """A newer release out, or this one withdrawn? {state, latest, notice}. apply installs."""
        return call("check_update", lambda: engine.check_update(refresh, apply))

    add_tools(app, ((check_update, CHECK),))
