"""Operating context: the TOML
sidecar, get_operating_context, MCP instructions, "@auto" resolution and registry checks on
the project_id tools; a malformed file is reported and the server still starts."""

from __future__ import annotations

import logging
import os

import pytest
from cpersona.errors import ContextError
from cpersona.mcp.server import INSTRUCTIONS
from cpersona.policy.projects import OperatingContext, parse

from conftest import run_mcp

VALID = """
version = 1
context_revision = "r7"

[instructions]
summary = "Team memory. Use project_id \\"@auto\\"; never store secrets."

[registry]
project_ids = ["", "ops", "web"]
enforce = "{enforce}"

[defaults]
kai = "ops"
solo = ""
legacy = "old-project"

[[doctrine]]
name = "release"
body = "Releases go out on Thursdays."

[[doctrine]]
name = "alerts"
body = "Page the on-call engineer."
"""


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def sidecar(tmp_path):
    def make(enforce="warn", text=None):
        return write(tmp_path / "operating-context.toml", text if text is not None else VALID.replace("{enforce}", enforce))

    return make


# ------------------------------------------------------------------------- parse
def test_parse_a_full_sidecar():
    ctx = parse(VALID.replace("{enforce}", "reject"), "x.toml")
    assert ctx.revision == "r7" and ctx.summary.startswith("Team memory.")
    assert ctx.project_ids == ("", "ops", "web") and ctx.enforce == "reject"
    assert ctx.defaults == {"kai": "ops", "solo": "", "legacy": "old-project"}
    assert ctx.doctrine == {"release": "Releases go out on Thursdays.", "alerts": "Page the on-call engineer."}
    minimal = parse("version = 1\nunknown_key = 'ignored'\n", "x.toml")
    assert (minimal.revision, minimal.summary, minimal.project_ids, minimal.enforce) == (None, "", None, "warn")


@pytest.mark.parametrize("text, key", [
    ("version = ", "not valid TOML"),
    ("context_revision = 'x'", "version"),
    ("version = 2", "version"),
    ("version = '1'", "version"),
    ("version = true", "version"),
    ("version = 1\ncontext_revision = 5", "context_revision"),
    ("version = 1\ninstructions = 'x'", "[instructions]"),
    ("version = 1\n[instructions]\nsummary = 3", "instructions.summary"),
    ("version = 1\n[registry]\nproject_ids = 'ops'", "registry.project_ids"),
    ("version = 1\n[registry]\nproject_ids = ['ops', 1]", "registry.project_ids"),
    ("version = 1\n[registry]\nenforce = 'strict'", "registry.enforce"),
    ("version = 1\n[defaults]\nkai = 1", "defaults.kai"),
    ("version = 1\ndoctrine = 'x'", "[[doctrine]]"),
    ("version = 1\n[[doctrine]]\nbody = 'x'", "doctrine[0].name"),
    ("version = 1\n[[doctrine]]\nname = ' '", "doctrine[0].name"),
    ("version = 1\n[[doctrine]]\nname = 'a'\nbody = 1", "doctrine[0].body"),
    ("version = 1\n[[doctrine]]\nname = 'a'\n[[doctrine]]\nname = 'a'", "used twice"),
])
def test_parse_rejects_malformed_sidecars_naming_the_key(text, key):
    with pytest.raises(ContextError) as err:
        parse(text, "/etc/oc.toml")
    assert str(err.value).startswith("/etc/oc.toml: ") and key in str(err.value)


# ---------------------------------------------------------------- file handling
def test_dormant_reasons(tmp_path, sidecar):
    missing = OperatingContext(str(tmp_path / "nope.toml"))
    assert missing.describe() == {"ok": False, "enabled": False,
                                  "error": f"operating context is dormant — no sidecar file at {tmp_path / 'nope.toml'}"}
    off = OperatingContext(str(sidecar()), enabled=False)
    assert "kill switch" in off.describe()["error"] and off.instructions() is None
    killed = off.gate("kai", "@auto", True)
    assert killed.project_id == "" and "kill switch" in killed.extras["operating_context_warning"]


def test_reread_when_the_file_changes_and_warn_once_when_broken(sidecar, caplog):
    path = sidecar()
    oc = OperatingContext(str(path))
    assert oc.describe()["context_revision"] == "r7"
    write(path, VALID.replace("{enforce}", "warn").replace('"r7"', '"r8"'))
    os.utime(path, ns=(1, 1))  # a different mtime even on coarse-clock filesystems
    assert oc.describe()["context_revision"] == "r8"
    with caplog.at_level(logging.WARNING, logger="cpersona.policy.projects"):
        write(path, "version = 1\n[registry]\nenforce = 'loud'\n")
        for _ in range(3):
            out = oc.describe()
    assert out["ok"] is False and out["enabled"] is False
    assert "sidecar unusable" in out["error"] and "registry.enforce" in out["error"]
    assert len([r for r in caplog.records if "dormant" in r.getMessage()]) == 1
    assert oc.gate("kai", "zzz", True).refusal is None  # dormant: everything passes


