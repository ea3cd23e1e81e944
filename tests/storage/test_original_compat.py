"""The original CPersona still opens a database after this server wrote to it.

Runs the REAL original releases over MCP stdio when their console scripts are given
(they are not a dependency; install each in a throwaway venv outside the repo):

    python3 -m venv /tmp/orig254 && /tmp/orig254/bin/pip install cpersona==2.5.4
    CPERSONA_ORIGINAL_254=/tmp/orig254/bin/cpersona pytest tests/storage/test_original_compat.py
    (and CPERSONA_ORIGINAL_2614 for cpersona==2.6.14)

This server writes to a copy of the release's own fixture (store, episode, update, lock,
delete, profile, import, merge — with vectors from the fake /embed server), then the
original opens the file: its check_health must report no critical and no warn issue
beyond those of the pristine fixture, and its recall, store and export must work.

Declared associations (2.6.14 only): this server declares, retracts and deletes on a copy of
the 2.6 graph fixture and on a file of its own; the original then opens each, reports no new
problem, walks what we declared (`traverse`) and declares more, which this server reads back.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import anyio
import pytest

from conftest import FIXTURES, MCP_SCENARIO_TIMEOUT, new_engine, wait_until

RELEASES = {"original-2.5.4": "CPERSONA_ORIGINAL_254", "original-2.6.14": "CPERSONA_ORIGINAL_2614"}


def _original(command: str, db: Path, url: str, calls: list[tuple[str, dict]]) -> list[dict]:
    """The original's answers to `calls` on `db` (embedding over HTTP at `url`; '' = mode none)."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    mode = "http" if url else "none"
    env = {"CPERSONA_DB_PATH": str(db), "CPERSONA_EMBEDDING_MODE": mode, "EMBEDDING_MODE": mode,
           "CPERSONA_EMBEDDING_URL": url, "EMBEDDING_HTTP_URL": url, "PATH": os.environ.get("PATH", ""),
           "HOME": str(db.parent)}
    params = StdioServerParameters(command=command, args=[], env=env, cwd=str(db.parent))

    async def main() -> list[dict]:
        with anyio.fail_after(MCP_SCENARIO_TIMEOUT):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return [json.loads((await session.call_tool(n, a)).content[0].text) for n, a in calls]

    return anyio.run(main)


def _problems(report: dict) -> set[str]:
    """Issue types of severity warn / critical, minus the host's file-permission findings."""
    return {i["type"] for i in report["issues"] if i["severity"] in ("warn", "critical")
            and not i["type"].endswith("reachable_by_other_accounts")}


@pytest.mark.parametrize("release", list(RELEASES))
def test_the_original_opens_the_file_after_we_wrote_to_it(release, tmp_path, fake_embed):
    command = os.environ.get(RELEASES[release])
    if not command or not FIXTURES.is_dir():
        pytest.skip(f"{RELEASES[release]} not set (console script of the original {release[9:]})")
    pristine, ours = tmp_path / "pristine.db", tmp_path / "ours.db"
    for path in (pristine, ours):
        shutil.copyfile(FIXTURES / release / "memory.db", path)
        path.chmod(0o600)
    eng = new_engine(ours, embedding_mode="http", embedding_url=fake_embed.url)
    try:
        assert eng.store("kai", "Ours: the release train leaves every second Tuesday.", msg_id="ours-1",
                         channel="#alerts")["embedded"]
        assert eng.archive_episode("kai", "Ours: planned the release train.")["ok"]
        assert eng.update_memory(2, "Deploys go out on Thursdays after the 15:00 review.")["ok"]
        assert eng.lock_memory(3)["ok"] and eng.delete_memory(5)["ok"]
        assert eng.update_profile("mika", "Frontend lead; prefers pnpm.")["ok"]
        export = FIXTURES / "original-2.6.14" / "export-mika.jsonl"
        assert eng.import_memories(str(export), "mika2", confined=False)["imported_memories"] == 2
        assert eng.merge_memories("mika2", "mika3", mode="move")["merged_memories"] == 2
        assert wait_until(lambda: eng.queue.pending() == 0, timeout=30)  # our queue embedded what was imported
    finally:
        eng.close()
    baseline = _original(command, pristine, fake_embed.url, [("check_health", {})])[0]
    health, found, stored, exported = _original(command, ours, fake_embed.url, [
        ("check_health", {}),
        ("recall", {"agent_id": "kai", "query": "release train", "channel": "#alerts"}),
        ("store", {"agent_id": "kai", "message": {"content": "The original writes after us."}}),
        ("export_memories", {"agent_id": "", "output_path": str(tmp_path / "orig-export.jsonl")}),
    ])
    assert _problems(health) <= _problems(baseline), health
    assert health["severity_summary"]["critical"] == 0
    assert any(m.get("ref") == "mem:9" for m in found["messages"])  # our row, found by ITS vector search
    assert stored["ok"] is True
    assert exported["ok"] is True and exported["memories"] == 11 and exported["episodes"] == 4


