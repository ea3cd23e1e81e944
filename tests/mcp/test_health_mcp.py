"""check_health and deep_check through the real MCP stdio path; a server started on a
damaged file still answers and says the file is damaged."""

from __future__ import annotations

import shutil
import sqlite3

import anyio

from conftest import run_mcp


def test_health_tools_over_stdio(tmp_path):
    path = tmp_path / "h.db"

    async def scenario(c):
        tools = {t.name: t for t in (await c.session.list_tools()).tools}
        stored = await c.ok("store", {"agent_id": "kai", "message": {"content": "deploy now"}})
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("UPDATE memories SET content = '<@42> deploy now' WHERE id = ?", (stored["id"],))
        conn.close()
        report = await c.ok("check_health", {"checks": ["discord_mention"]})
        fixed = await c.ok("check_health", {"checks": ["discord_mention"], "fix": True})
        after = await c.ok("check_health", {"agent_id": "kai"})
        unknown = await c.call("check_health", {"checks": ["nope"]})
        bad_type = await c.call("check_health", {"fix": "yes"})
        deep = await c.ok("deep_check", {"agent_id": "kai"})
        return tools, report, fixed, after, unknown, bad_type, deep

    tools, report, fixed, after, unknown, bad_type, deep = run_mcp(scenario, path).result
    for name in ("check_health", "deep_check"):
        assert tools[name].annotations is None or not tools[name].annotations.read_only_hint
        assert len(tools[name].description) < 400  # the whole tool list must stay small
    assert report["issues"][0]["type"] == "discord_mention" and "ok" not in report
    assert fixed["issues"][0]["fixed"] == 1
    assert not [i for i in after["issues"] if i["type"] == "discord_mention"] and after["status"] == "healthy"
    assert unknown.failed and unknown.data["unknown_checks"] == ["nope"]
    assert bad_type.is_error and "fix" in bad_type.text
    assert deep["agent_id"] == "kai" and set(deep["results"]) >= {"short_content", "near_duplicate"}


def test_server_on_a_damaged_file_starts_and_says_so(tmp_path):
    from health.test_damaged_file import build, flip_middle

    source = build(tmp_path / "store.db")
    damaged = tmp_path / "damaged.db"
    shutil.copy(source, damaged)
    flip_middle(damaged)

    async def scenario(c):
        report = await c.ok("check_health", {"checks": ["sqlite_integrity"]})
        for _ in range(100):  # the start-up check runs in the background
            if "database_damage" in report:
                break
            await anyio.sleep(0.1)
            report = await c.ok("check_health", {"checks": ["sqlite_integrity"]})
        return report

    run = run_mcp(scenario, damaged)
    report = run.result
    assert report["status"] == "unhealthy" and report["issues"][0]["severity"] == "critical"
    assert report["database_damage"]
    assert "is damaged" in run.stderr and "cpersona checkup" in run.stderr
    assert "Traceback" not in run.stderr
