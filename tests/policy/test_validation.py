"""Bad input for the five tools, through the core (`Engine`) and through MCP stdio: every
rejection names the offending argument, and nothing stored changes."""

from __future__ import annotations

import pytest
from cpersona.errors import InvalidArgument
from cpersona.service.requests import RecallRequest

from conftest import db_counts, db_rows, run_mcp
from health_helpers import find, raw

OK_TS = "2026-11-29T10:00:00Z"


@pytest.fixture
def seeded(engine_none):
    """An engine with one memory and one episode; returns (engine, snapshot())."""
    assert engine_none.store("a", "seed memory", msg_id="seed")["result"] == "stored"
    assert engine_none.archive_episode("a", "seed episode")["ok"] is True

    def snapshot():
        path = engine_none.db.path
        return (
            db_counts(path),
            db_rows(path, "SELECT id, agent_id, project_id, channel, msg_id, content, source, timestamp, metadata FROM memories"),
            db_rows(path, "SELECT id, agent_id, summary, keywords, resolved FROM episodes"),
        )

    return engine_none, snapshot


# ------------------------------------------------------------------ store
STORE_BAD = [
    ("agent_id", dict(agent_id=5, content="x")),
    ("agent_id", dict(agent_id=None, content="x")),
    ("agent_id", dict(agent_id="a\x00b", content="x")),
    ("agent_id", dict(agent_id="a" * 513, content="x")),
    ("message.content", dict(content=None)),
    ("message.content", dict(content=42)),
    ("message.content", dict(content="")),
    ("message.content", dict(content="   \n ")),
    ("message.content", dict(content="[Memory from earlier]   ")),
    ("message.content", dict(content="bad\x00byte")),
    ("message.timestamp", dict(content="x", timestamp="yesterday")),
    ("message.timestamp", dict(content="x", timestamp="29/11/2026 10:00")),
    ("message.timestamp", dict(content="x", timestamp=1732874400)),
    ("message.metadata", dict(content="x", metadata={"blob": "m" * 9000})),
    ("message.metadata", dict(content="x", metadata=["not", "an", "object"])),
    ("message.metadata", dict(content="x", metadata={"n": float("nan")})),
    ("message.source", dict(content="x", source={"type": "User", "id": "s" * 9000})),
    ("message.source", dict(content="x", source=17)),
    ("message.id", dict(content="x", msg_id=7)),
    ("channel", dict(content="x", channel=["c"])),
    ("channel", dict(content="x", channel="c\x00")),
    ("project_id", dict(content="x", project_id=3)),
]


@pytest.mark.parametrize("argument, kwargs", STORE_BAD, ids=[f"{a}-{i}" for i, (a, _) in enumerate(STORE_BAD)])
def test_store_rejects_bad_input(seeded, argument, kwargs):
    engine, snapshot = seeded
    before = snapshot()
    kwargs = dict(kwargs)
    agent = kwargs.pop("agent_id", "a")
    content = kwargs.pop("content")
    res = engine.store(agent, content, **kwargs)
    assert res["ok"] is False
    assert res["result"] == "rejected"
    assert res["reason"].startswith(argument + ":"), res["reason"]
    assert "id" not in res
    assert snapshot() == before


def test_too_long_content_is_cut_and_the_answer_says_so(seeded):
    engine, _ = seeded
    res = engine.store("a", "z" * 16001)  # as the original: cut to the cap, `truncated: true`
    assert res["result"] == "stored" and res["truncated"] is True
    assert res["original_length"] == {"message.content": 16001} and res["max_length"] == 16000
    assert db_rows(engine.db.path, "SELECT length(content) FROM memories WHERE id = ?", (res["id"],)) == [(16000,)]
    huge = engine.store("a", "[Memory from x] " + "h" * 1_000_000)  # only a bounded window is scanned
    assert huge["truncated"] is True and huge["original_length"] == {"message.content": 1_000_016}
    # exactly the limit is fine, and markers do not count against it
    ok = engine.store("a", "[Memory from x] " + "q" * 16000)
    assert ok["result"] == "stored" and "truncated" not in ok
    assert db_rows(engine.db.path, "SELECT length(content) FROM memories WHERE id = ?", (ok["id"],)) == [(16000,)]


def test_content_limit_follows_setting(make_engine):
    eng = make_engine(max_content_length=100)
    res = eng.store("a", "w" * 101)
    assert res["result"] == "stored" and res["truncated"] is True and res["max_length"] == 100
    assert "truncated" not in eng.store("a", "v" * 100)
    ep = eng.archive_episode("a", "s" * 150, keywords="k" * 120)
    assert ep["truncated"] is True and ep["original_length"] == {"summary": 150, "keywords": 120}


