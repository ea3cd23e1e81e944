"""A client built on the 1.x `mcp` SDK can still talk to the server.

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
                init = await s.initialize()
                out["server"] = init.serverInfo.name
                out["tools"] = sorted(t.name for t in (await s.list_tools()).tools)
                stored = await s.call_tool("store", {"agent_id": "a", "message": {"content": "kept by a 1.x client ERR_V1_42"}})
                out["store"] = json.loads(stored.content[0].text)
                found = await s.call_tool("recall", {"agent_id": "a", "query": "ERR_V1_42"})
                out["recall"] = json.loads(found.content[0].text)
                bad = await s.call_tool("recall", {"agent_id": "a", "query": "x", "limit": 0})
                out["bad"] = {"is_error": bad.isError, "text": bad.content[0].text}
        print(json.dumps(out))

    anyio.run(main)
    """
)


@pytest.mark.skipif(not MCP1_PYTHON, reason="CPERSONA_MCP1_PYTHON not set (interpreter with mcp<2)")
def test_mcp1_client_round_trip(tmp_path):
    proc = subprocess.run(
        [MCP1_PYTHON, "-c", SCRIPT, sys.executable, str(tmp_path / "m.db")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["server"] == "cloto-mcp-cpersona"
    assert {"store", "recall", "archive_episode", "list_memories", "list_episodes"} <= set(out["tools"])
    assert out["store"]["result"] == "stored"
    assert out["recall"]["messages"][-1]["content"] == "kept by a 1.x client ERR_V1_42"
    assert out["bad"]["is_error"] is True and "limit" in out["bad"]["text"]
