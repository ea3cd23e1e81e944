"""`GET /health` on the streamable-HTTP transport: liveness for load balancers and
container health checks. Unauthenticated by design (the SDK's custom routes bypass the
bearer check), so it answers only that the process is up — status, version, uptime —
and never anything about the stored data (no counts, no agent ids, no paths)."""

from __future__ import annotations

import time

from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse

from cpersona import __version__

PATH = "/health"


def register(app: MCPServer) -> None:
    """Add the liveness route to `app` (served by the HTTP transport only)."""
    started = time.monotonic()

    @app.custom_route(PATH, methods=["GET"], include_in_schema=False)
    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "version": __version__,
                             "uptime_seconds": round(time.monotonic() - started, 1)},
                            headers={"Cache-Control": "no-store"})
