"""The quality-layer tools through the real MCP stdio path: three spawns of
`python -m cpersona` on one file, http embeddings against the fake /embed server.

1. fresh: calibrate_threshold / precision tools / profiles / previews + get_contents /
   full_content / recall_with_context / schema bounds / pause;
2. restart: the calibration is restored from the sidecar (no recalibration, no notice);
3. corrupt sidecar, startup recalibration off: heuristic gate AND a `gate` notice.
The scenarios record; the tests assert.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_mcp
from quality_helpers import session_corpus

QUALITY_TOOLS = {"recall_with_context", "get_contents", "get_profile", "update_profile", "calibrate_threshold",
                 "set_recall_precision", "get_recall_precision"}
LONG = "Runbook for the kestrel deployment: " + " ".join(f"step{i}" for i in range(300))


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return tmp_path_factory.mktemp("quality") / "q.db"


@pytest.fixture(scope="module")
def env(fake_embed):
    return {"CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": fake_embed.url}


@pytest.fixture(scope="module")
def first(db, env):
    async def scenario(client):
        rec = {"tools": {t.name for t in (await client.session.list_tools()).tools}}
        for content, ts in session_corpus():
            await client.ok("store", {"agent_id": "kai", "message": {"content": content, "timestamp": ts}})
        rec["long"] = await client.ok("store", {"agent_id": "kai", "message": {"content": LONG}})
        rec["ren"] = await client.ok("store", {"agent_id": "ren", "message": {"content": "ren private kestrel note"}})
        rec["calibrate"] = await client.call("calibrate_threshold", {"agent_id": "kai"})
        rec["calibrate_few"] = await client.call("calibrate_threshold", {"agent_id": "ren"})
        rec["too_big"] = await client.call("calibrate_threshold", {"agent_id": "kai", "sample_size": 5000})
        rec["bad_pct"] = await client.call("calibrate_threshold", {"agent_id": "kai", "percentile": 150})
        rec["bad_method"] = await client.call("calibrate_threshold", {"agent_id": "kai", "method": "magic"})
        rec["precision0"] = await client.call("get_recall_precision", {"agent_id": "kai"})
        rec["strict"] = await client.call("set_recall_precision", {"agent_id": "kai", "precision": "strict"})
        rec["precision1"] = await client.call("get_recall_precision", {"agent_id": "kai"})
        rec["profile_set"] = await client.call("update_profile", {"agent_id": "kai", "profile": "Runs the kestrel cluster."})
        rec["profile_get"] = await client.call("get_profile", {"agent_id": "kai"})
        rec["recall"] = await client.call("recall", {"agent_id": "kai", "query": "kestrel deployment runbook"})
        rec["recall_full"] = await client.call("recall", {"agent_id": "kai", "query": "kestrel deployment runbook",
                                                          "full_content": True})
        refs = [m["ref"] for m in rec["recall"].data["messages"] if "ref" in m]
        rec["contents"] = await client.call("get_contents", {"agent_id": "kai", "refs": [*refs, f"mem:{rec['ren']['id']}"]})
        rec["contents_none"] = await client.call("get_contents", {"agent_id": "kai", "refs": []})
        rec["contents_many"] = await client.call("get_contents", {"agent_id": "kai", "refs": ["mem:1"] * 21})
        rec["rwc"] = await client.call("recall_with_context", {
            "agent_id": "kai", "query": "telescope nebula",
            "external_context": [{"role": "user", "content": "show me the nebula notes", "timestamp": "2030-01-01T00:00:00Z"},
                                 {"role": "tool", "content": "ignored"}]})
        await client.ok("pause_persistence", {"ttl_seconds": 60})
        rec["paused_calibrate"] = await client.call("calibrate_threshold", {"agent_id": "kai"})
        rec["paused_profile"] = await client.call("update_profile", {"agent_id": "kai", "profile": "not written"})
        await client.ok("resume_persistence", {})
        rec["profile_after_pause"] = await client.call("get_profile", {"agent_id": "kai"})
        return rec

    return run_mcp(scenario, db, env)


@pytest.fixture(scope="module")
def second(first, db, env):
    async def scenario(client):
        return {"precision": await client.call("get_recall_precision", {"agent_id": "kai"}),
                "recall": await client.call("recall", {"agent_id": "kai", "query": "telescope nebula"})}

    return run_mcp(scenario, db, env)


@pytest.fixture(scope="module")
def third(second, db, env):
    path = db.with_name(db.name + ".calibration.json")
    path.write_text("{ truncated")

    async def scenario(client):
        return {"recall": await client.call("recall", {"agent_id": "kai", "query": "telescope nebula"}),
                "precision": await client.call("get_recall_precision", {"agent_id": "kai"})}

    return run_mcp(scenario, db, {**env, "CPERSONA_CALIBRATE_ON_MODEL_CHANGE": "false"})


def test_tools_are_listed(first):
    assert first.result["tools"] >= QUALITY_TOOLS
    assert not first.stream_errors


def test_calibration_over_mcp(first):
    r = first.result
    cal = r["calibrate"].data
    assert cal["ok"] is True and cal["proxy_source"] == "temporal" and cal["sidecar_persisted"] is True
    assert cal["fused_gate"] is None and "no fused gate" in cal["fused_gate_note"]  # cc gates rows on their evidence
    assert cal["embedding_model"] == "fake-hash-512" and cal["distribution"]["std"] > 0
    assert r["calibrate_few"].data["ok"] is False and "found 1" in r["calibrate_few"].data["error"]
    assert r["too_big"].data["ok"] is True  # clamped to CALIBRATE_MAX_SAMPLE, as the original clamps it
    assert r["bad_pct"].data["ok"] is False and r["bad_pct"].data["error"].startswith("percentile:")
    assert r["bad_method"].data["ok"] is False and "method" in r["bad_method"].data["error"]


def test_precision_over_mcp(first):
    r = first.result
    assert r["precision0"].data["precision"] == "balanced" and r["precision0"].data["calibration"]["state"] == "calibrated"
    follows = r["precision0"].data["calibration"]["follows_corpus"]
    assert follows["enabled"] is True and follows["rows"] == 71 and follows["min_rows"] == 200
    strict = r["strict"].data
    assert strict["ok"] and strict["beta"] == 2.0 and strict["calibrate"]["ok"] is True
    assert r["precision1"].data["precision"] == "strict" and r["precision1"].data["overridden"] is True


def test_profiles_over_mcp(first):
    r = first.result
    assert r["profile_set"].data == {"ok": True, "profiles_updated": 1, "length": 25}
    assert r["profile_get"].data == {"profile": "Runs the kestrel cluster."}
    assert r["paused_profile"].data["persisted"] is False
    assert r["profile_after_pause"].data == {"profile": "Runs the kestrel cluster."}


def test_preview_refs_round_trip_over_mcp(first):
    r = first.result
    long_ref = f"mem:{r['long']['id']}"
    preview = next(m for m in r["recall"].data["messages"] if m.get("ref") == long_ref)
    assert preview["content_truncated"] is True and len(preview["content"]) == 500 and preview["content_len"] == len(LONG)
    full = next(m for m in r["recall_full"].data["messages"] if m.get("ref") == long_ref)
    assert full["content"] == LONG and "content_truncated" not in full
    got = r["contents"].data
    assert next(i for i in got["items"] if i["ref"] == long_ref)["content"] == LONG
    assert got["missing"] == [f"mem:{r['ren']['id']}"]  # another agent's row is never returned
    assert r["contents_none"].is_error or r["contents_none"].data.get("ok") is False
    assert r["contents_many"].is_error


def test_recall_with_context_over_mcp(first):
    out = first.result["rwc"].data
    assert out["messages"][-1]["content"] == "show me the nebula notes"  # newest last (2030)
    assert out["context_filter_only"]["roles"] == ["tool"]


def test_paused_calibration_over_mcp(first):
    body = first.result["paused_calibrate"].data
    assert body["persisted"] is False and body["new_threshold"] is None and body["sampled_embeddings"] == 0


def test_calibration_is_restored_after_restart(second):
    p = second.result["precision"].data
    assert p["calibration"]["state"] == "calibrated" and p["calibration"]["startup"]["action"] == "restored"
    assert p["precision"] == "strict"  # the β override came back too
    assert "gate" not in second.result["recall"].data


def test_corrupt_sidecar_is_reported_in_recall(third):
    rec = third.result["recall"].data
    assert rec["gate"]["state"] == "heuristic" and "unreadable" in rec["gate"]["reason"]
    assert third.result["precision"].data["calibration"]["sidecar"] == "corrupt"
    assert json.dumps(rec, ensure_ascii=False)
