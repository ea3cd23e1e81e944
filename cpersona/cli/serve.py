"""`cpersona serve` (the default command): run the MCP server until the client disconnects."""

from __future__ import annotations

import argparse

from cpersona.config import Settings
from cpersona.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve MCP on stdio (or streamable HTTP: CPERSONA_TRANSPORT)",
                       description="Serve the memory over MCP. Configured by CPERSONA_* variables (see README).")
    p.set_defaults(func=serve)


def check_http_auth(settings: Settings) -> None:
    """Refuse to serve HTTP without a token unless unauthenticated serving was opted into."""
    if not settings.auth_token and not settings.allow_unauthenticated_http:
        raise ConfigError(
            f"CPERSONA_TRANSPORT=streamable-http on {settings.http_host}:{settings.http_port} needs "
            "CPERSONA_AUTH_TOKEN, or CPERSONA_ALLOW_UNAUTHENTICATED_HTTP=true to serve without auth"
        )


def serve(settings: Settings, args: argparse.Namespace | None = None) -> int:
    """Run the MCP server until the client disconnects."""
    from cpersona.mcp.server import build_server
    from cpersona.mcp.stdio import run_stdio
    from cpersona.service.engine import Engine

    if settings.transport != "stdio":
        check_http_auth(settings)
    engine = Engine(settings, start_background=False)
    try:
        address = (settings.http_host, settings.http_port)
        app = build_server(engine, settings.log_level, settings.auth_token, address)
        if settings.transport == "stdio":
            run_stdio(app)
        else:
            app.run("streamable-http", host=settings.http_host, port=settings.http_port)
    finally:
        engine.close()
    return 0