def test_metadata_limit_follows_setting(make_engine):
    eng = make_engine(max_metadata_length=50)
    res = eng.store("a", "meta", metadata={"k": "v" * 60})
    assert res["result"] == "rejected" and res["reason"].startswith("message.metadata:") and "50" in res["reason"]


@pytest.mark.parametrize(("ts", "stored"), [
    ("2026-11-29T10:00:00Z", "2026-11-29T10:00:00Z"), ("2026-11-29T10:00:00+00:00", "2026-11-29T10:00:00+00:00"),
    ("2026-11-29T10:00:00+09:00", "2026-11-29T01:00:00+00:00"), ("2026-11-29T10:00:00", "2026-11-29T10:00:00+00:00"),
    ("2026-11-29", "2026-11-29T00:00:00+00:00"), ("0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00+14:00")])
def test_iso_timestamps_are_stored_as_their_utc_instant(engine_none, ts, stored):
    """UTC times verbatim; any other offset, or none (read as UTC), as the same instant in UTC;
    an instant before year 1 in UTC as given."""
    res = engine_none.store("a", f"ts row {ts}", timestamp=ts)
    assert res["result"] == "stored" and res.get("timestamp", ts) == stored  # the answer says what was stored
    assert db_rows(engine_none.db.path, "SELECT timestamp FROM memories WHERE id = ?", (res["id"],)) == [(stored,)]


def test_offset_timestamps_beside_server_times_are_no_drift(engine_none):
    """A +09:00 time stored beside server-stamped ones: the health check finds no mix of
    timestamp forms to repair (found by a new user: `degraded` after normal use), and text
    order is time order (`recall_with_context` sorts by the text)."""
    engine_none.store("a", "stored now")
    engine_none.store("a", "tokyo evening", timestamp="2026-10-12T22:00:00+09:00")  # 13:00Z
    engine_none.store("a", "utc afternoon", timestamp="2026-10-12T14:00:00Z")
    stamps = dict(db_rows(engine_none.db.path, "SELECT content, timestamp FROM memories"))
    assert stamps["tokyo evening"] < stamps["utc afternoon"] < stamps["stored now"]
    assert not find(engine_none.check_health(checks=["timestamp_format_drift"]), "timestamp_format_drift")
    engine_none.store("a", "naive morning", timestamp="2026-10-12T09:00:00")
    # what the original wrote (a time stored with its offset): the check still finds that
    raw(engine_none, "UPDATE memories SET timestamp = '2026-10-12T09:00:00+09:00' WHERE content = 'naive morning'")
    assert find(engine_none.check_health(checks=["timestamp_format_drift"]), "timestamp_format_drift")


def test_agent_id_empty_string_is_writable(engine_none):
    """spec ⚠: store does not reject agent_id ''."""
    assert engine_none.store("", "row of the empty agent")["result"] == "stored"


# ----------------------------------------------------------------- recall
RECALL_BAD = [
    ("limit", dict(limit=101)),
    ("limit", dict(limit=-1)),
    ("limit", dict(limit="abc")),
    ("limit", dict(limit=True)),
    ("limit", dict(limit=5.0)),
    ("agent_id", dict(agent_id=None)),
    ("agent_id", dict(agent_id=7)),
    ("agent_id", dict(agent_id="a\x00")),
    ("query", dict(query=None)),
    ("query", dict(query=3)),
    ("query", dict(query="q" * 16001)),
    ("channel", dict(channel=None)),
    ("project_id", dict(project_id=5)),
    ("source_id", dict(source_id=None)),
    ("exclude_contents[1]", dict(exclude_contents=("ok", 5))),
    ("exclude_contents", dict(exclude_contents=tuple(["x"] * 201))),
]


@pytest.mark.parametrize("argument, kwargs", RECALL_BAD, ids=[f"{a}-{i}" for i, (a, _) in enumerate(RECALL_BAD)])
def test_recall_rejects_bad_input(seeded, argument, kwargs):
    engine, snapshot = seeded
    before = snapshot()
    kwargs = dict(kwargs)
    agent = kwargs.pop("agent_id", "a")
    query = kwargs.pop("query", "seed")
    with pytest.raises(InvalidArgument) as err:
        engine.recall(RecallRequest(agent, query, **kwargs))
    assert err.value.argument == argument
    assert str(err.value).startswith(argument + ":")
    assert snapshot() == before


def test_recall_rejects_string_exclude_contents(seeded):
    engine, _ = seeded
    with pytest.raises(InvalidArgument) as err:
        engine.recall(RecallRequest("a", "seed", exclude_contents="abc"))
    assert err.value.argument == "exclude_contents"


