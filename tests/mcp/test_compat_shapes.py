"""Every call shape an agent written for the original CPersona uses, through a real MCP
client — and a host-like client that, like several function-calling converters, refuses a
tool whose schema uses `$ref`/`$defs` and validates the model's arguments against the
published schema before sending them.

One server process (embeddings off, content cap 200 so over-long text is cheap to send);
the scenario records, the tests assert.
"""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from conftest import db_rows, run_mcp

#: The whole tools list, in characters of its wire JSON, that every conversation pays for:
#: about 3,500 tokens at ~4 characters per token (the declared-association tools and
#: get_session_findings took it from ~3,000 to ~3,400).
TOOLS_LIST_MAX_CHARS = 14_000
CAP = 200


class HostRejects(Exception):
    """What a host that cannot use a tool (or an argument set) reports."""


class HostLikeClient:
    """The parts of an LLM host between the model and the server: it converts each tool's
    input schema to a function declaration (refusing `$ref`/`$defs`, which such converters do
    not resolve) and validates the model's arguments against it before calling."""

    def __init__(self, mcp, tools) -> None:
        self.mcp = mcp
        self.functions = {t.name: self.declare(t) for t in tools}

    @staticmethod
    def declare(tool) -> dict:
        text = json.dumps(tool.input_schema)
        if "$ref" in text or "$defs" in text or '"definitions"' in text:
            raise HostRejects(f"{tool.name}: schema references are not supported")
        if not (tool.description or "").strip():
            raise HostRejects(f"{tool.name}: a function needs a description")
        Draft202012Validator.check_schema(tool.input_schema)
        return {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}

    async def call(self, name: str, arguments: dict):
        errors = list(Draft202012Validator(self.functions[name]["parameters"]).iter_errors(arguments))
        if errors:
            raise HostRejects(f"{name}: {errors[0].message}")
        return await self.mcp.call(name, arguments)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    db = tmp_path_factory.mktemp("compat") / "c.db"

    async def scenario(c):
        tools = (await c.session.list_tools()).tools
        host = HostLikeClient(c, tools)
        r: dict = {"tools": tools, "wire": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]}
        # store: the flat shape of the current release, and the 2.5 `message` object
        r["flat"] = await host.call("store", {"agent_id": "kai", "content": "The deploy window is Thursday 14:00",
                                              "id": "m-1", "source": "claude-code", "timestamp": "2026-03-01T09:00:00Z",
                                              "metadata": {"n": 1}, "lock": True})
        r["flat_row"] = db_rows(db, "SELECT msg_id, source, timestamp, metadata, locked FROM memories WHERE id = 1")
        r["flat_dup"] = await host.call("store", {"agent_id": "kai", "content": "something else", "id": "m-1"})
        r["message"] = await host.call("store", {"agent_id": "kai", "message": {
            "content": "ERR_TIMEOUT_1750 means the search API took over 30 s", "id": 42,
            "source": {"type": "User", "id": "u1", "name": "Ann"}}})
        r["message_source_str"] = await host.call("store", {"agent_id": "kai", "message": {
            "content": "Source given as a role word", "source": "user"}})
        r["no_content"] = await host.call("store", {"agent_id": "kai", "message": {"id": "x"}})
        r["long"] = await host.call("store", {"agent_id": "kai", "content": "L" * (CAP + 50)})
        r["long_summary"] = await host.call("archive_episode", {"agent_id": "kai", "summary": "S" * (CAP + 9),
                                                                "keywords": "marathon"})
        r["extra_args"] = await c.call("store", {"agent_id": "kai", "content": "with an unknown argument",
                                                 "future_option": {"x": 1}})
        # recall
        r["recall"] = await host.call("recall", {"agent_id": "kai", "query": "deploy window"})
        r["recall_verbose"] = await host.call("recall", {"agent_id": "kai", "query": "deploy window", "verbose": True})
        r["limit0"] = await host.call("recall", {"agent_id": "kai", "query": "deploy", "limit": 0})
        r["nul"] = await c.call("recall", {"agent_id": "kai", "query": "ERR_TIMEOUT_1750\x00search"})
        r["rwc"] = await host.call("recall_with_context", {"agent_id": "kai", "query": "deploy", "limit": 0,
                                                           "external_context": [{"role": "user", "content": "hi"}]})
        # listings
        r["list0"] = await host.call("list_memories", {"agent_id": "kai", "limit": 0})
        r["list_big"] = await host.call("list_memories", {"agent_id": "kai", "limit": 100_000})
        r["list_neg"] = await host.call("list_episodes", {"limit": -3})
        r["page1"] = await host.call("list_memories", {"agent_id": "kai", "limit": 2})
        r["page2"] = await host.call("list_memories", {"agent_id": "kai", "limit": 2,
                                                       "cursor": r["page1"].data["next_cursor"]})
        # refs on the row tools, get_contents
        flat_id, msg_id = r["flat"].data["id"], r["message"].data["id"]
        r["contents_empty"] = await host.call("get_contents", {"agent_id": "kai", "refs": []})
        r["contents"] = await host.call("get_contents", {"agent_id": "kai", "refs": [f"mem:{msg_id}"]})
        r["update_ref"] = await host.call("update_memory", {"memory_id": f"mem:{msg_id}", "content": "ERR_TIMEOUT_1750 "
                                                            "means the search API took over 45 s", "agent_id": "kai"})
        r["delete_locked"] = await host.call("delete_memory", {"memory_id": f"mem:{flat_id}"})
        r["unlock_ref"] = await host.call("unlock_memory", {"memory_id": f"mem:{flat_id}"})
        r["delete_ref"] = await host.call("delete_memory", {"memory_id": f"mem:{flat_id}", "agent_id": "kai"})
        r["delete_wrong_kind"] = await host.call("delete_memory", {"memory_id": "ep:1"})
        r["delete_episode_ref"] = await host.call("delete_episode", {"episode_id": f"ep:{r['long_summary'].data['episode_id']}"})
        # session_key: the pause covers the calls that send the same key
        r["pause_s1"] = await host.call("pause_persistence", {"ttl_seconds": 60, "session_key": "s1"})
        r["store_s1"] = await host.call("store", {"agent_id": "kai", "content": "off the record", "session_key": "s1"})
        r["store_s2"] = await host.call("store", {"agent_id": "kai", "content": "on the record, s2", "session_key": "s2"})
        r["store_keyless"] = await host.call("store", {"agent_id": "kai", "content": "on the record, no key"})
        r["status_s1"] = await host.call("persistence_status", {"session_key": "s1"})
        r["status_keyless"] = await host.call("persistence_status", {})
        r["resume_s1"] = await host.call("resume_persistence", {"session_key": "s1"})
        r["long_key"] = await c.call("store", {"agent_id": "kai", "content": "x", "session_key": "k" * 257})
        try:
            await host.call("store", {"agent_id": "kai", "content": "x", "session_key": "k" * 257})
            r["host_long_key"] = "sent"
        except HostRejects as err:
            r["host_long_key"] = str(err)
        return r

    out = run_mcp(scenario, db, env={"CPERSONA_MAX_CONTENT_LENGTH": str(CAP)})
    assert not out.stream_errors and "Traceback" not in out.stderr, out.stderr
    out.result["db"] = db
    return out.result


