"""Build the MCP server (official SDK 2.x `MCPServer`) around an `Engine`."""

from __future__ import annotations

from typing import Any, Literal, cast

from mcp.server.context import ServerMiddleware
from mcp.server.mcpserver import MCPServer
from mcp_types import Tool

from cpersona import __version__
from cpersona.mcp import liveness
from cpersona.mcp.registry import compact_schema
from cpersona.mcp.tools import associations, health, manage, memory, portable, quality, updates
from cpersona.service.engine import Engine

#: The SDK's log levels (`log_level` is passed upper-cased).
SdkLogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

SERVER_NAME = "cloto-mcp-cpersona"
#: Path of the streamable-HTTP endpoint (the SDK's default).
HTTP_PATH = "/mcp"
INSTRUCTIONS = (
    "Persistent memory. Call recall(agent_id, query) at the start of a task to get relevant memories "
    "(the LAST result is the best match); store(agent_id, content) to keep a fact, decision or rule; "
    "archive_episode(agent_id, summary) at the end of a session."
)

#: Tool groups, each a module with `register(app, engine)`.
TOOL_MODULES = (manage, memory, associations, quality, updates, health, portable)


class MemoryServer(MCPServer):
    """The SDK's MCPServer publishing compact, self-contained input schemas
    (`registry.compact_schema`); arguments are still validated by each tool's model."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": compact_schema(t.input_schema)}) for t in tools]


def build_server(engine: Engine, log_level: str = "WARNING", guard: ServerMiddleware[Any] | None = None) -> MCPServer:
    """A MemoryServer exposing every tool group, bound to `engine`. The caller starts the
    engine's background work (model loading) at process start, in every transport.

    `guard` (ACL mode, `mcp/access.py: AccessGuard`) decides every tool call before it
    runs. Authentication is not the server's job: the HTTP app (`mcp/http_app.py`) checks
    bearer tokens before a request reaches it."""
    # MCP `instructions`: the operating context's `[instructions] summary` when present (read once,
    # here), else INSTRUCTIONS; an unusable sidecar is logged once and the server starts anyway.
    instructions = engine.operating_context.instructions() or INSTRUCTIONS
    app = MemoryServer(
        SERVER_NAME, instructions=instructions, version=__version__,
        log_level=cast(SdkLogLevel, log_level.upper()),
        middleware=[guard] if guard is not None else [],
    )
    for module in TOOL_MODULES:
        module.register(app, engine)
    liveness.register(app)
    return app
