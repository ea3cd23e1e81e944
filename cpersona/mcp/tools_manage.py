"""MCP tools (placeholder until filled in): see cpersona/mcp/tools_memory.py for the pattern."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from cpersona.core.engine import Engine


def register(app: MCPServer, engine: Engine) -> None:
    """Add this group's tools to `app`, bound to `engine`."""