# ------------------------------------------------------------------ tools list
def test_every_schema_is_self_contained_and_every_tool_described(run):
    host_tools = {t.name for t in run["tools"]}
    assert len(host_tools) >= 23  # the host-like client declared every one (or the fixture failed)


def test_the_tools_list_costs_at_most_about_3500_tokens(run):
    chars = sum(len(json.dumps(t, ensure_ascii=False, separators=(",", ":"))) for t in run["wire"])
    assert chars <= TOOLS_LIST_MAX_CHARS, f"tools list is {chars} chars (~{chars // 4} tokens)"


# ----------------------------------------------------------------------- store
def test_flat_store_of_the_current_original(run):
    assert run["flat"].data == {"ok": True, "result": "stored", "id": 1, "embedded": False, "locked": True}
    assert run["flat_dup"].data == {"ok": True, "result": "skipped", "reason": "duplicate msg_id", "id": 1}
    msg_id, source, timestamp, metadata, locked = run["flat_row"][0]
    assert (msg_id, timestamp, json.loads(metadata), locked) == ("m-1", "2026-03-01T09:00:00Z", {"n": 1}, 1)
    assert json.loads(source) == {"id": "claude-code", "name": "claude-code"}


def test_legacy_message_store_and_lenient_fields(run):
    assert run["message"].data["result"] == "stored"
    assert db_rows(run["db"], "SELECT msg_id FROM memories WHERE id = ?", (run["message"].data["id"],)) == [("42",)]
    stored = run["message_source_str"].data
    assert stored["result"] == "stored"
    source = db_rows(run["db"], "SELECT source FROM memories WHERE id = ?", (stored["id"],))[0][0]
    assert json.loads(source) == {"type": "User", "id": "", "name": ""}
    assert run["no_content"].data["result"] == "rejected" and run["no_content"].data["reason"].startswith("content:")
    assert run["extra_args"].data["result"] == "stored"  # unknown arguments are ignored, as by the original