def _declare_ours(eng) -> None:
    """Declarations this server writes: a new entity with a Japanese alias, a relation to an
    existing entity, a store rider, a retraction and a deleted memory."""
    stored = eng.store("kai", "Ours: Sora now runs the 決済 on-call rota.", msg_id="ours-graph", associations={
        "entities": [{"name": "Sora", "aliases": ["ソラ"]}, {"name": "payments team"}],
        "relations": [{"subject": "Sora", "predicate": "member of", "object": "payments team"}]})
    assert stored["result"] == "stored" and stored["associations"]["dropped"] == []
    declared = eng.declare_associations("kai", {"entities": [{"name": "on-call rota", "aliases": ["当番表"]}],
                                                "relations": [{"subject": "Sora", "predicate": "runs",
                                                               "object": "on-call rota"}]},
                                        anchor_ref=f"mem:{stored['id']}")
    assert declared["dropped"] == [] and len(declared["relations"]) == 1
    scratch = eng.declare_associations("kai", {"relations": [{"subject": "Sora", "predicate": "dislikes",
                                                              "object": "pagers"}]})
    assert eng.declare_associations("kai", retract={"relations": scratch["relations"]})["retracted"]["relations"] == 1


@pytest.mark.parametrize("start", ["original-2.6.14-graph", "ours"])
def test_the_original_walks_the_associations_we_declared(start, tmp_path):
    command = os.environ.get(RELEASES["original-2.6.14"])
    if not command or not FIXTURES.is_dir():
        pytest.skip("CPERSONA_ORIGINAL_2614 not set (console script of the original 2.6.14)")
    db, pristine = tmp_path / "g.db", tmp_path / "pristine.db"
    if start == "ours":
        new_engine(db).close()  # a file of our own: v13 and the graph's tables
        shutil.copyfile(db, pristine)
    else:
        for path in (db, pristine):
            shutil.copyfile(FIXTURES / start / "memory.db", path)
    for path in (db, pristine):
        path.chmod(0o600)
    eng = new_engine(db)
    try:
        if start == "ours":
            assert eng.store("kai", "The payments team owns checkout.")["id"] == 1
        else:
            assert eng.delete_memory(1)["ok"]  # takes "Aiko leads payments team" and "mem:4 supersedes mem:1"
        _declare_ours(eng)
    finally:
        eng.close()
    baseline = _original(command, pristine, "", [("check_health", {})])[0]
    health, walked, japanese, more = _original(command, db, "", [
        ("check_health", {}),
        ("traverse", {"agent_id": "kai", "entity": "sora", "max_hops": 1}),
        ("traverse", {"agent_id": "kai", "entity": "当番表", "max_hops": 2}),
        ("declare_associations", {"agent_id": "kai", "associations": {
            "relations": [{"subject": "ソラ", "predicate": "mentors", "object": "Kenji"}]}}),
    ])
    assert _problems(health) <= _problems(baseline), health
    assert health["severity_summary"]["critical"] == 0
    names = {e["id"]: e["name"] for e in walked["entities"]}
    assert (walked["entities"][0]["name"], walked["entities"][0]["aliases"]) == ("Sora", ["ソラ"])
    relations = {(names[r["subject"]], r["predicate"], names[r["object"]]) for r in walked["relations"]}
    assert relations == {("Sora", "member of", "payments team"), ("Sora", "runs", "on-call rota")}
    assert walked["entities"][0]["mentions"] == [f"mem:{8 if start != 'ours' else 2}"]
    assert [e["name"] for e in japanese["entities"]][:2] == ["on-call rota", "Sora"]
    assert more["ok"] is True and more["dropped"] == []
    if start != "ours":
        walked_aiko = _original(command, db, "", [("traverse", {"agent_id": "kai", "entity": "Aiko"})])[0]
        assert "leads" not in {r["predicate"] for r in walked_aiko["relations"]}  # deleted with mem:1
    eng = new_engine(db)  # and we read what the original wrote after us
    try:
        back = eng.traverse("kai", "Sora", max_hops=1)
        assert {e["name"] for e in back["entities"]} == {"Sora", "payments team", "on-call rota", "Kenji"}
    finally:
        eng.close()
