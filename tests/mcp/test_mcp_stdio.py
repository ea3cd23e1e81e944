"""A real MCP client (official `mcp` SDK) spawning `python -m cpersona` over stdio.

Two server processes in total: the first run (embeddings off) does the handshake, lists the
tools and round-trips store → recall → archive_episode → list_*; the second run on the
same file (http embeddings against the fake /embed server) must see the first run's data.
Assertions are grouped per spawn; the scenario records, the tests assert.
"""

from __future__ import annotations

import json

import pytest
from cpersona.devtools.fake_embed import fake_vector
from cpersona.storage.codec import to_blob

from conftest import db_rows, run_mcp, wait_until

TOOLS = {"store", "recall", "archive_episode", "list_memories", "list_episodes"}
JP = "梅雨は北海道と小笠原諸島を除く日本で見られる"
EN = "The staging cluster moves to eu-west-2 on 2026-12-01 (ticket OPS-4411)"


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory):
    return tmp_path_factory.mktemp("stdio") / "mcp.db"


@pytest.fixture(scope="module")
def first_run(shared_db):
    async def scenario(client):
        rec = {"init": client.init, "tools": (await client.session.list_tools()).tools}
        rec["store_jp"] = await client.call("store", {
            "agent_id": "kai", "message": {"content": JP, "id": "m-1", "source": {"type": "User", "id": "discord:7", "name": "Aki"},
                                           "timestamp": "2026-06-01T09:00:00Z", "metadata": {"lang": "ja"}},
        })
        rec["store_en"] = await client.call("store", {"agent_id": "kai", "message": {"content": EN}, "project_id": "ops"})
        rec["store_dup"] = await client.call("store", {"agent_id": "kai", "message": {"content": "changed", "id": "m-1"}})
        rec["store_other_agent"] = await client.call("store", {"agent_id": "ren", "message": {"content": "ren's private note"}})
        rec["recall_jp"] = await client.call("recall", {"agent_id": "kai", "query": "小笠原諸島"})
        rec["recall_en"] = await client.call("recall", {"agent_id": "kai", "query": "OPS-4411", "project_id": "ops"})
        rec["recall_global_only"] = await client.call("recall", {"agent_id": "kai", "query": "OPS-4411", "project_id": ""})
        rec["archive"] = await client.call("archive_episode", {
            "agent_id": "kai", "summary": "Decided the eu-west-2 move; 小笠原諸島 trip postponed", "keywords": "migration 移動",
            "history": [{"timestamp": "2026-06-01T09:00:00Z", "role": "user", "content": "hi"}, {"timestamp": "2026-06-01T10:30:00Z"}],
            "resolved": True,
        })
        rec["recall_after_archive"] = await client.call("recall", {"agent_id": "kai", "query": "小笠原諸島", "limit": 5})
        rec["recall_blank"] = await client.call("recall", {"agent_id": "kai", "query": ""})
        rec["list_memories_kai"] = await client.call("list_memories", {"agent_id": "kai"})
        rec["list_memories_all"] = await client.call("list_memories", {})
        rec["list_episodes"] = await client.call("list_episodes", {"agent_id": "kai"})
        return rec

    run = run_mcp(scenario, shared_db)
    return run


# ------------------------------------------------------------- handshake
def test_transport_stdout_is_protocol_only(first_run):
    assert first_run.stream_errors == []
    assert "Traceback" not in first_run.stderr


def test_initialize_announces_server_and_instructions(first_run):
    init = first_run.result["init"]
    assert init.server_info.name == "cloto-mcp-cpersona"
    assert isinstance(init.instructions, str) and "recall" in init.instructions and "store" in init.instructions
    assert init.capabilities.tools is not None


