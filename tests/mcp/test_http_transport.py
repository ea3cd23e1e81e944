"""The streamable-HTTP transport: refuses to start without auth, enforces the bearer
token, and serves the same tools as stdio (real SDK client over HTTP)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_")}
    env.update(CPERSONA_DB_PATH=str(tmp_path / "h.db"), CPERSONA_EMBEDDING_MODE="none",
               CPERSONA_TRANSPORT="streamable-http", **extra)
    return env


def test_http_without_any_auth_refuses_to_start(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cpersona"], env=server_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "CPERSONA_AUTH_TOKEN" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "h.db").exists()


@pytest.fixture
def http_server(tmp_path):
    port = free_port()
    env = server_env(tmp_path, CPERSONA_HTTP_PORT=str(port), CPERSONA_AUTH_TOKEN="t0ken-ok")
    proc = subprocess.Popen([sys.executable, "-m", "cpersona"], env=env, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx2.get(url, timeout=1)
            break
        except httpx2.TransportError:
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_http_requires_the_bearer_token(http_server):
    assert httpx2.post(http_server, json={}).status_code == 401
    wrong = httpx2.post(http_server, json={}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401


def test_http_round_trip_with_token(http_server):
    async def scenario():
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer t0ken-ok"}) as client:
            async with streamable_http_client(http_server, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    stored = await session.call_tool("store", {"agent_id": "h", "message": {"content": "via http ERR_HTTP_7"}})
                    found = await session.call_tool("recall", {"agent_id": "h", "query": "ERR_HTTP_7"})
                    return json.loads(stored.content[0].text), json.loads(found.content[0].text)

    stored, found = anyio.run(scenario)
    assert stored["result"] == "stored"
    assert found["messages"][-1]["content"] == "via http ERR_HTTP_7"


def test_health_route_is_liveness_only_and_needs_no_token(http_server):
    from cpersona import __version__

    response = httpx2.get(http_server.removesuffix("/mcp") + "/health")
    assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
    body = response.json()
    assert set(body) == {"status", "version", "uptime_seconds"}  # nothing about the stored data
    assert body["status"] == "ok" and body["version"] == __version__ and body["uptime_seconds"] >= 0
    assert httpx2.post(http_server, json={}).status_code == 401  # the tools still need the token