def test_text_over_the_cap_is_cut_and_the_answer_says_so(run):
    long = run["long"].data
    assert long["result"] == "stored" and long["truncated"] is True
    assert long["original_length"] == {"message.content": CAP + 50} and long["max_length"] == CAP
    assert db_rows(run["db"], "SELECT length(content) FROM memories WHERE id = ?", (long["id"],)) == [(CAP,)]
    episode = run["long_summary"].data
    assert episode["ok"] is True and episode["truncated"] is True and episode["original_length"] == {"summary": CAP + 9}


# ---------------------------------------------------------------------- recall
def test_recall_is_compact_by_default_and_verbose_on_request(run):
    best = run["recall"].data["messages"][-1]
    assert best["content"] == "The deploy window is Thursday 14:00"
    assert best["source"] == {"id": "claude-code", "name": "claude-code"}  # a plain string names the speaker
    assert set(best["match_reason"]) == {"signal", "score"}
    assert best["match_reason"]["score"] == round(best["match_reason"]["score"], 4)
    detail = run["recall_verbose"].data["messages"][-1]["match_reason"]
    assert {"signal", "score", "retrievers"} <= set(detail) and len(detail) > 2
    assert all(v == round(v, 4) for v in detail.values() if isinstance(v, float))


def test_recall_limit_zero_and_nul(run):
    assert run["limit0"].data == {"messages": []}
    assert [m["content"] for m in run["rwc"].data["messages"]] == ["hi"]  # only the echoed conversation
    assert run["nul"].data["messages"][-1]["content"].startswith("ERR_TIMEOUT_1750")


# -------------------------------------------------------------------- listings
def test_list_limits_are_clamped_not_refused(run):
    assert run["list0"].data == {"memories": [], "count": 0}
    assert run["list_big"].data["count"] >= 5 and "next_cursor" not in run["list_big"].data
    assert run["list_neg"].data == {"episodes": [], "count": 0}


def test_listing_pages_with_a_cursor(run):
    first, second = run["page1"].data, run["page2"].data
    assert first["count"] == 2 and second["count"] == 2
    assert first["memories"][-1]["id"] > second["memories"][0]["id"]  # newest first, no overlap


# ------------------------------------------------------------ refs, row tools
def test_get_contents_with_no_refs_is_a_failure_answer_not_a_schema_error(run):
    reply = run["contents_empty"]
    assert not reply.is_error and reply.data["ok"] is False and reply.data["error"].startswith("refs:")
    assert run["contents"].data["count"] == 1


def test_row_tools_take_refs(run):
    assert run["update_ref"].data["ok"] is True
    assert "is locked" in run["delete_locked"].data["error"]
    assert run["unlock_ref"].data == {"ok": True, "unlocked_id": 1}
    assert run["delete_ref"].data == {"ok": True, "deleted_id": 1}
    wrong = run["delete_wrong_kind"].data
    assert wrong["ok"] is False and "memory_id" in wrong["error"] and "episode_id" in wrong["error"]
    assert run["delete_episode_ref"].data["ok"] is True


# ----------------------------------------------------------------- session_key
def test_a_pause_covers_the_calls_with_its_session_key(run):
    assert run["pause_s1"].data["scope"] == "session" and run["pause_s1"].data["paused"] is True
    assert run["store_s1"].data["persisted"] is False and run["store_s1"].data["id"] == "no-persist"
    assert run["store_s2"].data["result"] == "stored" and run["store_keyless"].data["result"] == "stored"
    assert run["status_s1"].data["paused"] is True and run["status_s1"].data["scope"] == "session"
    assert run["status_keyless"].data == {"paused": False, "expires_at": None, "ttl_remaining_seconds": None,
                                          "scope": "process"}
    assert run["resume_s1"].data == {"paused": False, "was_active": True, "scope": "session"}
    assert db_rows(run["db"], "SELECT COUNT(*) FROM memories WHERE content = 'off the record'") == [(0,)]


def test_a_session_key_over_256_characters_is_refused_before_the_call(run):
    # session_key is accepted and validated but not published (registry.UNPUBLISHED): a host
    # that checks arguments against the schema sends it, and the server refuses it.
    assert run["long_key"].is_error and "session_key" in run["long_key"].text
    assert run["host_long_key"] == "sent"