def test_describe_preview_and_sections(sidecar, make_engine):
    eng = make_engine(operating_context_path=str(sidecar()))
    assert eng.get_operating_context() == {
        "ok": True, "context_revision": "r7",
        "instructions_summary": 'Team memory. Use project_id "@auto"; never store secrets.',
        "registry": {"project_ids": ["", "ops", "web"], "enforce": "warn"},
        "defaults": {"kai": "ops", "solo": "", "legacy": "old-project"},
        "doctrine_sections": ["alerts", "release"],
    }
    assert eng.get_operating_context("release") == {"ok": True, "context_revision": "r7", "section": "release",
                                                     "body": "Releases go out on Thursdays."}
    unknown = eng.get_operating_context("deploys")
    assert unknown["ok"] is False and unknown["doctrine_sections"] == ["alerts", "release"]
    assert eng.operating_context.instructions().startswith("Team memory.")


# --------------------------------------------------------------------------- gate
@pytest.mark.parametrize("enforce, agent, project, write, expect_project, extras, refused", [
    ("warn", "kai", None, True, None, {}, False),
    ("warn", "kai", "", True, "", {}, False),
    ("warn", "kai", "ops", True, "ops", {}, False),
    ("warn", "kai", "@auto", True, "ops", {"resolved_project_id": "ops"}, False),
    ("warn", "solo", "@auto", True, "", {"resolved_project_id": ""}, False),
    ("warn", "nobody", "@auto", True, "", {"resolved_project_id": "", "warning": "no default project"}, False),
    ("off", "nobody", "@auto", True, "", {"resolved_project_id": ""}, False),
    ("reject", "nobody", "@auto", True, None, {}, True),
    ("reject", "nobody", "@auto", False, "", {"resolved_project_id": "", "warning": "no default project"}, False),
    ("warn", "kai", "zzz", True, "zzz", {"warning": "'zzz' not in registry (rev r7)"}, False),
    ("reject", "kai", "zzz", True, None, {}, True),
    ("reject", "kai", "zzz", False, "zzz", {"warning": "not in registry"}, False),
    ("off", "kai", "zzz", True, "zzz", {}, False),
    ("warn", "legacy", "@auto", True, "old-project", {"resolved_project_id": "old-project", "warning": "not in registry"}, False),
    ("reject", "legacy", "@auto", True, None, {}, True),
])
def test_gate_rules(sidecar, enforce, agent, project, write, expect_project, extras, refused):
    gate = OperatingContext(str(sidecar(enforce))).gate(agent, project, write)
    if refused:
        assert gate.refusal and gate.revision == "r7"
        body = gate.refused({"messages": []})
        assert body["ok"] is False and body["operating_context_revision"] == "r7" and body["messages"] == []
        return
    assert gate.refusal is None and gate.project_id == expect_project
    warning = extras.pop("warning", None)
    got = dict(gate.extras)
    got_warning = got.pop("operating_context_warning", None)
    assert got == extras
    assert (warning is None and got_warning is None) or (warning and warning in got_warning)


def test_gate_without_registry_and_when_dormant(tmp_path):
    path = write(tmp_path / "oc.toml", "version = 1\n[defaults]\nkai = 'ops'\n")
    gate = OperatingContext(str(path)).gate("kai", "zzz", True)
    assert gate.project_id == "zzz" and gate.extras == {}  # no registry declared: no check
    dormant = OperatingContext(str(tmp_path / "absent.toml")).gate("kai", "@auto", True)
    assert dormant.project_id == "" and dormant.extras["resolved_project_id"] == ""
    assert "needs an operating context" in dormant.extras["operating_context_warning"]  # never silent


