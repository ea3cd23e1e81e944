"""export_memories, import_memories, merge_memories and migrate_channel_axis over a real MCP
stdio client: schemas, confinement to the export folder, a whole round trip."""

from __future__ import annotations

import pytest
from mcp_types import ToolAnnotations

from conftest import run_mcp

TOOLS = {"export_memories": (False, True, False), "import_memories": (False, True, True),
         "merge_memories": (False, True, True), "migrate_channel_axis": (False, False, True)}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("portable-mcp") / "p.db"

    async def scenario(client):
        out = {"tools": (await client.session.list_tools()).tools}
        for i in range(3):
            await client.ok("store", {"agent_id": "kai", "message": {"content": f"fact {i} about the staging db",
                                                                     "id": f"m{i}"}, "channel": "discord"})
        await client.ok("update_profile", {"agent_id": "kai", "profile": "backend engineer"})
        out["export"] = await client.ok("export_memories", {"agent_id": "kai", "output_path": "kai.jsonl"})
        out["outside"] = await client.call("export_memories", {"agent_id": "kai", "output_path": "/tmp/../etc/x"})
        out["dry"] = await client.ok("import_memories", {"input_path": "kai.jsonl", "target_agent_id": "mio",
                                                         "dry_run": True})
        out["import"] = await client.ok("import_memories", {"input_path": "kai.jsonl", "target_agent_id": "mio"})
        out["again"] = await client.ok("import_memories", {"input_path": "kai.jsonl", "target_agent_id": "mio"})
        out["bad_mode"] = await client.call("merge_memories", {"source_agent_id": "kai", "target_agent_id": "x",
                                                               "mode": "teleport"})
        out["merge"] = await client.ok("merge_memories", {"source_agent_id": "mio", "target_agent_id": "kai",
                                                          "mode": "move"})
        out["channels"] = await client.ok("migrate_channel_axis", {})
        out["list"] = await client.ok("list_memories", {"agent_id": "mio"})
        return out

    return run_mcp(scenario, path, env={"CPERSONA_EXPORT_DIR": str(path.parent / "exchange")})


def test_tools_are_listed_with_schemas(run):
    tools = {t.name: t for t in run.result["tools"]}
    for name, (ro, destructive, idempotent) in TOOLS.items():
        tool = tools[name]
        notes = tool.annotations or ToolAnnotations()  # only the hints that differ from MCP's defaults are sent
        assert tool.description and bool(notes.read_only_hint) is ro, name
        effective = (True if notes.destructive_hint is None else notes.destructive_hint, bool(notes.idempotent_hint))
        assert effective == (destructive, idempotent), name
    merge = tools["merge_memories"].input_schema["properties"]
    assert merge["mode"]["enum"] == ["copy", "move"] and merge["strategy"]["enum"] == ["skip", "prefer_source"]
    assert run.stream_errors == [] and "Traceback" not in run.stderr


def test_round_trip_over_mcp(run, tmp_path_factory):
    r = run.result
    assert r["export"]["ok"] and r["export"]["path"].endswith("/exchange/kai.jsonl") and r["export"]["memories"] == 3
    assert r["outside"].data["ok"] is False and "outside the export folder" in r["outside"].data["error"]
    assert r["dry"]["dry_run"] is True and r["dry"]["imported_memories"] == 3
    assert (r["import"]["imported_memories"], r["import"]["profile_updated"]) == (3, True)
    assert (r["again"]["imported_memories"], r["again"]["skipped_memories"]) == (0, 3)
    assert r["bad_mode"].is_error and "mode" in r["bad_mode"].text  # the schema's enum, checked by the SDK
    assert (r["merge"]["merged_memories"], r["merge"]["skipped_memories"]) == (0, 3)  # kai has them already
    assert r["merge"]["left_at_source"]["memories"] == 3  # a move deletes only what it copied
    assert r["channels"]["dry_run"] is True and r["channels"]["unrecoverable_total"] == 6
    assert r["list"]["count"] == 3
