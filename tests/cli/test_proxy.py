"""`cpersona proxy`: a real stdio MCP client → the proxy → a real HTTP server; and the relay's
rules against a scripted remote (session id, SSE answers, bounded in-flight, errors)."""

from __future__ import annotations

import io
import json
import sys
import threading
import time

import anyio
import pytest
from cpersona.cli.proxy import PARSE_ERROR, REMOTE_ERROR, Relay
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from http_helpers import TOKENS, HttpServer, LocalServer, QuietHandler, free_port

TOKEN = TOKENS["main"]


def proxy_params(url: str, token: str = TOKEN) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "cpersona", "proxy"],
                                 env={"CPERSONA_REMOTE_URL": url, "CPERSONA_AUTH_TOKEN": token,
                                      "CPERSONA_PROXY_CONNECT_TIMEOUT_SECS": "2", "CPERSONA_UPDATE_CHECK": "false"})


async def through_proxy(params: StdioServerParameters, scenario):
    with anyio.fail_after(90):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await scenario(session)


def test_stdio_client_through_the_proxy_to_the_http_server(tmp_path):
    async def scenario(session):
        init = await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        stored = await session.call_tool("store", {"agent_id": "p", "message": {"content": "relayed ERR_PROXY_9"}})
        found = await session.call_tool("recall", {"agent_id": "p", "query": "ERR_PROXY_9"})
        return init, tools, json.loads(stored.content[0].text), json.loads(found.content[0].text)

    with HttpServer(tmp_path, CPERSONA_AUTH_TOKEN=TOKEN) as server:
        init, tools, stored, found = anyio.run(through_proxy, proxy_params(server.url), scenario)
    assert init.server_info.name == "cloto-mcp-cpersona"
    assert {"store", "recall", "check_update"} <= tools
    assert stored["result"] == "stored"
    assert found["messages"][-1]["content"] == "relayed ERR_PROXY_9"


def test_remote_down_is_a_clear_error_not_a_hang():
    async def scenario(session):
        with pytest.raises(MCPError) as err:
            await session.initialize()
        return str(err.value)

    message = anyio.run(through_proxy, proxy_params(f"http://127.0.0.1:{free_port()}/mcp"), scenario)
    assert "cannot reach the remote cpersona" in message and "127.0.0.1" in message


def test_wrong_token_names_the_variable(tmp_path):
    async def scenario(session):
        with pytest.raises(MCPError) as err:
            await session.initialize()
        return str(err.value)

    with HttpServer(tmp_path, CPERSONA_AUTH_TOKEN=TOKEN) as server:
        message = anyio.run(through_proxy, proxy_params(server.url, TOKENS["other"]), scenario)
    assert "HTTP 401" in message and "CPERSONA_AUTH_TOKEN" in message


# --------------------------------------------------------------- scripted remote
class ScriptedRemote:
    """A streamable-HTTP stand-in: issues a session id at initialize, answers tools/call
    over SSE after `delay` seconds, and records concurrency and the headers it saw."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.active = 0
        self.peak = 0
        self.seen: list[dict] = []
        self.deleted = False
        self._lock = threading.Lock()
        self.server = LocalServer(self._handler())
        self.url = f"{self.server.base}/mcp"

    def stop(self) -> None:
        self.server.stop()

    def _handler(self):
        remote = self

        class Handler(QuietHandler):
            def do_DELETE(self) -> None:
                remote.deleted = self.headers.get("mcp-session-id") == "sess-42"
                self.reply(204)

            def do_POST(self) -> None:
                message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with remote._lock:
                    remote.seen.append({k.lower(): v for k, v in self.headers.items()})
                    remote.active += 1
                    remote.peak = max(remote.peak, remote.active)
                try:
                    time.sleep(remote.delay)
                    self._answer(message)
                finally:
                    with remote._lock:
                        remote.active -= 1

            def _answer(self, message: dict) -> None:
                if "id" not in message:
                    self.reply(202)
                elif message["method"] == "initialize":
                    self.reply(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
                        "protocolVersion": "2025-06-18", "serverInfo": {"name": "scripted", "version": "1"},
                        "capabilities": {}}}).encode(), headers={"Mcp-Session-Id": "sess-42"})
                else:
                    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                       "params": {"progressToken": 1, "progress": 1}})
                    answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message["id"]}})
                    body = f"event: message\ndata: {note}\n\nevent: message\ndata: {answer}\n\n".encode()
                    self.reply(200, body, "text/event-stream")

        return Handler


def run_relay(url: str, lines: list[str], max_inflight: int = 8) -> list[dict]:
    stdout = io.BytesIO()
    relay = Relay(url, TOKEN, max_inflight, 2.0, 30.0, stdin=io.BytesIO("".join(lines).encode()), stdout=stdout)
    anyio.run(relay.main)
    return [json.loads(line) for line in stdout.getvalue().decode().splitlines()]


def rpc(method: str, request_id: int | None = None) -> str:
    message = {"jsonrpc": "2.0", "method": method, "params": {}}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message) + "\n"


def test_session_id_and_protocol_version_are_relayed_and_sse_is_unwrapped():
    remote = ScriptedRemote()
    try:
        out = run_relay(remote.url, [rpc("initialize", 1), rpc("notifications/initialized"), rpc("tools/call", 2)])
    finally:
        remote.stop()
    assert out[0]["result"]["serverInfo"]["name"] == "scripted"
    assert out[1]["method"] == "notifications/progress" and out[2] == {"jsonrpc": "2.0", "id": 2, "result": {"echo": 2}}
    first, *later = remote.seen
    assert "mcp-session-id" not in first and first["authorization"] == f"Bearer {TOKEN}"
    assert all(h["mcp-session-id"] == "sess-42" and h["mcp-protocol-version"] == "2025-06-18" for h in later)
    assert remote.deleted, "the session is closed at the end of stdin"


def test_in_flight_requests_are_bounded_and_all_answered():
    remote = ScriptedRemote(delay=0.2)
    try:
        out = run_relay(remote.url, [rpc("tools/call", i) for i in range(12)], max_inflight=3)
    finally:
        remote.stop()
    assert sorted(m["id"] for m in out if "id" in m) == list(range(12))
    assert remote.peak == 3


def test_a_line_that_is_not_json_gets_a_parse_error_and_the_relay_goes_on():
    remote = ScriptedRemote()
    try:
        out = run_relay(remote.url, ["{not json\n", rpc("tools/call", 5)])
    finally:
        remote.stop()
    assert out[0]["error"]["code"] == PARSE_ERROR and out[0]["id"] is None
    assert any(m.get("id") == 5 and m["result"] == {"echo": 5} for m in out[1:])


def test_unreachable_remote_answers_every_request_with_an_error():
    out = run_relay(f"http://127.0.0.1:{free_port()}/mcp", [rpc("tools/call", 1), rpc("notifications/x"),
                                                            rpc("tools/call", 2)])
    assert sorted(m["id"] for m in out) == [1, 2]
    assert all(m["error"]["code"] == REMOTE_ERROR and "cannot reach" in m["error"]["message"] for m in out)
