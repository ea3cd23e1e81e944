"""The streamable-HTTP transport through real HTTP: startup refusals, the bearer check and
its 401, CORS pre-flight, `/` and `/mcp`, stateless requests, the Host/Origin check, the
body cap, the opt-in warning — and the real SDK client round trip."""

from __future__ import annotations

import subprocess
import sys

import anyio
import httpx2
import pytest

from http_helpers import TOKENS, HttpServer, call_json, mcp_session, post_rpc, server_env, tool_payload

TOKEN = TOKENS["main"]


def _start_fails(tmp_path, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "cpersona"], env=server_env(tmp_path, **env), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "h.db").exists(), "refused before the database was opened"
    return proc


def test_http_without_any_auth_refuses_to_start(tmp_path):
    err = _start_fails(tmp_path).stderr
    assert "CPERSONA_AUTH_TOKEN" in err and "CPERSONA_ACL_FILE" in err and "CPERSONA_ALLOW_UNAUTHENTICATED_HTTP" in err
    assert "127.0.0.1:8402" in err


@pytest.mark.parametrize(("token", "needle"), [
    ("x", "at least 32"),
    ("a" * 40, "distinct"),
    (f" {TOKEN}", "whitespace"),
    (f"{TOKEN}\n", "whitespace"),
    ("ü" * 40, "non-ASCII"),
    ("tok en" + TOKEN, "letters, digits"),
])
def test_weak_or_malformed_token_refuses_to_start_and_is_never_trimmed(tmp_path, token, needle):
    err = _start_fails(tmp_path, CPERSONA_AUTH_TOKEN=token).stderr
    assert "CPERSONA_AUTH_TOKEN" in err and needle in err
    assert token.strip() not in err or len(token.strip()) < 2, "the token itself is never printed"


def test_malformed_cors_origin_refuses_to_start(tmp_path):
    err = _start_fails(tmp_path, CPERSONA_AUTH_TOKEN=TOKEN, CPERSONA_CORS_ORIGINS="*").stderr
    assert "CPERSONA_CORS_ORIGINS" in err


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("http")
    with HttpServer(tmp, CPERSONA_AUTH_TOKEN=TOKEN, CPERSONA_HTTP_MAX_BODY_BYTES="65536",
                    CPERSONA_HTTP_ALLOWED_HOSTS="memory.example.org") as srv:
        yield srv


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {TOKEN}"},
                                     {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": "Bearer"}])
def test_401_body_and_header_point_at_no_authorization_server(server, headers):
    response = post_rpc(server.url, "tools/list", headers=headers)
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}
    assert response.headers["www-authenticate"] == "Bearer"
    assert "resource_metadata" not in response.text
    assert httpx2.get(server.base + "/.well-known/oauth-protected-resource").status_code in (401, 404)


def test_bearer_scheme_is_case_insensitive(server):
    response = post_rpc(server.url, "tools/list", headers={"Authorization": f"bearer {TOKEN}"})
    assert response.status_code == 200


