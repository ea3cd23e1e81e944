"""What a user switching from the original CPersona met, over a real MCP stdio client:
restoring an export with vectors into a new database, get_contents with a bare id,
delete_memory on another agent's locked row, and check_health / deep_check on a store used
the normal way (no finding the user cannot act on)."""

from __future__ import annotations

import pytest

from conftest import new_engine, run_mcp


@pytest.fixture(scope="module")
def restored(tmp_path_factory, fake_embed):
    folder = tmp_path_factory.mktemp("restore-mcp")
    src = new_engine(folder / "src.db", embedding_mode="http", embedding_url=fake_embed.url,
                     export_dir=str(folder / "exchange"))
    for i in range(3):
        src.store("dev", f"dev fact {i} about the release train")
    assert src.export_memories("dev", "dev-emb.jsonl", include_embeddings=True)["embeddings"] == 3
    src.close()

    async def scenario(client):
        out = {"import": await client.ok("import_memories", {"input_path": "dev-emb.jsonl"})}
        out["stats"] = await client.ok("get_queue_status", {})
        return out

    env = {"CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": fake_embed.url,
           "CPERSONA_EXPORT_DIR": str(folder / "exchange")}
    return run_mcp(scenario, folder / "new.db", env=env)


def test_an_export_with_vectors_restores_them_into_a_new_database(restored):
    res = restored.result["import"]
    assert res["imported_memories"] == 3 and res["embeddings_kept"] == 3 and res["embeddings_dropped"] == 0
    assert "vector_note" not in res  # every imported row has its vector
    assert restored.stream_errors == [] and "Traceback" not in restored.stderr


@pytest.fixture(scope="module")
def normal_use(tmp_path_factory):
    path = tmp_path_factory.mktemp("normal-use-mcp") / "n.db"

    async def scenario(client):
        out = {}
        stored = await client.ok("store", {"agent_id": "kai", "content": "the ferry leaves at nine"})
        await client.ok("store", {"agent_id": "kai", "content": "[Ann] I prefer the window seat"})
        await client.ok("store", {"agent_id": "kai", "content": "[Bo] the aisle seat, please",
                                  "source": {"type": "User", "id": "", "name": ""}})
        await client.ok("archive_episode", {"agent_id": "kai", "summary": "planned the ferry trip"})
        await client.ok("archive_episode", {"agent_id": "kai", "summary": "talked about seats",
                                            "history": [{"timestamp": "2026-01-05T10:00:00+00:00"}]})
        await client.ok("lock_memory", {"memory_id": stored["id"], "agent_id": "kai"})
        out["contents"] = await client.ok("get_contents", {"agent_id": "kai", "refs": [str(stored["id"]), "x:1"]})
        out["delete"] = await client.ok("delete_memory", {"memory_id": stored["id"], "agent_id": "someone-else"})
        out["health"] = await client.ok("check_health", {"agent_id": "kai"})
        out["deep"] = await client.ok("deep_check", {"agent_id": "kai"})
        return out

    return run_mcp(scenario, path)


def test_get_contents_accepts_a_bare_id_and_names_the_forms(normal_use):
    contents = normal_use.result["contents"]
    assert [i["content"] for i in contents["items"]] == ["the ferry leaves at nine"]
    assert contents["missing"] == ["x:1"] and contents["malformed"] == ["x:1"]
    assert "'mem:N'" in contents["malformed_note"]


def test_another_agents_locked_row_is_not_owned_before_it_is_locked(normal_use):
    assert normal_use.result["delete"] == {"ok": False, "error": "memory 1 is not owned by agent 'someone-else'"}


def test_normal_use_leaves_no_finding_the_user_cannot_act_on(normal_use):
    issues = {i["type"]: i for i in normal_use.result["health"]["issues"]}
    assert "missing_episode_start_time" not in issues  # archived without history: no span, not a defect
    # two rows name nobody; only the one with the anonymous User sentinel is one deep_check can name
    anonymous = issues["anonymous_source"]
    assert (anonymous["unattributed"], anonymous["recoverable"], anonymous["agents"]) == (3, 1, ["kai"])
    assert "deep_check" in anonymous["hint"]
    deep = normal_use.result["deep"]["results"]
    assert deep["orphaned_episodes"]["count"] == 0  # its memories were stored before it was archived
    assert deep["anonymous_source"]["recoverable"] == 1
