"""`cpersona proxy`: let an MCP host that speaks only stdio use a remote team server.

The host spawns `cpersona proxy` as if it were the server; every JSON-RPC line it writes is
POSTed to CPERSONA_REMOTE_URL (streamable HTTP) and every answer — a JSON body or the
messages of an SSE stream — is written back as one line on stdout. Nothing else is ever
written to stdout; diagnostics go to stderr.

* `Authorization: Bearer <CPERSONA_AUTH_TOKEN>` on every request when the token is set.
* The session id the remote issues (`Mcp-Session-Id`) is relayed on later requests, and the
  protocol version agreed at `initialize` is sent as `Mcp-Protocol-Version`; at the end of
  stdin the session is closed with DELETE.
* At most CPERSONA_PROXY_MAX_INFLIGHT requests await an answer; past that the proxy stops
  reading stdin until one completes (backpressure instead of unbounded memory).
* Connect and read timeouts (CPERSONA_PROXY_CONNECT_TIMEOUT_SECS / _READ_TIMEOUT_SECS).
* A remote that is down, refuses the token or answers garbage turns into a JSON-RPC error
  for that request naming the URL and the cause, so the host shows a reason instead of hanging.

Server-initiated messages outside a request's answer (the optional GET stream of stateful
servers) are not relayed; cpersona's own server is stateless and sends none.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import anyio
import httpx2

from cpersona.config import Settings
from cpersona.errors import ConfigError
from cpersona.policy.tokens import token_syntax_problem

log = logging.getLogger("cpersona.proxy")

#: JSON-RPC error codes: parse error, and the implementation-defined "server error" range.
PARSE_ERROR = -32700
REMOTE_ERROR = -32000
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
#: What an HTTP status from the remote means for the person reading the host's error.
STATUS_HINTS = {
    401: "the remote refused the credentials: set CPERSONA_AUTH_TOKEN to a token it accepts",
    403: "the remote refused the request (origin or permission)",
    404: "no MCP endpoint at this URL (or the session expired): check CPERSONA_REMOTE_URL",
    413: "the request is larger than the remote accepts (its CPERSONA_HTTP_MAX_BODY_BYTES)",
    421: "the remote does not answer to this host name: add it to the remote's CPERSONA_HTTP_ALLOWED_HOSTS",
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proxy", help="relay MCP from stdio to a remote streamable-HTTP server (CPERSONA_REMOTE_URL)",
                       description="Relay MCP JSON-RPC from stdin/stdout to a remote cpersona over streamable HTTP. "
                                   "Bearer token: CPERSONA_AUTH_TOKEN.")
    p.add_argument("--url", default=None, help="remote MCP endpoint (default CPERSONA_REMOTE_URL)")
    p.set_defaults(func=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Relay until stdin ends. Raises ConfigError for a malformed URL or token."""
    url = args.url or settings.remote_url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"CPERSONA_REMOTE_URL={url!r} is invalid: expected http(s)://host:port/mcp")
    token = settings.auth_token
    problem = token_syntax_problem(token) if token else None
    if problem is not None:
        raise ConfigError(f"CPERSONA_AUTH_TOKEN {problem}")
    relay = Relay(url, token, settings.proxy_max_inflight, settings.proxy_connect_timeout_secs,
                  settings.proxy_read_timeout_secs)
    anyio.run(relay.main)
    return 0


