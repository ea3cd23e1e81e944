"""DNS-rebinding protection of the HTTP transport: the `Host` and `Origin` of every request
are checked against the names this server answers to, whatever address it binds.

A web page can make a browser send requests to `127.0.0.1` or a LAN address by rebinding
its own DNS name to that address; the request then carries the page's name in `Host`
(and its origin in `Origin`). Answering only the names the operator listed defeats that
(MCP specification, "Transports": servers MUST validate the Origin header). The bind address
does not switch the check off: a server bound to 0.0.0.0 is reachable by MORE pages, not fewer.

* Hosts: loopback names (`127.0.0.1`, `localhost`, `[::1]`) on any port, the bind address
  when it is a specific one, and CPERSONA_HTTP_ALLOWED_HOSTS (`name` = any port,
  `name:port` = that port).
* Origins: absent (not a browser) passes; otherwise the origin must be one of
  CPERSONA_CORS_ORIGINS or an http(s) origin on an allowed host.

Refusals are JSON: 421 `{"error": "misdirected_request", "detail"}` for a Host, 403
`{"error": "forbidden_origin", "detail"}` for an Origin. Routes of `OPEN_ROUTES` (liveness)
are not checked: probes address pods by IP.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from cpersona.config import Settings
from cpersona.errors import ConfigError
from cpersona.mcp.http_auth import OPEN_ROUTES

log = logging.getLogger("cpersona.http")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "::", "[::]", "")
#: CPERSONA_CORS_ORIGINS value that turns CORS off.
NO_ORIGINS = "none"


def split_host(text: str) -> tuple[str, int | None]:
    """"Name:port" → ("name", port); IPv6 stays bracketed ("[::1]:80" → ("[::1]", 80)).

    Raises ValueError for an empty name or a port that is not 1..65535."""
    text = text.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        name, rest = (text[: end + 1], text[end + 1:]) if end > 0 else (text, "")
        port_text = rest[1:] if rest.startswith(":") else None
        if rest and port_text is None:
            raise ValueError(text)
    elif text.count(":") == 1:
        name, port_text = text.split(":")
    elif ":" in text:  # a bare IPv6 address
        name, port_text = f"[{text}]", None
    else:
        name, port_text = text, None
    if not name or name == "[]":
        raise ValueError(text)
    if port_text is None:
        return name, None
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(text)
    return name, port


@dataclass(frozen=True)
class HostRules:
    """The names (with an optional port) and the exact browser origins accepted."""

    hosts: frozenset[tuple[str, int | None]]
    origins: frozenset[str]

    def host_allowed(self, host: str) -> bool:
        try:
            name, port = split_host(host)
        except ValueError:
            return False
        return (name, None) in self.hosts or (name, port) in self.hosts

    def origin_allowed(self, origin: str) -> bool:
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and bool(parts.netloc) and self.host_allowed(parts.netloc)


def cors_origins(settings: Settings) -> list[str]:
    """CPERSONA_CORS_ORIGINS as a list of `scheme://host[:port]` origins.

    Raises ConfigError for "*" (a wildcard with Authorization headers would let any page
    act for the user) or an entry that is not an origin."""
    text = settings.cors_origins.strip()
    if text.lower() == NO_ORIGINS:
        return []
    origins = []
    for entry in (e.strip() for e in text.split(",")):
        parts = urlsplit(entry)
        if entry == "*" or parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") \
                or parts.query or parts.fragment:
            raise ConfigError(f"CPERSONA_CORS_ORIGINS entry {entry!r} is invalid: expected an origin such as "
                              "https://claude.ai (no path, no '*'), comma-separated, or 'none'")
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return origins


def host_rules(settings: Settings) -> HostRules:
    """The rules for `settings`; warns once when a non-loopback bind has no allowed hosts.

    Raises ConfigError naming a malformed CPERSONA_HTTP_ALLOWED_HOSTS entry."""
    hosts: set[tuple[str, int | None]] = {(name, None) for name in LOOPBACK_HOSTS}
    bind = settings.http_host.strip().lower()
    if bind not in WILDCARD_BINDS:
        hosts.add((split_host(bind)[0], None))
    for entry in (e.strip() for e in settings.http_allowed_hosts.split(",")):
        if not entry:
            continue
        try:
            hosts.add(split_host(entry))
        except ValueError:
            raise ConfigError(f"CPERSONA_HTTP_ALLOWED_HOSTS entry {entry!r} is invalid: expected name or "
                              "name:port, comma-separated") from None
    if not settings.http_allowed_hosts.strip() and bind not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        log.warning("HTTP binds %s but CPERSONA_HTTP_ALLOWED_HOSTS is empty: only requests addressed to %s%s are "
                    "answered (421 otherwise); list the names clients use", settings.http_host,
                    ", ".join(LOOPBACK_HOSTS), "" if bind in WILDCARD_BINDS else f" or {settings.http_host}")
    return HostRules(frozenset(hosts), frozenset(cors_origins(settings)))


class HostOriginGuard:
    """ASGI middleware applying `rules` to every HTTP request outside OPEN_ROUTES."""

    def __init__(self, app: ASGIApp, rules: HostRules) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope.get("method"), scope.get("path")) in OPEN_ROUTES:
            await self.app(scope, receive, send)
            return
        headers = {k.decode(): v.decode("latin-1") for k, v in scope.get("headers", ()) if k in (b"host", b"origin")}
        host, origin = headers.get("host", ""), headers.get("origin")
        if not self.rules.host_allowed(host):
            log.warning("refused a request for Host %r (not in CPERSONA_HTTP_ALLOWED_HOSTS)", host)
            await _refuse(scope, receive, send, 421, "misdirected_request",
                          f"this server does not answer to Host {host!r}; the operator lists the names it answers "
                          "in CPERSONA_HTTP_ALLOWED_HOSTS")
            return
        if origin is not None and not self.rules.origin_allowed(origin):
            log.warning("refused a request from Origin %r (not in CPERSONA_CORS_ORIGINS)", origin)
            await _refuse(scope, receive, send, 403, "forbidden_origin",
                          f"requests from the web origin {origin!r} are not allowed; the operator lists browser "
                          "origins in CPERSONA_CORS_ORIGINS")
            return
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, error: str, detail: str) -> None:
    await JSONResponse({"error": error, "detail": detail}, status_code=status)(scope, receive, send)
