"""The ACL check at the MCP boundary: a server middleware that decides every `tools/call`
before the SDK validates or dispatches it (the decision itself: `policy/acl_rules.py`).

The caller is the client the HTTP bearer check resolved (`PRINCIPAL_KEY` in the request's
ASGI scope, set by `mcp/http_auth.py`), or the reserved `local` client on stdio. A denied
call is answered as a normal tool result `{ok: false, error: "permission_denied", ...}` and
logged at WARNING; a call that reaches the check with no client in ACL mode (a wiring
fault) is denied and logged at ERROR.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import CallToolResult, TextContent

from cpersona.mcp.results import dump
from cpersona.policy.acl import LOCAL, AccessList
from cpersona.policy.acl_rules import CallFacts, decide

log = logging.getLogger("cpersona.acl")

#: Where the HTTP bearer check leaves the resolved client id in the ASGI scope.
PRINCIPAL_KEY = "cpersona.principal"


def principal_of(ctx: ServerRequestContext[Any, Any], transport: str) -> str | None:
    """The client id of the request: `local` on stdio, the bearer check's on HTTP."""
    if transport == "stdio":
        return LOCAL
    request = ctx.request
    scope = getattr(request, "scope", None)
    return scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None


class AccessGuard:
    """`ServerMiddleware` enforcing `acl` on every tools/call.

    Args:
        acl: the loaded ACL file.
        transport: "stdio" or "streamable-http" (where the caller's identity comes from).
        facts: settings the rules depend on (export confinement).
    """

    def __init__(self, acl: AccessList, transport: str, facts: CallFacts) -> None:
        self.acl = acl
        self.transport = transport
        self.facts = facts

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params or {}
        tool = params.get("name")
        tool = tool if isinstance(tool, str) else ""
        client_id = principal_of(ctx, self.transport)
        decision = decide(self.acl, client_id, tool, params.get("arguments") or {}, self.facts)
        if decision.allowed:
            return await call_next(ctx)
        body = decision.denial()
        if not client_id:
            log.error("ACL: %s called with no resolved client on %s; denied", tool, self.transport)
        else:
            log.warning("ACL denied %s to client %r: %s", tool, client_id, body["detail"])
        return CallToolResult(content=[TextContent(type="text", text=dump(body))], is_error=False)
