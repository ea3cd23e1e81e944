"""Who may call the server, decided once at start, before the database is opened.

`Security.from_settings` refuses to start (ConfigError, one line) when:

* the transport is HTTP and there is no ACL file, no CPERSONA_AUTH_TOKEN and no explicit
  CPERSONA_ALLOW_UNAUTHENTICATED_HTTP=true — the bind address is not a factor: an address
  is not a reachability boundary;
* CPERSONA_ACL_FILE is set (either transport) but the file has a defect;
* the HTTP token is not a usable secret (`policy/tokens.py`: ASCII, ≥ 32 characters, no
  whitespace — never trimmed);
* a CORS origin or allowed host is malformed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from cpersona.config import Settings
from cpersona.errors import ConfigError
from cpersona.mcp.access import AccessGuard
from cpersona.mcp.http_auth import Check, acl_check, token_check
from cpersona.mcp.http_origin import HostRules, host_rules
from cpersona.policy.acl import AccessList, load_acl
from cpersona.policy.acl_rules import CallFacts
from cpersona.policy.tokens import check_token

log = logging.getLogger("cpersona.http")


@dataclass(frozen=True)
class Security:
    """`acl` (ACL mode) or None; for HTTP also the bearer `check` (None = open) and the
    Host/Origin `rules`."""

    transport: str
    acl: AccessList | None = None
    check: Check | None = None
    rules: HostRules | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Security:
        """Validate the access configuration for `settings.transport`; see the module docstring."""
        http = settings.transport != "stdio"
        acl = load_acl(settings.acl_file) if settings.acl_file else None
        if acl is not None and settings.auth_token:
            log.warning("CPERSONA_AUTH_TOKEN is ignored: CPERSONA_ACL_FILE gives every client its own token")
        if not http:
            return cls(settings.transport, acl)
        if acl is not None:
            check: Check | None = acl_check(acl)
        elif settings.auth_token:
            check_token(settings.auth_token, "CPERSONA_AUTH_TOKEN")
            check = token_check(settings.auth_token)
        elif settings.allow_unauthenticated_http:
            check = None
            log.warning("serving MCP over HTTP on %s:%s WITHOUT authentication "
                        "(CPERSONA_ALLOW_UNAUTHENTICATED_HTTP=true): anyone who can reach it can read and change "
                        "every agent's memory", settings.http_host, settings.http_port)
        else:
            raise ConfigError(
                f"CPERSONA_TRANSPORT=streamable-http on {settings.http_host}:{settings.http_port} needs "
                "authentication: set CPERSONA_AUTH_TOKEN (one shared token) or CPERSONA_ACL_FILE (per-client "
                "tokens and grants), or CPERSONA_ALLOW_UNAUTHENTICATED_HTTP=true to serve without auth")
        return cls(settings.transport, acl, check, host_rules(settings))

    def guard(self, settings: Settings) -> AccessGuard | None:
        """The tool-call guard of ACL mode, or None (no ACL: the guard makes no decisions)."""
        if self.acl is None:
            return None
        # The export directory is declared by the portability settings; unset, export/import
        # paths reach the whole filesystem and the rules escalate to a '*' grant.
        confined = bool(str(getattr(settings, "export_dir", "") or "").strip())
        return AccessGuard(self.acl, self.transport, CallFacts(export_confined=confined))
