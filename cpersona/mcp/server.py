"""Build the MCP server (official SDK 2.x `MCPServer`) around an `Engine`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from mcp.server.mcpserver import MCPServer

from cpersona import __version__
from cpersona.mcp.tools import manage, memory, portable, quality
from cpersona.service.engine import Engine

if TYPE_CHECKING:  # http_auth is imported only when a token is configured
    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.auth.settings import AuthSettings

#: The SDK's log levels (`log_level` is passed upper-cased).
SdkLogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

SERVER_NAME = "cloto-mcp-cpersona"
INSTRUCTIONS = (
    "Persistent memory. Call recall(agent_id, query) at the start of a task to get relevant memories "
    "(the LAST result is the best match); store(agent_id, message={content}) to keep a fact, decision "
    "or rule; archive_episode(agent_id, summary) at the end of a session."
)

#: Tool groups, each a module with `register(app, engine)`.
TOOL_MODULES = (manage, memory, quality, portable)


def _start_after_handshake(engine: Engine):
    """Middleware: start the engine's background work (model loading) with the first
    message after `initialize`, so the handshake reply is never slowed by it."""

    async def middleware(ctx, call_next):
        result = await call_next(ctx)
        if ctx.method != "initialize":
            engine.start_background()
        return result

    return middleware


def build_server(engine: Engine, log_level: str = "WARNING", auth_token: str = "", http_address=None) -> MCPServer:
    """An MCPServer exposing every tool group, bound to `engine`.

    `auth_token` (streamable-HTTP only) requires `Authorization: Bearer <token>` on every
    request; `http_address` is the (host, port) the HTTP transport binds."""
    auth: AuthSettings | None = None
    token_verifier: TokenVerifier | None = None
    if auth_token:
        from cpersona.mcp.http_auth import StaticTokenVerifier, auth_settings

        auth, token_verifier = auth_settings(*http_address), StaticTokenVerifier(auth_token)
    # MCP `instructions`: the operating context's `[instructions] summary` when present (read once,
    # here), else INSTRUCTIONS; an unusable sidecar is logged once and the server starts anyway.
    instructions = engine.operating_context.instructions() or INSTRUCTIONS
    app = MCPServer(
        SERVER_NAME, instructions=instructions, version=__version__,
        log_level=cast(SdkLogLevel, log_level.upper()),
        middleware=[_start_after_handshake(engine)], auth=auth, token_verifier=token_verifier,
    )
    for module in TOOL_MODULES:
        module.register(app, engine)
    return app
