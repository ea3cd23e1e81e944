"""Bearer-token authentication for the streamable-HTTP transport, through the SDK's own
auth machinery (`AuthSettings` + a `TokenVerifier`): requests without
`Authorization: Bearer <CPERSONA_AUTH_TOKEN>` get 401 from the SDK's middleware.

The token is compared in constant time (`hmac.compare_digest` over UTF-8 bytes).
"""

from __future__ import annotations

import hmac

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings


class StaticTokenVerifier:
    """Accepts exactly one shared secret (CPERSONA_AUTH_TOKEN)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode("utf-8"), self._token):
            return AccessToken(token=token, client_id="cpersona-client", scopes=[])
        return None


def auth_settings(host: str, port: int) -> AuthSettings:
    """Resource-server settings for http://host:port/mcp (the server issues no tokens)."""
    base = f"http://{host}:{port}"
    # Validated from plain strings (not AnyHttpUrl(...)) so the model's url_preserve_empty_path applies.
    return AuthSettings.model_validate(
        {"issuer_url": base, "resource_server_url": f"{base}/mcp", "validate_token_resource": False}
    )
