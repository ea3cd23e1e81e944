"""The ACL through the real MCP path: per-client tokens over HTTP (every row of the
classification table at none / read / read-write), the `local` principal on stdio, denials
logged at WARNING, and no registered tool left unclassified."""

from __future__ import annotations

import json
import os

import anyio
import pytest
from cpersona.mcp.server import build_server
from cpersona.policy.acl_rules import RULES

from acl_table import ROWS
from conftest import run_mcp
from http_helpers import TOKENS, HttpServer, mcp_session, post_rpc

LEVELS = ("none", "read", "read-write")
RANK = {"none": 0, "read": 1, "read-write": 2}


def write_acl(path, clients) -> str:
    path.write_text(json.dumps({"clients": clients}), encoding="utf-8")
    os.chmod(path, 0o600)
    return str(path)


def level_client(level: str) -> dict:
    return {"client_id": f"c-{level}", "token": "${TOK_" + level.replace("-", "_").upper() + "}",
            "grants": {"team": level, "*": level, "own": "read-write"}}


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("acl")
    path = write_acl(tmp / "acl.json", [level_client(level) for level in LEVELS])
    tokens = {"TOK_NONE": TOKENS["none"], "TOK_READ": TOKENS["read"], "TOK_READ_WRITE": TOKENS["write"]}
    with HttpServer(tmp, CPERSONA_ACL_FILE=path, CPERSONA_AUTH_TOKEN=TOKENS["main"], **tokens) as srv:
        yield srv


def token_of(level: str) -> str:
    return {"none": TOKENS["none"], "read": TOKENS["read"], "read-write": TOKENS["write"]}[level]


def denied(result) -> bool:
    try:
        return json.loads(result.content[0].text).get("error") == "permission_denied"
    except (ValueError, AttributeError):
        return False


def test_every_registered_tool_over_http_at_every_grant(acl_server):
    async def scenario():
        outcomes = {}
        for level in LEVELS:
            async with mcp_session(acl_server.url, token_of(level)) as session:
                registered = {t.name for t in (await session.list_tools()).tools}
                for i, (tool, args, _needed) in enumerate(ROWS):
                    if tool in registered:
                        outcomes[(i, level)] = denied(await session.call_tool(tool, args))
        return registered, outcomes

    registered, outcomes = anyio.run(scenario)
    assert registered <= set(RULES)
    for (i, level), was_denied in outcomes.items():
        tool, args, needed = ROWS[i]
        should_deny = needed is not None and RANK[level] < needed
        assert was_denied == should_deny, (tool, args, level)
    assert {ROWS[i][0] for i, _ in outcomes} == registered, "every registered tool was exercised"
    assert "ACL denied store to client 'c-none'" in acl_server.stderr()
    assert "CPERSONA_AUTH_TOKEN is ignored" in acl_server.stderr()


def test_denial_body_names_tool_client_agent_and_permission(acl_server):
    response = post_rpc(acl_server.url, "tools/call", {"name": "store", "arguments": {
        "agent_id": "team", "message": {"content": "not allowed"}}}, token=TOKENS["read"])
    body = json.loads(response.json()["result"]["content"][0]["text"])
    assert body == {"ok": False, "error": "permission_denied", "tool": "store", "client_id": "c-read",
                    "agent_id": "team", "required": "read-write", "detail": body["detail"]}
    assert "c-read" in body["detail"] and "read-write" in body["detail"]


def test_the_shared_token_is_not_accepted_in_acl_mode(acl_server):
    assert post_rpc(acl_server.url, "tools/list", token=TOKENS["main"]).status_code == 401


def test_a_client_reads_and_writes_only_its_grants(acl_server):
    def store(token, agent):
        response = post_rpc(acl_server.url, "tools/call", {"name": "store", "arguments": {
            "agent_id": agent, "message": {"content": f"fact of {agent}"}}}, token=token)
        return json.loads(response.json()["result"]["content"][0]["text"])

    assert store(TOKENS["write"], "own")["result"] in ("stored", "skipped")
    assert store(TOKENS["read"], "own")["result"] in ("stored", "skipped")
    assert store(TOKENS["read"], "team")["error"] == "permission_denied"


def test_no_registered_tool_is_unclassified(engine_none):
    tools = anyio.run(build_server(engine_none).list_tools)
    unclassified = sorted(t.name for t in tools if t.name not in RULES)
    assert not unclassified, f"classify these tools in cpersona/policy/acl_rules.py RULES: {unclassified}"


def test_stdio_is_the_local_principal(tmp_path):
    path = write_acl(tmp_path / "acl.json", [
        {"client_id": "local", "grants": {"team": "read"}},
        {"client_id": "remote", "token": TOKENS["other"], "grants": {"*": "read-write"}},
    ])

    async def scenario(client):
        return (await client.call("recall", {"agent_id": "team", "query": "x"}),
                await client.call("store", {"agent_id": "team", "message": {"content": "x"}}))

    run = run_mcp(scenario, tmp_path / "s.db", {"CPERSONA_ACL_FILE": path})
    recall, store = run.result
    assert recall.data.get("error") != "permission_denied"
    assert store.data["error"] == "permission_denied" and store.data["client_id"] == "local"
    assert "ACL denied store to client 'local'" in run.stderr


def test_stdio_without_a_local_entry_is_denied_everything(tmp_path):
    path = write_acl(tmp_path / "acl.json", [{"client_id": "remote", "token": TOKENS["other"], "grants": {"*": "read"}}])

    async def scenario(client):
        return await client.call("persistence_status")

    run = run_mcp(scenario, tmp_path / "s.db", {"CPERSONA_ACL_FILE": path})
    assert run.result.data["error"] == "permission_denied"
    assert "'local' is not in the ACL file" in run.result.data["detail"]


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
def test_a_defective_acl_file_refuses_to_start_on_either_transport(tmp_path, transport):
    import subprocess
    import sys

    from conftest import assert_one_line_error, clean_env

    path = write_acl(tmp_path / "acl.json", [{"client_id": "a", "token": "${CPERSONA_TEST_UNSET}", "grants": {}}])
    proc = subprocess.run([sys.executable, "-m", "cpersona"], env=clean_env(
        CPERSONA_ACL_FILE=path, CPERSONA_TRANSPORT=transport, CPERSONA_DB_PATH=str(tmp_path / "x.db")),
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert_one_line_error(proc, "clients[0] (client_id 'a'): token ${CPERSONA_TEST_UNSET}")
    assert not (tmp_path / "x.db").exists()