def test_cors_preflight_from_claude_ai_passes_without_a_token(server):
    response = httpx2.options(server.base + "/", headers={
        "Origin": "https://claude.ai", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://claude.ai"
    allowed = response.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"} <= {
        h.strip() for h in allowed.split(",")}
    assert "POST" in response.headers["access-control-allow-methods"]
    other = httpx2.options(server.url, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in other.headers


def test_browser_request_from_an_allowed_origin_exposes_the_session_header(server):
    response = post_rpc(server.base + "/", "tools/list", token=TOKEN, headers={"Origin": "https://www.claude.ai"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://www.claude.ai"
    assert "mcp-session-id" in response.headers["access-control-expose-headers"].lower()


@pytest.mark.parametrize("path", ["/mcp", "/"])
def test_stateless_tool_call_without_initialize_or_session_id(server, path):
    stored = post_rpc(server.base + path, "tools/call", {"name": "store", "arguments": {
        "agent_id": "stateless", "message": {"content": f"stateless write via {path} ERR_SL_{len(path)}"}}}, token=TOKEN)
    assert stored.status_code == 200, stored.text
    assert "mcp-session-id" not in stored.headers
    assert tool_payload(stored)["result"] == "stored"
    found = post_rpc(server.base + path, "tools/call", {"name": "recall", "arguments": {
        "agent_id": "stateless", "query": f"ERR_SL_{len(path)}"}}, token=TOKEN)
    assert tool_payload(found)["messages"][-1]["content"] == f"stateless write via {path} ERR_SL_{len(path)}"


@pytest.mark.parametrize("path", ["/mcp", "/"])
def test_real_sdk_client_round_trip_on_both_paths(server, path):
    async def scenario():
        async with mcp_session(server.base + path, TOKEN) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            stored = await call_json(session, "store", {"agent_id": "h", "message": {"content": f"via http {path}"}})
            found = await call_json(session, "recall", {"agent_id": "h", "query": f"via http {path}"})
            return tools, stored, found

    tools, stored, found = anyio.run(scenario)
    assert {"store", "recall", "check_update"} <= tools
    assert stored["result"] in ("stored", "skipped")
    assert any(m["content"] == f"via http {path}" for m in found["messages"])


@pytest.mark.parametrize(("headers", "status", "error"), [
    ({"Host": "evil.example"}, 421, "misdirected_request"),
    ({"Host": "evil.example:80"}, 421, "misdirected_request"),
    ({"Origin": "https://evil.example"}, 403, "forbidden_origin"),
    ({"Origin": "null"}, 403, "forbidden_origin"),
])
def test_dns_rebinding_host_and_origin_are_refused_with_a_json_body(server, headers, status, error):
    response = post_rpc(server.url, "tools/list", token=TOKEN, headers=headers)
    assert response.status_code == status
    assert response.json()["error"] == error and response.json()["detail"]


@pytest.mark.parametrize("host", ["memory.example.org", "memory.example.org:443", "localhost:1", "[::1]:8402"])
def test_listed_and_loopback_hosts_are_answered(server, host):
    response = post_rpc(server.url, "tools/list", token=TOKEN, headers={"Host": host})
    assert response.status_code == 200


def test_request_body_over_the_cap_gets_413_and_writes_nothing(server):
    big = post_rpc(server.url, "tools/call", {"name": "store", "arguments": {
        "agent_id": "cap", "message": {"content": "x" * 70_000}}}, token=TOKEN)
    assert big.status_code == 413
    listed = post_rpc(server.url, "tools/call", {"name": "list_memories", "arguments": {"agent_id": "cap"}}, token=TOKEN)
    assert tool_payload(listed)["count"] == 0


def test_websocket_is_closed_when_auth_is_configured(server):
    response = httpx2.get(server.url, headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                               "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZQ=="})
    assert response.status_code in (401, 403, 426)


def test_unauthenticated_opt_in_warns_once_for_forwarded_requests(tmp_path):
    with HttpServer(tmp_path, CPERSONA_ALLOW_UNAUTHENTICATED_HTTP="true") as srv:
        assert "WITHOUT authentication" in srv.stderr()
        assert post_rpc(srv.url, "tools/list").status_code == 200
        assert "logged once per process" not in srv.stderr(), "a loopback request is not warned about"
        for _ in range(3):
            assert post_rpc(srv.url, "tools/list", headers={"X-Forwarded-For": "203.0.113.7"}).status_code == 200
        assert srv.stderr().count("logged once per process") == 1
        assert "x-forwarded-for" in srv.stderr()


def test_health_route_is_liveness_only_and_needs_no_token(server):
    from cpersona import __version__

    response = httpx2.get(server.base + "/health")
    assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
    body = response.json()
    assert set(body) == {"status", "version", "uptime_seconds"}  # nothing about the stored data
    assert body["status"] == "ok" and body["version"] == __version__ and body["uptime_seconds"] >= 0
    assert httpx2.post(server.url, json={}).status_code == 401  # the tools still need the token


def test_a_port_in_use_stops_the_start_with_one_line(tmp_path):
    import socket

    with socket.socket() as taken:  # as another server listens: SO_REUSEADDR, listening
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = _start_fails(tmp_path, CPERSONA_AUTH_TOKEN=TOKEN, CPERSONA_HTTP_PORT=str(port)).stderr
    assert err.strip().count("\n") == 0, err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "CPERSONA_HTTP_PORT" in err