# --------------------------------------------------------------------------- MCP
def test_operating_context_over_mcp(tmp_path, sidecar):
    path = sidecar("reject")

    async def scenario(c):
        r = {"init": c.init}
        r["preview"] = await c.ok("get_operating_context")
        r["section"] = await c.ok("get_operating_context", {"section": "alerts"})
        r["store_auto"] = await c.ok("store", {"agent_id": "kai", "message": {"content": "ops fact"}, "project_id": "@auto"})
        r["store_unmapped"] = await c.call("store", {"agent_id": "nobody", "message": {"content": "x"}, "project_id": "@auto"})
        r["store_unregistered"] = await c.call("store", {"agent_id": "kai", "message": {"content": "y"}, "project_id": "zzz"})
        r["store_registered"] = await c.ok("store", {"agent_id": "kai", "message": {"content": "web fact"}, "project_id": "web"})
        r["episode_unregistered"] = await c.call("archive_episode", {"agent_id": "kai", "summary": "s", "project_id": "zzz"})
        r["episode_auto"] = await c.ok("archive_episode", {"agent_id": "kai", "summary": "ops session", "project_id": "@auto"})
        r["recall_auto"] = await c.ok("recall", {"agent_id": "kai", "query": "fact", "project_id": "@auto"})
        r["recall_unregistered"] = await c.ok("recall", {"agent_id": "kai", "query": "fact", "project_id": "zzz"})
        r["list_auto"] = await c.ok("list_memories", {"agent_id": "kai", "project_id": "@auto"})
        r["episodes_unregistered"] = await c.ok("list_episodes", {"project_id": "zzz"})
        await c.ok("pause_persistence", {"ttl_seconds": 60})
        r["paused_unregistered"] = await c.call("store", {"agent_id": "kai", "message": {"content": "z"}, "project_id": "zzz"})
        r["paused_auto"] = await c.ok("store", {"agent_id": "kai", "message": {"content": "z"}, "project_id": "@auto"})
        return r

    run = run_mcp(scenario, tmp_path / "oc.db", env={"CPERSONA_OPERATING_CONTEXT_PATH": str(path)})
    r = run.result
    assert r["init"].instructions == 'Team memory. Use project_id "@auto"; never store secrets.'
    assert r["preview"]["ok"] is True and r["preview"]["registry"]["enforce"] == "reject"
    assert r["section"] == {"ok": True, "context_revision": "r7", "section": "alerts", "body": "Page the on-call engineer."}
    assert r["store_auto"]["result"] == "stored" and r["store_auto"]["resolved_project_id"] == "ops"
    for key in ("store_unmapped", "store_unregistered"):
        body = r[key].data
        assert body["ok"] is False and body["result"] == "rejected" and body["reason"] == body["error"], key
        assert body["operating_context_revision"] == "r7", key
    assert "registered: '', 'ops', 'web'" in r["store_unregistered"].data["error"]
    assert "operating_context_warning" not in r["store_registered"]
    ep = r["episode_unregistered"].data
    assert ep["ok"] is False and ep["episode_id"] is None and ep["operating_context_revision"] == "r7"
    assert r["episode_auto"]["ok"] is True and r["episode_auto"]["resolved_project_id"] == "ops"
    assert r["recall_auto"]["resolved_project_id"] == "ops"
    assert "ops fact" in [m["content"] for m in r["recall_auto"]["messages"]]
    assert "web fact" not in [m["content"] for m in r["recall_auto"]["messages"]]
    assert "not in registry" in r["recall_unregistered"]["operating_context_warning"]  # reads are never refused
    assert [m["project_id"] for m in r["list_auto"]["memories"]] == ["ops"] and r["list_auto"]["resolved_project_id"] == "ops"
    assert "not in registry" in r["episodes_unregistered"]["operating_context_warning"]
    assert r["paused_unregistered"].data["ok"] is False  # the gate runs before the pause check
    assert r["paused_auto"]["persisted"] is False and r["paused_auto"]["resolved_project_id"] == "ops"


def test_malformed_sidecar_is_reported_and_the_server_starts(tmp_path, sidecar):
    path = sidecar(text="version = 1\n[registry]\nproject_ids = 'ops'\n")

    async def scenario(c):
        return {
            "init": c.init,
            "context": await c.ok("get_operating_context"),
            "store": await c.ok("store", {"agent_id": "kai", "message": {"content": "auto fact"}, "project_id": "@auto"}),
            "list": await c.ok("list_memories", {}),
        }

    run = run_mcp(scenario, tmp_path / "bad.db", env={"CPERSONA_OPERATING_CONTEXT_PATH": str(path)})
    r = run.result
    assert r["init"].instructions == INSTRUCTIONS
    assert r["context"]["ok"] is False and r["context"]["enabled"] is False
    assert "sidecar unusable" in r["context"]["error"] and "registry.project_ids" in r["context"]["error"]
    warnings = [line for line in run.stderr.splitlines() if "operating context is dormant" in line]
    assert len(warnings) == 1 and "registry.project_ids" in warnings[0]
    assert "Traceback" not in run.stderr
    # dormant: "@auto" cannot resolve → global pool, with a warning (never a literal "@auto" project)
    assert r["store"]["result"] == "stored" and r["store"]["resolved_project_id"] == ""
    assert "operating_context_warning" in r["store"]
    assert r["list"]["memories"][0]["project_id"] == ""
