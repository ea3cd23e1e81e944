"""Build the MCP server (official SDK 2.x `MCPServer`) around an `Engine`."""

from __future__ import annotations

from typing import Any, Literal, cast

from mcp.server.context import ServerMiddleware
from mcp.server.mcpserver import MCPServer

from cpersona import __version__
from cpersona.mcp.tools import manage, memory, quality, updates
from cpersona.service.engine import Engine

#: The SDK's log levels (`log_level` is passed upper-cased).
SdkLogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

SERVER_NAME = "cloto-mcp-cpersona"
INSTRUCTIONS = (
    "Persistent memory. Call recall(agent_id, query) at the start of a task to get relevant memories "
    "(the LAST result is the best match); store(agent_id, message={content}) to keep a fact, decision "
    "or rule; archive_episode(agent_id, summary) at the end of a session."
)

#: Tool groups, each a module with `register(app, engine)`.
TOOL_MODULES = (manage, memory, quality, updates)


def _start_after_handshake(engine: Engine):
    """Middleware: start the engine's background work (model loading) with the first
    message after `initialize`, so the handshake reply is never slowed by it."""

    async def middleware(ctx, call_next):
        result = await call_next(ctx)
        if ctx.method != "initialize":
            engine.start_background()
        return result

    return middleware


def build_server(engine: Engine, log_level: str = "WARNING", guard: ServerMiddleware[Any] | None = None) -> MCPServer:
    """An MCPServer exposing every tool group, bound to `engine`.

    `guard` (ACL mode, `mcp/access.py: AccessGuard`) decides every tool call before it
    runs. Authentication is not the server's job: the HTTP app (`mcp/http_app.py`) checks
    bearer tokens before a request reaches it."""
    # MCP `instructions`: the operating context's `[instructions] summary` when present (read once,
    # here), else INSTRUCTIONS; an unusable sidecar is logged once and the server starts anyway.
    instructions = engine.operating_context.instructions() or INSTRUCTIONS
    app = MCPServer(
        SERVER_NAME, instructions=instructions, version=__version__,
        log_level=cast(SdkLogLevel, log_level.upper()),
        middleware=[_start_after_handshake(engine), *([guard] if guard is not None else [])],
    )
    for module in TOOL_MODULES:
        module.register(app, engine)
    return app