def test_recall_rejects_non_boolean_deep(seeded):
    engine, _ = seeded
    with pytest.raises(InvalidArgument) as err:
        engine.recall(RecallRequest("a", "seed", deep="no"))
    assert err.value.argument == "deep"


def test_recall_limit_zero_answers_no_rows_and_nul_separates_words(seeded):
    engine, _ = seeded
    assert engine.recall(RecallRequest("a", "seed memory", limit=0))["messages"] == []
    assert engine.recall(RecallRequest("a", "seed\x00memory"))["messages"][-1]["content"] == "seed memory"


@pytest.mark.parametrize("limit", [1, 100])
def test_recall_limit_bounds_are_inclusive(seeded, limit):
    engine, _ = seeded
    assert [m["content"] for m in engine.recall(RecallRequest("a", "seed memory", limit=limit))["messages"]][-1] == "seed memory"


# -------------------------------------------------------- archive_episode
EPISODE_BAD = [
    ("summary", dict(summary="")),
    ("summary", dict(summary="   ")),
    ("summary", dict(summary=None)),
    ("summary", dict(summary=12)),
    ("summary", dict(summary="[Memory from a] ")),
    ("agent_id", dict(agent_id=1)),
    ("agent_id", dict(agent_id="x\x00")),
    ("keywords", dict(keywords=5)),
    ("resolved", dict(resolved="yes")),
    ("resolved", dict(resolved=1)),
    ("history", dict(history="not a list")),
    ("history[0]", dict(history=["x"])),
    ("history[1].timestamp", dict(history=[{"timestamp": OK_TS}, {"timestamp": "tuesday"}])),
    ("channel", dict(channel=1)),
    ("project_id", dict(project_id=["P"])),
]


@pytest.mark.parametrize("argument, kwargs", EPISODE_BAD, ids=[f"{a}-{i}" for i, (a, _) in enumerate(EPISODE_BAD)])
def test_archive_episode_rejects_bad_input(seeded, argument, kwargs):
    engine, snapshot = seeded
    before = snapshot()
    kwargs = dict(kwargs)
    agent = kwargs.pop("agent_id", "a")
    summary = kwargs.pop("summary", "a fine summary")
    res = engine.archive_episode(agent, summary, **kwargs)
    assert res["ok"] is False
    assert res["episode_id"] is None
    assert res["error"].startswith(argument + ":"), res["error"]
    assert snapshot() == before


# --------------------------------------------------------------- listings
@pytest.mark.parametrize(
    "method, argument, kwargs",
    [
        ("list_memories", "limit", dict(limit="10")),
        ("list_memories", "agent_id", dict(agent_id=4)),
        ("list_memories", "agent_id", dict(agent_id="a\x00")),
        ("list_memories", "project_id", dict(project_id=4)),
        ("list_episodes", "agent_id", dict(agent_id="\x00")),
        ("list_episodes", "project_id", dict(project_id=1.5)),
    ],
)
def test_listings_reject_bad_input(seeded, method, argument, kwargs):
    engine, snapshot = seeded
    before = snapshot()
    with pytest.raises(InvalidArgument) as err:
        getattr(engine, method)(**kwargs)
    assert err.value.argument == argument
    assert snapshot() == before


def test_listing_limit_bounds_are_inclusive(seeded):
    engine, _ = seeded
    assert engine.list_memories("a", 500)["count"] == 1
    assert engine.list_memories("a", 1)["count"] == 1
    assert engine.list_episodes("a", 200)["count"] == 1


