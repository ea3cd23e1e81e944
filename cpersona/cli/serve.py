"""`cpersona serve` (the default command): run the MCP server until the client disconnects
(stdio) or the process is stopped (streamable HTTP)."""

from __future__ import annotations

import argparse

from cpersona.config import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve MCP on stdio (or streamable HTTP: CPERSONA_TRANSPORT)",
                       description="Serve the memory over MCP. Configured by CPERSONA_* variables (see README).")
    p.set_defaults(func=serve)


def serve(settings: Settings, args: argparse.Namespace | None = None) -> int:
    """Run the MCP server. Access (tokens, ACL file, Host/Origin rules) is checked before
    the database is opened; the once-per-start update check runs in the background."""
    from cpersona.mcp.security import Security
    from cpersona.mcp.server import build_server
    from cpersona.service.engine import Engine

    security = Security.from_settings(settings)
    engine = Engine(settings, start_background=False)
    try:
        engine.updates.start()
        app = build_server(engine, settings.log_level, security.guard(settings))
        if settings.transport == "stdio":
            app.run("stdio")
        else:
            from cpersona.mcp.http_app import build_http_app, serve_http

            assert security.rules is not None
            serve_http(build_http_app(app, settings, security.check, security.rules), settings)
    finally:
        engine.close()
    return 0
