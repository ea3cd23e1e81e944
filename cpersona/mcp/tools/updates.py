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
CHECK = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def register(app: MCPServer, engine: Engine) -> None:
    """Add check_update to `app`, bound to `engine`."""

    def check_update(
        refresh: Annotated[StrictBool, Field(description="Start a fresh look at the package index now (in the "
                                                         "background; call again for the result).")] = False,
        apply: Annotated[StrictBool, Field(description="Install the newer release this check offers into the "
                                                       "server's own environment (pip, in the background); "
                                                       "takes effect after a restart.")] = False,
    ) -> str:
        """Is a newer release of this server available, or was the running one withdrawn?
        Returns {enabled, distribution, running_version, state: newer|yanked|current|unpublished|unknown,
        latest, notice, source: cache|index, checked_at, checking, last_error?, install?}.
        Only apply=true changes anything, and only by installing a release of this distribution.
        """
        return call("check_update", lambda: engine.check_update(refresh, apply))

    add_tools(app, ((check_update, CHECK),))
