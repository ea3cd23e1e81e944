"""export / import never touch the server's own files, and an MCP export never replaces a
file that is not an earlier export — even when the export folder is the database's folder."""

from __future__ import annotations

import json

import pytest
from cpersona.errors import InvalidArgument

from conftest import db_counts, new_engine, run_mcp

OWN = ["shared.db", "shared.db-wal", "shared.db-shm", "shared.db-journal", "shared.db.calibration.json",
       "update-check.json"]


@pytest.fixture
def shared(tmp_path):
    """An engine whose export folder is the database's own folder."""
    eng = new_engine(tmp_path / "shared.db", export_dir=str(tmp_path))
    assert eng.store("a", "precious fact")["result"] == "stored"
    yield eng
    eng.close()


@pytest.mark.parametrize("name", OWN)
@pytest.mark.parametrize("confined", [True, False], ids=["mcp", "cli"])
def test_export_refuses_the_servers_own_files(shared, tmp_path, name, confined):
    target = name if confined else str(tmp_path / name)
    before = (tmp_path / name).read_bytes() if (tmp_path / name).exists() else None
    with pytest.raises(InvalidArgument, match=r"^output_path: .*is this server's"):
        shared.export_memories("a", target, confined=confined)
    assert ((tmp_path / name).read_bytes() if (tmp_path / name).exists() else None) == before
    assert shared.store("a", "still writable")["result"] == "stored"


def test_export_refuses_a_symlink_to_the_database(shared, tmp_path):
    (tmp_path / "innocent.jsonl").symlink_to(tmp_path / "shared.db")
    with pytest.raises(InvalidArgument, match="database file"):
        shared.export_memories("a", "innocent.jsonl")


@pytest.mark.parametrize("confined", [True, False], ids=["mcp", "cli"])
def test_import_refuses_the_live_database(shared, tmp_path, confined):
    shared.store("b", "another agent's secret")
    target = "shared.db" if confined else str(tmp_path / "shared.db")
    with pytest.raises(InvalidArgument, match=r"^input_path: .*this server's database file"):
        shared.import_memories(target, "a", confined=confined)
    assert db_counts(tmp_path / "shared.db")["memories"] == 2


def test_mcp_export_replaces_only_an_earlier_export(shared, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("the user's own notes\n", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="is not a cpersona export"):
        shared.export_memories("a", "notes.txt")
    assert notes.read_text(encoding="utf-8") == "the user's own notes\n"
    assert shared.export_memories("a", "a.jsonl")["ok"]
    assert shared.store("a", "a newer fact")["result"] == "stored"
    assert shared.export_memories("a", "a.jsonl")["memories"] == 2  # an earlier export is replaced
    assert shared.export_memories("a", str(notes), confined=False)["ok"]  # the CLI user named it


def test_over_mcp_the_database_survives_an_export_aimed_at_it(tmp_path):
    async def scenario(client):
        assert (await client.ok("store", {"agent_id": "a", "content": "precious fact"}))["ok"]
        refusals = [await client.ok("export_memories", {"agent_id": "a", "output_path": name})
                    for name in ("m.db", "m.db-wal", "m.db-shm")]
        stored = await client.ok("store", {"agent_id": "a", "content": "written after the attempts"})
        return refusals, stored

    run = run_mcp(scenario, tmp_path / "m.db", env={"CPERSONA_EXPORT_DIR": str(tmp_path)})
    refusals, stored = run.result
    assert all(r["ok"] is False and "this server's" in r["error"] for r in refusals), json.dumps(refusals)
    assert stored["result"] == "stored"
    assert db_counts(tmp_path / "m.db")["memories"] == 2
