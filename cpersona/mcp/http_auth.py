"""The bearer check of the streamable-HTTP transport (an ASGI middleware).

Three modes, chosen at start (`cli/serve.py` refuses to serve HTTP with none of them):

* **acl** — the presented token is compared with EVERY client's token of the ACL file
  (`AccessList.authenticate`: constant time, no early exit); the client id is stored in the
  ASGI scope under `PRINCIPAL_KEY` and travels with the request to the tool check.
* **token** — one shared CPERSONA_AUTH_TOKEN, compared with `hmac.compare_digest` over bytes.
* **open** — no authentication (CPERSONA_ALLOW_UNAUTHENTICATED_HTTP=true). The first request
  that carries a forwarding header or comes from a non-loopback peer logs ONE warning per
  process: the server is reachable from further away than its operator may think.

The scheme `Bearer` is matched case-insensitively (RFC 7235 §2.1). A missing or wrong token
is answered `401 {"error": "unauthorized"}` with `WWW-Authenticate: Bearer` and nothing else:
the server runs no authorization server, so it points at none. `OPTIONS` requests and the
routes of `OPEN_ROUTES` (liveness probes) pass without a token; websocket requests are closed
with code 1008 (policy violation) whenever authentication is configured.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import threading
from collections.abc import Callable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from cpersona.mcp.access import PRINCIPAL_KEY
from cpersona.policy.acl import AccessList

log = logging.getLogger("cpersona.http")

#: (method, path) pairs that need no token: liveness only, never data.
OPEN_ROUTES: frozenset[tuple[str, str]] = frozenset({("GET", "/health"), ("HEAD", "/health")})
#: Headers a reverse proxy or CDN adds: their presence means the peer is not the client.
FORWARDING_HEADERS = (b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"forwarded", b"via",
                      b"x-real-ip", b"true-client-ip", b"cf-connecting-ip")
#: The principal recorded in single-token mode (the guard makes no decisions there).
TOKEN_PRINCIPAL = "token"

#: A check: the presented token (bytes) → client id, or None when it is not accepted.
Check = Callable[[bytes], str | None]


def token_check(token: str) -> Check:
    """Single shared token: constant-time comparison over the ASCII bytes."""
    expected = token.encode("ascii")
    return lambda presented: TOKEN_PRINCIPAL if hmac.compare_digest(presented, expected) else None


def acl_check(acl: AccessList) -> Check:
    """Per-client tokens of the ACL file."""
    return acl.authenticate


def is_open_route(scope: Scope) -> bool:
    """True for requests that never need a token (OPTIONS, OPEN_ROUTES)."""
    method = scope.get("method", "")
    return method == "OPTIONS" or (method, scope.get("path", "")) in OPEN_ROUTES


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


def bearer_token(scope: Scope) -> bytes | None:
    """The token of `Authorization: Bearer <token>` (scheme case-insensitive), or None."""
    raw = _header(scope, b"authorization")
    if raw is None:
        return None
    scheme, _, rest = raw.partition(b" ")
    token = rest.lstrip(b" ")
    return token if scheme.lower() == b"bearer" and token else None


def is_loopback_peer(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1, IPv4-mapped loopback and `localhost`; anything
    unparseable (or absent) counts as remote."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


async def unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    """401 {"error": "unauthorized"} + WWW-Authenticate: Bearer."""
    response = JSONResponse({"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
    await response(scope, receive, send)


class BearerAuth:
    """ASGI middleware: `check` None = open mode (unauthenticated, warned once)."""

    def __init__(self, app: ASGIApp, check: Check | None) -> None:
        self.app = app
        self.check = check
        self._warned = False
        self._warn_lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket" and self.check is not None:
            await send({"type": "websocket.close", "code": 1008})
            return
        if kind != "http":
            await self.app(scope, receive, send)
            return
        if self.check is None:
            self._warn_if_exposed(scope)
            await self.app(scope, receive, send)
            return
        if is_open_route(scope):
            await self.app(scope, receive, send)
            return
        presented = bearer_token(scope)
        principal = self.check(presented) if presented is not None else None
        if principal is None:
            await unauthorized(scope, receive, send)
            return
        scope[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, send)

    def _warn_if_exposed(self, scope: Scope) -> None:
        if self._warned:
            return
        forwarded = [h.decode("latin-1") for h in FORWARDING_HEADERS if _header(scope, h) is not None]
        client = scope.get("client")
        peer = client[0] if client else None
        if not forwarded and is_loopback_peer(peer):
            return
        with self._warn_lock:
            if self._warned:
                return
            self._warned = True
        reason = f"forwarding header(s) {', '.join(forwarded)}" if forwarded else f"a non-loopback peer ({peer})"
        log.warning("unauthenticated HTTP (CPERSONA_ALLOW_UNAUTHENTICATED_HTTP=true) received a request with %s: "
                    "anyone who can reach this server can read and change every agent's memory; set "
                    "CPERSONA_AUTH_TOKEN or CPERSONA_ACL_FILE (logged once per process)", reason)