def error_reply(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def request_ids(message: Any) -> list[Any]:
    """Ids of the requests in a message or batch (notifications and responses have none)."""
    items = message if isinstance(message, list) else [message]
    return [m["id"] for m in items if isinstance(m, dict) and "method" in m and m.get("id") is not None]


class Relay:
    """One proxy session: stdin → POST `url` → stdout."""

    def __init__(self, url: str, token: str, max_inflight: int, connect_timeout: float, read_timeout: float,
                 stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self.url = url
        self.token = token
        self.max_inflight = max_inflight
        self.timeout = httpx2.Timeout(read_timeout, connect=connect_timeout)
        self.stdin = stdin if stdin is not None else sys.stdin.buffer
        self.stdout = stdout if stdout is not None else sys.stdout.buffer
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    def headers(self) -> dict[str, str]:
        out = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        if self.session_id:
            out[SESSION_HEADER] = self.session_id
        if self.protocol_version:
            out[VERSION_HEADER] = self.protocol_version
        return out

    async def main(self) -> None:
        limiter = anyio.Semaphore(self.max_inflight)
        self._write_lock = anyio.Lock()
        log.info("proxy: relaying stdio to %s (at most %d in flight)", self.url, self.max_inflight)
        async with httpx2.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            async with anyio.create_task_group() as tg:
                async for line in anyio.wrap_file(self.stdin):
                    if not line.strip():
                        continue
                    try:
                        message = json.loads(line)
                    except ValueError as err:
                        await self.write(error_reply(None, PARSE_ERROR, f"Parse error: {err}"))
                        continue
                    await limiter.acquire()
                    if isinstance(message, dict) and message.get("method") == "initialize":
                        # Nothing may overtake the handshake: its answer carries the session id
                        # and protocol version every later request must send.
                        await self._forward(client, message, limiter)
                    else:
                        tg.start_soon(self._forward, client, message, limiter)
            await self._close_session(client)

    async def write(self, message: Any) -> None:
        """One JSON-RPC message (or batch) as one line on stdout."""
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        async with self._write_lock:
            self.stdout.write(data)
            self.stdout.flush()

    async def _forward(self, client: httpx2.AsyncClient, message: Any, limiter: anyio.Semaphore) -> None:
        ids = request_ids(message)
        try:
            failure = await self._post(client, message, ids)
        except httpx2.TimeoutException as err:
            failure = f"no answer from {self.url} within the timeout ({type(err).__name__})"
        except httpx2.HTTPError as err:
            failure = f"cannot reach the remote cpersona at {self.url}: {type(err).__name__}: {err or 'failed'}"
        finally:
            limiter.release()
        if failure is None:
            return
        log.warning("proxy: %s", failure)
        for request_id in ids:
            await self.write(error_reply(request_id, REMOTE_ERROR, failure))

    async def _post(self, client: httpx2.AsyncClient, message: Any, ids: list[Any]) -> str | None:
        """POST one message and relay its answer; returns a failure text or None."""
        async with client.stream("POST", self.url, json=message, headers=self.headers()) as response:
            session = response.headers.get(SESSION_HEADER)
            if session:
                self.session_id = session
            if response.status_code == 202:
                return f"{self.url} accepted a request without answering it" if ids else None
            if response.status_code >= 400:
                return await self._http_failure(response, ids)
            kind = response.headers.get("content-type", "").lower()
            if kind.startswith("text/event-stream"):
                await self._relay_stream(response, ids)
                return None
            body = await response.aread()
        if not ids and not body.strip():
            return None
        try:
            answer = json.loads(body)
        except ValueError:
            return f"{self.url} answered something that is not JSON (content-type {kind or 'none'})"
        self._learn_version(answer)
        await self.write(answer)
        return None

    async def _relay_stream(self, response: httpx2.Response, ids: list[Any]) -> None:
        waiting = set(map(json.dumps, ids))
        async for event in httpx2.EventSource(response):
            if not event.data.strip():
                continue
            try:
                answer = json.loads(event.data)
            except ValueError:
                log.warning("proxy: skipped an SSE event that is not JSON")
                continue
            self._learn_version(answer)
            await self.write(answer)
            if isinstance(answer, dict) and ("result" in answer or "error" in answer):
                waiting.discard(json.dumps(answer.get("id")))
                if not waiting:
                    return

    async def _http_failure(self, response: httpx2.Response, ids: list[Any]) -> str | None:
        body = await response.aread()
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "error" in answer and "jsonrpc" in answer and len(ids) == 1:
            await self.write({**answer, "id": ids[0]})
            return None
        if response.status_code == 404 and self.session_id:
            self.session_id = None  # the remote forgot the session: the host must initialize again
        detail = answer.get("detail") or answer.get("error") if isinstance(answer, dict) else None
        hint = STATUS_HINTS.get(response.status_code, "the remote failed")
        return f"{self.url} answered HTTP {response.status_code}: {hint}" + (f" ({detail})" if detail else "")

    def _learn_version(self, answer: Any) -> None:
        result = answer.get("result") if isinstance(answer, dict) else None
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str) \
                and isinstance(result.get("serverInfo"), dict):
            self.protocol_version = result["protocolVersion"]

    async def _close_session(self, client: httpx2.AsyncClient) -> None:
        if not self.session_id:
            return
        try:
            await client.delete(self.url, headers=self.headers())
        except httpx2.HTTPError as err:
            log.info("proxy: closing the remote session failed: %s", err)