# =================================================================== MCP
MCP_CASES = {
    # name: (tool, arguments, argument that must be named)
    "store-agent-int": ("store", {"agent_id": 5, "message": {"content": "x"}}, "agent_id"),
    "store-agent-nul": ("store", {"agent_id": "a\x00b", "message": {"content": "x"}}, "agent_id"),
    "store-missing-message": ("store", {"agent_id": "a"}, "content"),
    "store-missing-content": ("store", {"agent_id": "a", "message": {"id": "m9"}}, "content"),
    "store-flat-content-int": ("store", {"agent_id": "a", "content": 5}, "content"),
    "store-message-string": ("store", {"agent_id": "a", "message": "hello"}, "message"),
    "store-content-int": ("store", {"agent_id": "a", "message": {"content": 5}}, "message.content"),
    "store-content-empty": ("store", {"agent_id": "a", "message": {"content": ""}}, "message.content"),
    "store-timestamp": ("store", {"agent_id": "a", "message": {"content": "x", "timestamp": "yesterday"}}, "message.timestamp"),
    "store-metadata-big": ("store", {"agent_id": "a", "message": {"content": "x", "metadata": {"k": "m" * 9000}}}, "message.metadata"),
    "store-metadata-list": ("store", {"agent_id": "a", "message": {"content": "x", "metadata": [1]}}, "message.metadata"),
    "store-channel-int": ("store", {"agent_id": "a", "message": {"content": "x"}, "channel": 3}, "channel"),
    "recall-missing-query": ("recall", {"agent_id": "a"}, "query"),
    "recall-agent-list": ("recall", {"agent_id": ["a"], "query": "x"}, "agent_id"),
    "recall-limit-101": ("recall", {"agent_id": "a", "query": "x", "limit": 101}, "limit"),
    "recall-limit-abc": ("recall", {"agent_id": "a", "query": "x", "limit": "abc"}, "limit"),
    "recall-exclude-string": ("recall", {"agent_id": "a", "query": "x", "exclude_contents": "abc"}, "exclude_contents"),
    "recall-agent-nul": ("recall", {"agent_id": "a\x00", "query": "x"}, "agent_id"),
    "archive-missing-summary": ("archive_episode", {"agent_id": "a"}, "summary"),
    "archive-summary-empty": ("archive_episode", {"agent_id": "a", "summary": ""}, "summary"),
    "archive-history-string": ("archive_episode", {"agent_id": "a", "summary": "s", "history": "x"}, "history"),
    "archive-history-ts": ("archive_episode", {"agent_id": "a", "summary": "s", "history": [{"timestamp": "bad"}]}, "history[0].timestamp"),
    "archive-agent-nul": ("archive_episode", {"agent_id": "\x00", "summary": "s"}, "agent_id"),
    "list_memories-agent-nul": ("list_memories", {"agent_id": "a\x00"}, "agent_id"),
    "list_episodes-project-int": ("list_episodes", {"project_id": 5}, "project_id"),
}

#: Wrong JSON types that the SDK's lax coercion lets through (the tool contract says a
#: schema violation is rejected before the handler runs).
MCP_COERCED = {
    "recall-limit-string": ("recall", {"agent_id": "a", "query": "seed", "limit": "5"}, "limit"),
    "recall-limit-bool": ("recall", {"agent_id": "a", "query": "seed", "limit": True}, "limit"),
    "recall-deep-string": ("recall", {"agent_id": "a", "query": "seed", "deep": "yes"}, "deep"),
    "archive-resolved-string": ("archive_episode", {"agent_id": "a", "summary": "coerced", "resolved": "yes"}, "resolved"),
}


@pytest.fixture(scope="module")
def mcp_results(tmp_path_factory):
    """ONE server process: seed a memory and an episode, then send every bad call, recording
    the reply and the DB row counts right before and after each call."""
    tmp = tmp_path_factory.mktemp("mcpval")
    db = tmp / "v.db"

    async def scenario(client):
        seeded = [
            await client.ok("store", {"agent_id": "a", "message": {"content": "seed memory"}}),
            await client.ok("archive_episode", {"agent_id": "a", "summary": "seed episode"}),
        ]
        out = {}
        for name, (tool, args, _arg) in {**MCP_CASES, **MCP_COERCED}.items():
            before = db_counts(db)
            reply = await client.call(tool, args)
            out[name] = (reply, before, db_counts(db))
        return seeded, out

    run = run_mcp(scenario, db)
    assert not run.stream_errors, run.stream_errors
    return run.result


def test_mcp_seed_succeeded(mcp_results):
    seeded, _ = mcp_results
    assert seeded[0]["result"] == "stored" and seeded[1]["ok"] is True


@pytest.mark.parametrize("name", list(MCP_CASES))
def test_mcp_bad_input_is_rejected_naming_argument(mcp_results, name):
    _, out = mcp_results
    tool, _args, argument = MCP_CASES[name]
    reply, before, after = out[name]
    assert reply.failed, reply.text
    if reply.is_error:  # SDK schema validation: plain text naming the field
        assert argument in reply.text.splitlines()[1:3] or f"\n{argument}\n" in reply.text, reply.text
    else:  # core rule: JSON with ok:false; store speaks result/reason
        text = reply.data.get("reason") if tool == "store" else reply.data.get("error")
        assert text.startswith(argument + ":"), reply.data
        if tool == "store":
            assert reply.data["result"] == "rejected"
        if tool == "recall":
            assert reply.data["messages"] == []
    assert after == before
    assert before == {"memories": 1, "episodes": 1, "profiles": 0}


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in MCP_COERCED
    ],
)
def test_mcp_wrong_json_types_are_not_coerced(mcp_results, name):
    _, out = mcp_results
    _tool, _args, argument = MCP_COERCED[name]
    reply, before, after = out[name]
    assert reply.failed, reply.text
    assert argument in reply.text
    assert after == before