def _properties(schema: dict):
    """Yield (path, property schema) for every property, following $ref into $defs."""
    defs = schema.get("$defs", {})

    def walk(node, path):
        if "$ref" in node:
            node = {**defs[node["$ref"].split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
        for name, prop in node.get("properties", {}).items():
            yield f"{path}{name}", prop
            yield from walk(prop, f"{path}{name}.")
        if "items" in node:
            yield from walk(node["items"], f"{path}[].")

    yield from walk(schema, "")


def test_list_tools_has_the_five_tools_fully_described(first_run):
    tools = {t.name: t for t in first_run.result["tools"]}
    assert set(tools) >= TOOLS  # other tool groups are checked in their own test modules
    for name, tool in ((n, tools[n]) for n in TOOLS):
        assert tool.description and len(tool.description.strip()) > 20, name
        assert list(_properties(tool.input_schema)), name
    # both call shapes of the original: the flat one of its current release and the 2.5 `message` object
    assert {p for p, _ in _properties(tools["store"].input_schema)} >= {
        "agent_id", "content", "id", "source", "timestamp", "metadata", "lock", "channel", "project_id",
    }  # session_key and the 2.5 `message` object are accepted but not published (mcp/registry.py: UNPUBLISHED)
    assert tools["store"].input_schema["required"] == ["agent_id"]
    assert sorted(tools["recall"].input_schema["required"]) == ["agent_id", "query"]
    limit = tools["recall"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (0, 100, 10)
    assert tools["recall"].annotations.read_only_hint is True
    assert not tools["store"].annotations.read_only_hint  # MCP default (false) is not sent
    assert not tools["archive_episode"].annotations.idempotent_hint


# --------------------------------------------------------------- round trip
def test_store_results(first_run):
    r = first_run.result
    assert r["store_jp"].data == {"ok": True, "result": "stored", "id": 1, "embedded": False}
    assert r["store_en"].data["result"] == "stored" and r["store_en"].data["id"] == 2
    assert r["store_dup"].data == {"ok": True, "result": "skipped", "reason": "duplicate msg_id", "id": 1}
    assert r["store_other_agent"].data["result"] == "stored"


def test_recall_over_mcp(first_run):
    r = first_run.result
    jp = r["recall_jp"].data
    assert [m["content"] for m in jp["messages"]] == [JP]
    msg = jp["messages"][0]
    assert msg["ref"] == "mem:1" and msg["id"] == "m-1"
    assert msg["source"] == {"type": "User", "id": "discord:7", "name": "Aki"}
    assert msg["timestamp"] == "2026-06-01T09:00:00Z"
    assert jp["advisory"]["severity"] == "hint"  # mode none says so
    assert "ok" not in jp  # successful reads carry no ok

    assert [m["content"] for m in r["recall_en"].data["messages"]] == [EN]
    assert r["recall_global_only"].data["messages"] == []  # '' = global pool only; EN lives in bucket 'ops'


def test_japanese_is_verbatim_on_the_wire(first_run):
    raw = first_run.result["recall_jp"].text
    assert JP in raw
    assert "\\u" not in raw
    assert json.loads(raw)["messages"][0]["content"] == JP


def test_archive_episode_over_mcp(first_run):
    r = first_run.result
    assert r["archive"].data == {"ok": True, "episode_id": 1, "embedded": False}
    msgs = r["recall_after_archive"].data["messages"]
    by_content = {m["content"]: m for m in msgs}
    ep = by_content["[Episode] Decided the eu-west-2 move; 小笠原諸島 trip postponed"]
    assert ep["ref"] == "ep:1" and ep["source"] == {"System": "episode"}
    assert ep["timestamp"] == "2026-06-01T09:00:00Z"
    assert JP in by_content
    assert "[Episode] 小笠原諸島" not in r["recall_after_archive"].text  # content prefix is exactly "[Episode] "


def test_blank_recall_over_mcp(first_run):
    msgs = first_run.result["recall_blank"].data["messages"]
    assert [m["content"] for m in msgs] == [JP, EN]  # newest last; episodes not in a recency listing


def test_listings_over_mcp(first_run):
    r = first_run.result
    kai = r["list_memories_kai"].data
    assert kai["count"] == 2
    assert [m["content"] for m in kai["memories"]] == [EN, JP]  # newest first
    assert kai["memories"][0]["project_id"] == "ops"
    assert kai["memories"][1]["source"] == {"type": "User", "id": "discord:7", "name": "Aki"}
    assert "msg_id" not in kai["memories"][0]
    assert r["list_memories_all"].data["count"] == 3  # '' / omitted = every agent
    eps = r["list_episodes"].data
    assert eps["count"] == 1
    ep = eps["episodes"][0]
    assert ep["summary"] == "Decided the eu-west-2 move; 小笠原諸島 trip postponed"
    assert ep["keywords"] == "migration 移動"
    assert (ep["start_time"], ep["end_time"]) == ("2026-06-01T09:00:00Z", "2026-06-01T10:30:00Z")
    assert ep["resolved"] is True


def test_first_run_left_rows_without_vectors(first_run, shared_db):
    assert db_rows(shared_db, "SELECT COUNT(*) FROM memories WHERE embedding IS NULL") == [(3,)]
    assert db_rows(shared_db, "SELECT COUNT(*) FROM episodes WHERE embedding IS NULL") == [(1,)]


# -------------------------------------------------------- second process
@pytest.fixture(scope="module")
def second_run(first_run, shared_db, fake_embed):
    fake_embed.fail = False

    async def scenario(client):
        rec = {}
        rec["recall_jp"] = await client.call("recall", {"agent_id": "kai", "query": "小笠原諸島"})
        rec["list"] = await client.call("list_memories", {"agent_id": "kai"})
        rec["list_episodes"] = await client.call("list_episodes", {})

        def all_embedded():
            return db_rows(shared_db, "SELECT (SELECT COUNT(*) FROM memories WHERE embedding IS NULL) + "
                                      "(SELECT COUNT(*) FROM episodes WHERE embedding IS NULL)") == [(0,)]

        # the backfill runs in the server process; poll the file while the session stays open
        rec["backfilled"] = await _to_thread(wait_until, all_embedded, 20.0)
        # the backfilled vectors are searchable: the vector retriever must contribute
        rec["recall_vector"] = await client.call("recall", {"agent_id": "kai", "query": "ticket ops 4411 staging move",
                                                           "deep": True, "verbose": True})
        rec["store_new"] = await client.call("store", {"agent_id": "kai", "message": {"content": "second run memory"}})
        return rec

    return run_mcp(scenario, shared_db, env={"CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": fake_embed.url})


async def _to_thread(fn, *args):
    import anyio

    return await anyio.to_thread.run_sync(fn, *args)


def test_second_run_sees_first_runs_memories(second_run):
    assert second_run.stream_errors == []
    r = second_run.result
    assert JP in [m["content"] for m in r["recall_jp"].data["messages"]]
    assert "advisory" not in r["recall_jp"].data  # embeddings configured and answering
    assert [m["content"] for m in r["list"].data["memories"]] == [EN, JP]
    assert r["list_episodes"].data["count"] == 1


def test_second_run_backfills_vectors_of_first_run(second_run, shared_db):
    r = second_run.result
    assert r["backfilled"] is True
    (blob,) = db_rows(shared_db, "SELECT embedding FROM memories WHERE id = 1")[0]
    assert blob == to_blob(fake_vector(JP))
    msgs = r["recall_vector"].data["messages"]
    assert EN in [m["content"] for m in msgs]
    en = next(m for m in msgs if m["content"] == EN)
    assert "vector" in en["match_reason"]["retrievers"]  # asked with verbose: every channel's score
    assert r["store_new"].data == {"ok": True, "result": "stored", "id": 4, "embedded": True}
