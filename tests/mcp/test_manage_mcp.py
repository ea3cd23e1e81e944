"""Every management tool through the real MCP stdio path (one spawned server for the module):
tool list, annotations and descriptions; update/delete/lock/unlock/delete_episode/
delete_agent_data; listings; pause blocks every write tool; queue status; schema errors."""

from __future__ import annotations

import pytest

from conftest import db_rows, run_mcp

MANAGE_TOOLS = {
    # name: (readOnly, destructive, idempotent) as the original declares them
    "pause_persistence": (False, False, True),
    "resume_persistence": (False, False, True),
    "persistence_status": (True, None, None),
    "get_operating_context": (True, None, None),
    "update_memory": (False, True, True),  # overwrites the old text
    "delete_memory": (False, True, True),
    "delete_episode": (False, True, True),
    "lock_memory": (False, False, True),
    "unlock_memory": (False, False, True),
    "delete_agent_data": (False, True, True),
    "get_queue_status": (True, None, None),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("manage") / "m.db"

    async def scenario(c):
        r = {"tools": (await c.session.list_tools()).tools}

        async def store(content, agent="kai", **extra):
            return (await c.ok("store", {"agent_id": agent, "message": {"content": content}, **extra}))["id"]

        a, b, d = await store("the deploy window is friday"), await store("release notes live in docs/"), await store("tmp")
        other = await store("belongs to another agent", agent="mio")
        ep = (await c.ok("archive_episode", {"agent_id": "kai", "summary": "planned the release"}))["episode_id"]
        r["ids"] = dict(a=a, b=b, d=d, other=other, ep=ep)

        # --- edits
        r["update"] = await c.call("update_memory", {"memory_id": a, "content": "the deploy window is thursday", "agent_id": "kai"})
        r["recall_after_update"] = await c.ok("recall", {"agent_id": "kai", "query": "deploy window thursday"})
        r["update_not_owned"] = await c.call("update_memory", {"memory_id": other, "content": "x", "agent_id": "kai"})
        r["update_missing"] = await c.call("update_memory", {"memory_id": 999, "content": "x"})
        r["update_empty"] = await c.call("update_memory", {"memory_id": a, "content": "   "})
        r["lock"] = await c.call("lock_memory", {"memory_id": b, "agent_id": "kai"})
        r["lock_again"] = await c.call("lock_memory", {"memory_id": b})
        r["update_locked"] = await c.call("update_memory", {"memory_id": b, "content": "changed"})
        r["delete_locked"] = await c.call("delete_memory", {"memory_id": b})
        r["list_locked"] = await c.ok("list_memories", {"agent_id": "kai"})
        r["unlock"] = await c.call("unlock_memory", {"memory_id": b})
        r["delete"] = await c.call("delete_memory", {"memory_id": d, "agent_id": "kai"})
        r["delete_again"] = await c.call("delete_memory", {"memory_id": d})
        r["delete_episode_not_owned"] = await c.call("delete_episode", {"episode_id": ep, "agent_id": "mio"})
        r["delete_episode"] = await c.call("delete_episode", {"episode_id": ep})
        r["list_episodes"] = await c.ok("list_episodes", {})

        # --- schema violations never reach the handler
        r["bad_id"] = await c.call("delete_memory", {"memory_id": 0})
        r["bad_id_type"] = await c.call("lock_memory", {"memory_id": 1.5})
        r["bad_ttl"] = await c.call("pause_persistence", {"ttl_seconds": 0})
        r["missing_agent"] = await c.call("delete_agent_data", {})
        r["empty_agent"] = await c.call("delete_agent_data", {"agent_id": ""})

        # --- pause blocks every write tool
        r["status_before"] = await c.ok("persistence_status")
        r["pause"] = await c.ok("pause_persistence", {"ttl_seconds": 300})
        r["status_paused"] = await c.ok("persistence_status")
        snapshot = db_rows(path, "SELECT id, content, locked FROM memories ORDER BY id")
        r["paused"] = {
            "store": await c.call("store", {"agent_id": "kai", "message": {"content": "off the record"}}),
            "archive_episode": await c.call("archive_episode", {"agent_id": "kai", "summary": "off the record"}),
            "update_memory": await c.call("update_memory", {"memory_id": a, "content": "off the record"}),
            "delete_memory": await c.call("delete_memory", {"memory_id": a}),
            "delete_episode": await c.call("delete_episode", {"episode_id": 1}),
            "lock_memory": await c.call("lock_memory", {"memory_id": a}),
            "unlock_memory": await c.call("unlock_memory", {"memory_id": a}),
            "delete_agent_data": await c.call("delete_agent_data", {"agent_id": "kai"}),
        }
        r["unchanged_while_paused"] = db_rows(path, "SELECT id, content, locked FROM memories ORDER BY id") == snapshot
        r["recall_while_paused"] = await c.ok("recall", {"agent_id": "kai", "query": "deploy window"})
        r["resume"] = await c.ok("resume_persistence")
        r["resume_again"] = await c.ok("resume_persistence")

        # --- queue and operating context on a fresh instance
        r["queue"] = await c.ok("get_queue_status")
        r["context"] = await c.ok("get_operating_context")

        # --- wipe one agent
        r["wipe"] = await c.call("delete_agent_data", {"agent_id": "kai"})
        r["list_after_wipe"] = await c.ok("list_memories", {})
        return r

    missing_sidecar = path.parent / "no-operating-context.toml"
    return run_mcp(scenario, path, env={"CPERSONA_OPERATING_CONTEXT_PATH": str(missing_sidecar)})


def test_tools_are_listed_with_annotations_and_descriptions(run):
    tools = {t.name: t for t in run.result["tools"]}
    assert set(MANAGE_TOOLS) <= set(tools)
    for name, (ro, destructive, idempotent) in MANAGE_TOOLS.items():
        tool = tools[name]
        assert tool.description and len(tool.description) > 10, name
        notes = tool.annotations  # hints at their MCP default are not sent (readOnly false, destructive true)
        assert bool(notes.read_only_hint) is ro, name
        if not ro:
            effective = (notes.destructive_hint is not False, notes.idempotent_hint is True)
            assert effective == (destructive, idempotent), name
    schema = tools["update_memory"].input_schema
    assert set(schema["required"]) == {"memory_id", "content"}
    assert schema["properties"]["memory_id"]["type"] == ["integer", "string"]  # id or "mem:N"
    assert tools["pause_persistence"].input_schema["properties"]["ttl_seconds"]["maximum"] == 86400
    assert run.stream_errors == [] and "Traceback" not in run.stderr


def test_update_lock_delete_over_mcp(run):
    r, ids = run.result, run.result["ids"]
    a, b, d, other, ep = ids["a"], ids["b"], ids["d"], ids["other"], ids["ep"]
    assert r["update"].data == {"ok": True, "updated_id": a, "embedded": False}
    assert [m["content"] for m in r["recall_after_update"]["messages"]][-1] == "the deploy window is thursday"
    assert r["update_not_owned"].data == {"ok": False, "error": f"memory {other} is not owned by agent 'kai'"}
    assert r["update_missing"].data == {"ok": False, "error": "memory 999 not found"}
    assert r["update_empty"].failed and "content" in r["update_empty"].data["error"]
    assert r["lock"].data == r["lock_again"].data == {"ok": True, "locked_id": b}
    assert "is locked" in r["update_locked"].data["error"] and "is locked" in r["delete_locked"].data["error"]
    assert {m["id"]: m["locked"] for m in r["list_locked"]["memories"]}[b] is True
    assert r["unlock"].data == {"ok": True, "unlocked_id": b}
    assert r["delete"].data == {"ok": True, "deleted_id": d}
    assert r["delete_again"].data == {"ok": False, "error": f"memory {d} not found"}
    assert r["delete_episode_not_owned"].data["ok"] is False
    assert r["delete_episode"].data == {"ok": True, "deleted_id": ep}
    assert r["list_episodes"] == {"episodes": [], "count": 0}


def test_schema_violations_are_sdk_errors(run):
    r = run.result
    for key in ("bad_id_type", "bad_ttl", "missing_agent"):
        assert r[key].is_error and "validation error" in r[key].text.lower(), key
    assert r["bad_id"].data["ok"] is False and r["bad_id"].data["error"].startswith("memory_id:")
    assert r["empty_agent"].data == {"ok": False, "error": "agent_id: is required: name the agent whose data to delete"}


def test_pause_blocks_every_write_tool_over_mcp(run):
    r = run.result
    assert r["status_before"] == {"paused": False, "expires_at": None, "ttl_remaining_seconds": None, "scope": "process"}
    assert r["pause"]["paused"] is True and r["pause"]["ttl_seconds"] == 300 and "ok" not in r["pause"]
    assert r["status_paused"]["paused"] is True and 0 < r["status_paused"]["ttl_remaining_seconds"] <= 300
    action_ids = {"update_memory": "updated_id", "delete_memory": "deleted_id", "delete_episode": "deleted_id",
                  "lock_memory": "locked_id", "unlock_memory": "unlocked_id", "archive_episode": "episode_id"}
    for tool, reply in r["paused"].items():
        body = reply.data
        assert not reply.failed, (tool, reply.text)
        assert body["persisted"] is False and body["dry_run"] is True and f"{tool} skipped" in body["reason"], tool
        if tool in action_ids:
            assert body[action_ids[tool]] is None, tool
    assert r["paused"]["store"].data["id"] == "no-persist"
    assert r["paused"]["delete_agent_data"].data["deleted_memories"] == 0
    assert r["unchanged_while_paused"] is True
    assert r["recall_while_paused"]["messages"]  # reads are not gated
    assert r["resume"] == {"paused": False, "was_active": True, "scope": "process"}
    assert r["resume_again"]["was_active"] is False


def test_queue_and_dormant_context_on_a_fresh_instance(run):
    q = run.result["queue"]
    assert q["enabled"] is True and q["running"] is True and q["pending"] == 0 and q["failed"] == 0
    assert q["max_retries"] == 3 and q["retry_delay"] == 30.0 and "ok" not in q
    ctx = run.result["context"]
    assert ctx["ok"] is False and ctx["enabled"] is False and "no sidecar file at" in ctx["error"]


def test_delete_agent_data_over_mcp(run):
    wipe = dict(run.result["wipe"].data)
    assert isinstance(wipe.pop("deleted_calibration"), int)  # what the calibration layer dropped (0 if none)
    assert wipe == {"ok": True, "agent_id": "kai", "deleted_memories": 2, "deleted_profiles": 0, "deleted_episodes": 0,
                    "deleted_pending_tasks": 0}
    left = run.result["list_after_wipe"]
    assert [m["agent_id"] for m in left["memories"]] == ["mio"]
