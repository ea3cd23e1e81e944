"""The streamable-HTTP application: the SDK's stateless MCP endpoint at `/mcp` and `/`,
wrapped (outermost first) in

1. CORS (Starlette's `CORSMiddleware`) for CPERSONA_CORS_ORIGINS, so a browser-based
   host's pre-flight `OPTIONS` is answered before anything asks for a token;
2. the Host/Origin check against DNS rebinding (`mcp/http_origin.py`), for every bind address;
3. the bearer check (`mcp/http_auth.py`): one token, the ACL file's per-client tokens, or
   the explicit opt-in to none;
4. the request hints (`mcp/hints.py`): a recall's query starts embedding once its body is read;
5. the SDK's request-body cap (CPERSONA_HTTP_MAX_BODY_BYTES → 413) and its stateless
   session manager: every request is self-contained (no session id is issued or needed), so
   any replica can answer any request, and the caller's client id rides on the request to
   the tool check (`mcp/access.py`).

Responses are plain JSON (no SSE stream per request): the tools send no progress
notifications, and JSON is what every client and proxy handles.
"""

from __future__ import annotations

import logging
import socket

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp

from cpersona.config import Settings
from cpersona.errors import ConfigError
from cpersona.mcp.hints import Hint, RequestHints
from cpersona.mcp.http_auth import BearerAuth, Check
from cpersona.mcp.http_origin import HostOriginGuard, HostRules

log = logging.getLogger("cpersona.http")

MCP_PATHS = ("/mcp", "/")
#: Connections waiting to be accepted (uvicorn's default).
LISTEN_BACKLOG = 2048
CORS_METHODS = ("GET", "POST", "DELETE", "OPTIONS")
CORS_HEADERS = ("Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id")
CORS_EXPOSE = ("Mcp-Session-Id",)


def build_http_app(server: MCPServer, settings: Settings, check: Check | None, rules: HostRules,
                   hint: Hint | None = None) -> ASGIApp:
    """The ASGI app serving `server` over stateless streamable HTTP.

    Args:
        server: the MCP server (tools and middleware registered).
        settings: HTTP settings (body cap, bind address).
        check: the bearer check (`http_auth.token_check` / `acl_check`); None = open mode.
        rules: accepted Host names and browser origins (`http_origin.host_rules`).
        hint: given each authenticated request body (`hints.RequestHints`); None = none.
    """
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATHS[0], stateless_http=True, json_response=True,
        max_request_body_size=settings.http_max_body_bytes, host=settings.http_host,
        # Host/Origin are checked by HostOriginGuard for every route, before authentication.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    endpoint = next(r.endpoint for r in app.routes if isinstance(r, Route) and r.path == MCP_PATHS[0])
    for path in MCP_PATHS[1:]:
        app.router.routes.append(Route(path, endpoint=endpoint))
    inner: ASGIApp = RequestHints(app, hint) if hint is not None else app
    guarded = HostOriginGuard(BearerAuth(inner, check), rules)
    return CORSMiddleware(guarded, allow_origins=sorted(rules.origins), allow_methods=CORS_METHODS,
                          allow_headers=CORS_HEADERS, expose_headers=CORS_EXPOSE)


def listen(settings: Settings) -> socket.socket:
    """The listening socket at CPERSONA_HTTP_HOST:CPERSONA_HTTP_PORT, made before anything else
    starts, so a port in use (or an address this machine does not have) stops the start with
    one line instead of uvicorn's log after the banner. Bound as uvicorn binds (IPv6 when the
    host holds a colon, else IPv4; SO_REUSEADDR) and listening at once, so a second server
    started on the same port meanwhile is refused here too. Raises ConfigError."""
    host, port = settings.http_host, settings.http_port
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as err:
        sock.close()
        why = err.strerror or str(err)
        raise ConfigError(f"cannot listen on {host}:{port} (CPERSONA_HTTP_HOST / CPERSONA_HTTP_PORT): {why}") from None
    return sock


def serve_http(app: ASGIApp, settings: Settings, sock: socket.socket | None = None) -> None:
    """Run `app` with uvicorn until interrupted, on `sock` (from `listen`), else on
    CPERSONA_HTTP_HOST:CPERSONA_HTTP_PORT."""
    import uvicorn

    config = uvicorn.Config(app, host=settings.http_host, port=settings.http_port,
                            log_level=settings.log_level, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock] if sock is not None else None)
