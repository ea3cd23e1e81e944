"""Spawning `python -m cpersona` on streamable HTTP for tests, and a real SDK client to it.

* `HttpServer(tmp_path, **env).start()` — a server on a free loopback port; `.url` is its
  /mcp endpoint, `.stderr()` what it logged; stopped by `.stop()` (or as a context manager).
* `mcp_session(url, token)` — an initialised `ClientSession` over streamable HTTP.
* `TOKENS` — strong test tokens (≥ 32 characters, as the server requires).
* `LocalServer(handler)` / `QuietHandler` — a scripted HTTP stand-in (fake index, fake remote).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

TOKENS = {name: f"test-token-{name}-0123456789abcdefghijklmnop" for name in
          ("main", "none", "read", "write", "other", "local")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPERSONA_", "EMBEDDING_"))}
    env.update(CPERSONA_DB_PATH=str(tmp_path / "h.db"), CPERSONA_EMBEDDING_MODE="none",
               CPERSONA_TRANSPORT="streamable-http", CPERSONA_UPDATE_CHECK="false")
    env.update(extra)
    return env


class HttpServer:
    """One spawned HTTP server (see module docstring)."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.port = int(env.pop("CPERSONA_HTTP_PORT", 0)) or free_port()
        self.env = server_env(tmp_path, CPERSONA_HTTP_PORT=str(self.port), **env)
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self._log = tmp_path / f"server-{self.port}.stderr"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> HttpServer:
        with self._log.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "cpersona"], env=self.env, stderr=err,
                                         stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.stderr()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"server did not listen within {timeout}s: {self.stderr()}")

    def stderr(self) -> str:
        return self._log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def post_rpc(url: str, method: str, params: dict | None = None, token: str | None = None,
             headers: dict | None = None, request_id: int = 1) -> httpx2.Response:
    """One raw JSON-RPC POST (no initialize, no session), as a stateless client sends it."""
    head = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        head["Authorization"] = f"Bearer {token}"
    head.update(headers or {})
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
    return httpx2.post(url, json=body, headers=head, timeout=30)


def tool_payload(response: httpx2.Response) -> dict:
    """The parsed JSON text of a tools/call answer."""
    return json.loads(response.json()["result"]["content"][0]["text"])


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def call_json(session: ClientSession, tool: str, arguments: dict | None = None) -> dict:
    result = await session.call_tool(tool, arguments or {})
    return json.loads(result.content[0].text)


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 request handler that logs nothing; `reply` sends one complete answer."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def reply(self, status: int, body: bytes = b"", content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LocalServer:
    """A threaded HTTP server on a free loopback port, serving `handler` in a daemon thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
