"""A client built on the 1.x `mcp` SDK — what agents written for the original CPersona use —
can still talk to the server, with the original's call shapes.

The 1.x SDK cannot share a venv with 2.x, so this test drives a script in a separate
interpreter named by CPERSONA_MCP1_PYTHON (CI creates one with `pip install 'mcp<2'`);
it is skipped when the variable is unset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

MCP1_PYTHON = os.environ.get("CPERSONA_MCP1_PYTHON", "")

SCRIPT = textwrap.dedent(
    """
    import anyio, json, os, sys
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main():
        env = dict(os.environ, CPERSONA_DB_PATH=sys.argv[2], CPERSONA_EMBEDDING_MODE="none")
        params = StdioServerParameters(command=sys.argv[1], args=["-m", "cpersona"], env=env)
        out = {}
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                async def call(tool, args):
                    res = await s.call_tool(tool, args)
                    text = res.content[0].text
                    try:
                        return {"is_error": res.isError, "data": json.loads(text)}
                    except ValueError:
                        return {"is_error": res.isError, "text": text}

                init = await s.initialize()
                out["server"] = init.serverInfo.name
                tools = (await s.list_tools()).tools
                out["tools"] = sorted(t.name for t in tools)
                out["schemas"] = {t.name: t.inputSchema for t in tools}
                out["descriptions"] = {t.name: t.description for t in tools}
                out["store"] = await call("store", {"agent_id": "a", "message": {"content": "kept by a 1.x client ERR_V1_42"}})
                out["flat"] = await call("store", {"agent_id": "a", "content": "flat call shape ERR_V1_43", "id": "m-2",
                                                   "source": "claude-code", "lock": True, "session_key": "s-1"})
                out["recall"] = await call("recall", {"agent_id": "a", "query": "ERR_V1_42", "session_key": "s-1"})
                out["limit0"] = await call("recall", {"agent_id": "a", "query": "ERR_V1_42", "limit": 0})
                out["nul"] = await call("recall", {"agent_id": "a", "query": "ERR_V1_42\\x00kept"})
                out["refs_empty"] = await call("get_contents", {"agent_id": "a", "refs": []})
                out["list_clamped"] = await call("list_memories", {"agent_id": "a", "limit": 100000})
                out["delete_ref"] = await call("delete_memory", {"memory_id": "mem:1", "agent_id": "a"})
                out["bad"] = await call("recall", {"agent_id": "a", "query": "x", "limit": 101})
        print(json.dumps(out))

    anyio.run(main)
    """
)


def _refs(node) -> list[str]:
    """Every `$ref` / `$defs` key anywhere in a schema (a host that cannot resolve them fails)."""
    found = []
    if isinstance(node, dict):
        found += [k for k in node if k in ("$ref", "$defs", "definitions")]
        for value in node.values():
            found += _refs(value)
    elif isinstance(node, list):
        for value in node:
            found += _refs(value)
    return found


@pytest.mark.skipif(not MCP1_PYTHON, reason="CPERSONA_MCP1_PYTHON not set (interpreter with mcp<2)")
def test_mcp1_client_round_trip_with_the_originals_call_shapes(tmp_path):
    proc = subprocess.run(
        [MCP1_PYTHON, "-c", SCRIPT, sys.executable, str(tmp_path / "m.db")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["server"] == "cloto-mcp-cpersona"
    assert {"store", "recall", "archive_episode", "list_memories", "list_episodes"} <= set(out["tools"])
    assert all(not _refs(schema) for schema in out["schemas"].values())
    assert all(desc and desc.strip() for desc in out["descriptions"].values())
    assert out["store"]["data"]["result"] == "stored"
    flat = out["flat"]["data"]
    assert flat["result"] == "stored" and flat["locked"] is True
    assert out["recall"]["data"]["messages"][-1]["content"] == "kept by a 1.x client ERR_V1_42"
    assert out["limit0"] == {"is_error": False, "data": {"messages": []}}
    assert out["nul"]["data"]["messages"][-1]["content"] == "kept by a 1.x client ERR_V1_42"
    assert out["refs_empty"]["is_error"] is False and out["refs_empty"]["data"]["ok"] is False
    assert "refs" in out["refs_empty"]["data"]["error"]
    listed = out["list_clamped"]["data"]
    assert listed["count"] == 2 and {m["source"].get("id") for m in listed["memories"]} == {None, "claude-code"}
    assert out["delete_ref"]["data"] == {"ok": True, "deleted_id": 1}
    assert out["bad"]["is_error"] is True and "limit" in out["bad"]["text"]
