"""Declared associations through a real MCP stdio client, on SQLite and on PostgreSQL (one
spawned server per backend for the module): declare_associations, store's `associations`,
traverse and get_session_findings — aliases (one Japanese), normalised names, scopes (project,
channel, source_id), hops and limits, malformed input, retract, the pause, deletions, and the
graph travelling through export, import (ours, the original 2.6's export and database) and
merge."""

from __future__ import annotations

import json
import shutil

import pytest
from mcp_types import ToolAnnotations

from backends import BACKENDS, pg_schema
from conftest import FIXTURES, run_mcp

GRAPH = FIXTURES / "original-2.6.14-graph"
AIKO = {"type": "User", "id": "discord:aiko", "name": "Aiko"}


async def _scenario(c, exchange):  # one server, every rule, recorded for the tests below
    r = {"tools": {t.name: t for t in (await c.session.list_tools()).tools}}

    async def store(content, **extra):
        return await c.ok("store", {"agent_id": "kai", "content": content, **extra})

    async def declare(**args):
        return await c.call("declare_associations", {"agent_id": "kai", **args})

    async def traverse(entity, **args):
        return await c.ok("traverse", {"agent_id": "kai", "entity": entity, **args})

    for i, (text, extra) in enumerate([
            ("Aiko leads the payments team.", {"source": AIKO}),
            ("The checkout service calls Stripe.", {"project_id": "ops"}),
            ("Ren took over the payments team in March.", {}),
            ("On #ops we page Ren for checkout incidents.", {"channel": "#ops"}),
            ("決済チームの定例は毎週水曜日。", {})], start=1):
        assert (await store(text, id=f"m{i}", **extra))["id"] == i
    assert (await c.ok("store", {"agent_id": "mika", "content": "Mika's note."}))["id"] == 6
    r["declare"] = await declare(anchor_ref="mem:1", associations={
        "entities": [{"name": "Aiko", "aliases": ["Aiko Tanaka"]}, {"name": "payments team", "aliases": ["決済チーム"]}],
        "relations": [{"subject": "Aiko", "predicate": "Leads", "object": "payments team"},
                      {"subject": "payments team", "predicate": "owns", "object": "checkout service"}]})
    r["rider"] = await store("Ren owns the checkout runbook.", id="m7", associations={
        "entities": [{"name": "Ren"}, {"name": "checkout runbook"}],
        "relations": [{"subject": "Ren", "predicate": "owns", "object": "checkout runbook"},
                      {"subject": "mem:7", "predicate": "supersedes", "object": "mem:3"}]})
    r["rider_duplicate"] = await store("Ren owns the checkout runbook.", associations={"entities": [{"name": "Ren"}]})
    r["jp"] = await declare(anchor_ref="mem:5", associations={
        "entities": [{"name": "決済チーム"}, {"name": "ＲＥＮ"}],
        "relations": [{"subject": "Ren", "predicate": "leads", "object": "決済チーム"}]})
    r["project"] = await declare(anchor_ref="mem:2", project_id="ops", associations={
        "entities": [{"name": "Stripe"}], "relations": [{"subject": "checkout service", "predicate": "calls",
                                                           "object": "Stripe"}]})
    r["channel"] = await declare(anchor_ref="mem:4", channel="#ops", associations={
        "entities": [{"name": "on-call rota", "aliases": ["rota"]}],
        "relations": [{"subject": "Ren", "predicate": "is on", "object": "rota"}]})
    r["malformed"] = await declare(anchor_ref="mem:6", associations={
        "entities": [{"name": ""}, "Aiko", {"name": "Yuki", "aliases": ["Aiko Tanaka", 7, "Yuki-san"]},
                     {"name": "Ren", "aliases": "not a list"}, *[{"name": f"e{i}"} for i in range(61)]],
        "relations": [{"subject": "Ren", "predicate": " ", "object": "Aiko"}, "Ren leads",
                      {"subject": "mem:999", "predicate": "cites", "object": "Aiko"},
                      {"subject": "Ren", "predicate": "mentors", "object": 42},
                      {"subject": "mem:99999999999999999999", "predicate": "x", "object": "Ren"},
                      {"subject": "Ren", "predicate": "mentors", "object": "Yuki"}]})
    r["not_an_object"] = await declare(associations="Aiko")
    r["bad_hops"] = await c.call("traverse", {"agent_id": "kai", "entity": "Aiko", "max_hops": 6})
    r["bad_limit"] = await c.call("traverse", {"agent_id": "kai", "entity": "Aiko", "limit": 0})
    for name, entity, args in [
            ("t_aiko", "Aiko", {}), ("t_alias", "aiko  TANAKA", {"max_hops": 0}), ("t_jp", "決済チーム", {"max_hops": 2}),
            ("t_width", "ＡＩＫＯ", {"max_hops": 5}), ("t_limit", "payments team", {"max_hops": 3, "limit": 2}),
            ("t_ops", "checkout service", {"max_hops": 2, "project_id": "ops"}),
            ("t_global", "checkout service", {"max_hops": 2, "project_id": ""}),
            ("t_channel", "Ren", {"channel": "#ops"}), ("t_other_channel", "rota", {"channel": "#web"}),
            ("t_source", "payments team", {"source_id": "discord:aiko"}), ("t_unknown", "nobody", {}),
            ("t_blank", "   ", {})]:
        r[name] = await traverse(entity, **args)
    r["t_mika"] = await c.ok("traverse", {"agent_id": "mika", "entity": "Aiko"})
    leads = next(x["id"] for x in r["t_aiko"]["relations"] if x["predicate"] == "leads" and x["object"] == 2)
    r["retract"] = await declare(retract={"relations": [leads, 999999, "7"],
                                          "mentions": [{"entity": 1, "ref": "mem:1"}, {"ref": "mem:1"}]})
    r["retract_foreign"] = await c.ok("declare_associations", {"agent_id": "mika", "retract": {"relations": [2]}})
    r["t_after_retract"] = await traverse("payments team")
    await c.ok("pause_persistence", {"ttl_seconds": 60})
    r["paused"] = await declare(associations={"entities": [{"name": "Ghost"}]})
    r["paused_store"] = await store("an off-the-record fact", associations={"entities": [{"name": "Ghost"}]})
    await c.ok("resume_persistence", {})
    r["t_ghost"] = await traverse("Ghost")
    # the graph travels: export, import (ours and the original 2.6's), merge
    r["export"] = await c.ok("export_memories", {"agent_id": "kai", "output_path": "kai.jsonl"})
    r["import"] = await c.ok("import_memories", {"input_path": "kai.jsonl", "target_agent_id": "kai2"})
    r["reimport"] = await c.ok("import_memories", {"input_path": "kai.jsonl", "target_agent_id": "kai2"})
    r["t_kai2"] = await c.ok("traverse", {"agent_id": "kai2", "entity": "決済チーム", "max_hops": 2})
    shutil.copy(GRAPH / "export-kai.jsonl", exchange / "orig.jsonl")
    shutil.copy(GRAPH / "memory.db", exchange / "orig.db")
    (exchange / "orig.db").chmod(0o600)
    r["import_orig"] = await c.ok("import_memories", {"input_path": "orig.jsonl", "target_agent_id": "kai26"})
    r["t_orig"] = await c.ok("traverse", {"agent_id": "kai26", "entity": "Aiko Tanaka", "max_hops": 5})
    r["import_orig_db"] = await c.ok("import_memories", {"input_path": "orig.db", "target_agent_id": "kai26db"})
    r["t_orig_db"] = await c.ok("traverse", {"agent_id": "kai26db", "entity": "決済チーム", "max_hops": 1})
    r["merge"] = await c.ok("merge_memories", {"source_agent_id": "kai26", "target_agent_id": "ren26", "mode": "move"})
    r["t_merged"] = await c.ok("traverse", {"agent_id": "ren26", "entity": "aiko", "max_hops": 5})
    r["t_moved_away"] = await c.ok("traverse", {"agent_id": "kai26", "entity": "aiko"})
    # deletions take what they name
    r["delete_memory"] = await c.ok("delete_memory", {"memory_id": 7})
    r["t_after_delete"] = await traverse("Ren", max_hops=1)
    r["erase"] = await c.ok("delete_agent_data", {"agent_id": "kai2"})
    r["t_erased"] = await c.ok("traverse", {"agent_id": "kai2", "entity": "Aiko"})
    r["findings"] = await c.ok("get_session_findings", {"per_kind_limit": 1})
    r["findings_bad"] = await c.call("get_session_findings", {"per_kind_limit": 0})
    return r


@pytest.fixture(scope="module", params=BACKENDS)
def run(request, tmp_path_factory):
    if not GRAPH.is_dir():
        pytest.skip("../shared/fixtures is absent (CPERSONA_FIXTURES names it)")
    folder = tmp_path_factory.mktemp(f"graph-{request.param}")
    exchange = folder / "exchange"
    exchange.mkdir()
    env = {"CPERSONA_EXPORT_DIR": str(exchange)}

    def go(extra: dict[str, str]):
        out = run_mcp(lambda c: _scenario(c, exchange), folder / "g.db", env={**env, **extra})
        assert not out.stream_errors and "Traceback" not in out.stderr, out.stderr
        return out.result

    if request.param == "sqlite":
        yield go({})
        return
    with pg_schema() as url:
        yield go({"CPERSONA_DB_URL": url})


def _names(answer):
    return [(e["name"], e["hops"]) for e in answer["entities"]]


def _relations(answer):
    names = {e["id"]: e["name"] for e in answer["entities"]}
    return {(names[x["subject"]], x["predicate"], names[x["object"]]) for x in answer["relations"]}


def test_the_tools_are_listed_with_plain_schemas(run):
    tools = run["tools"]
    for name, read_only in (("declare_associations", False), ("traverse", True), ("get_session_findings", True)):
        notes = tools[name].annotations or ToolAnnotations()
        assert bool(notes.read_only_hint) is read_only and tools[name].description
        schema = json.dumps(tools[name].input_schema)
        assert "$ref" not in schema and "anyOf" not in schema
    assert notes.read_only_hint is True
    declare = tools["declare_associations"]
    assert (declare.annotations.destructive_hint, declare.annotations.idempotent_hint) == (None, True)  # retract
    props = declare.input_schema["properties"]
    assert props["associations"]["type"] == "object" and props["retract"]["type"] == "object"
    assert tools["store"].input_schema["properties"]["associations"]["type"] == "object"
    hops = tools["traverse"].input_schema["properties"]["max_hops"]
    assert (hops["minimum"], hops["maximum"], hops["default"]) == (0, 5, 1)


def test_declare_registers_normalised_entities_aliases_mentions_and_relations(run):
    assert run["declare"].data == {"ok": True, "result": "declared", "entities": [
        {"id": 1, "name": "Aiko", "created": True}, {"id": 2, "name": "payments team", "created": True}],
        "mentions": 2, "relations": [1, 2], "dropped": []}
    assert run["rider"]["result"] == "stored" and run["rider"]["associations"]["mentions"] == 2
    assert len(run["rider"]["associations"]["relations"]) == 2  # the record → record supersedes too
    assert run["rider_duplicate"]["result"] == "skipped" and run["rider_duplicate"]["associations"]["entities"] == [
        {"id": 4, "name": "Ren", "created": False}]  # declared against the equal row
    # the Japanese alias and the full-width name resolve to the entities already there
    assert [(e["name"], e["created"]) for e in run["jp"].data["entities"]] == [("決済チーム", False), ("ＲＥＮ", False)]
    assert [e["id"] for e in run["jp"].data["entities"]] == [2, 4]


def test_malformed_items_are_dropped_and_the_rest_recorded(run):
    data = run["malformed"].data
    assert data["ok"] is True and data["result"] == "declared"
    items = {d["item"]: d["reason"] for d in data["dropped"]}
    assert "not a record of this agent" in items["anchor_ref"]  # mem:6 is mika's
    for item in ("entities[0]", "entities[1]", "entities[2].aliases[1]", "entities[3].aliases", "relations[0]",
                 "relations[1]", "relations[2].subject", "relations[3].object", "relations[4].subject",
                 "entities[64]"):
        assert item in items, item
    assert items["entities[2].aliases[0]"] == "already names another entity in this scope"
    assert items["entities[64]"] == "beyond the 64-item bound"
    assert [e["name"] for e in data["entities"][:2]] == ["Yuki", "Ren"] and data["mentions"] == 0
    assert len(data["relations"]) == 1  # Ren mentors Yuki
    assert run["not_an_object"].is_error and "associations" in run["not_an_object"].text  # the schema: an object
    assert run["bad_hops"].is_error and run["bad_limit"].is_error


def test_traverse_walks_by_name_alias_and_normalised_forms(run):
    assert _names(run["t_aiko"]) == [("Aiko", 0), ("payments team", 1)]
    aiko = run["t_aiko"]["entities"][0]
    assert aiko["aliases"] == ["Aiko Tanaka"] and aiko["mentions"] == ["mem:1"]
    relation = run["t_aiko"]["relations"][0]
    assert set(relation) == {"id", "subject", "predicate", "object", "declared_by", "declared_at", "anchor_ref"}
    assert (relation["predicate"], relation["declared_by"], relation["anchor_ref"]) == ("leads", "agent", "mem:1")
    assert run["t_aiko"]["bounds"] == {"omitted": ["max_hops"]}
    assert _names(run["t_alias"]) == [("Aiko", 0)] and run["t_alias"]["relations"] == []
    assert _names(run["t_jp"])[0] == ("payments team", 0)
    assert run["t_jp"]["entities"][0]["aliases"] == ["決済チーム"]
    assert ("Ren", "leads", "payments team") in _relations(run["t_jp"])
    assert {n for n, _ in _names(run["t_width"])} >= {"Aiko", "payments team", "Ren", "checkout runbook"}
    assert "bounds" not in run["t_width"] or "limit" not in run["t_width"]["bounds"]["omitted"]
    assert run["t_unknown"]["reason"] == "no_such_entity" and run["t_blank"]["reason"] == "no_such_entity"
    assert run["t_mika"]["reason"] == "no_such_entity"  # agents never share a graph


def test_traverse_orders_by_hops_then_recency_and_reports_its_bounds(run):
    limited = run["t_limit"]
    assert len(limited["entities"]) == 2 and limited["entities_omitted"] >= 1
    assert limited["bounds"]["omitted"][-1] == "limit"
    assert [e["hops"] for e in limited["entities"]] == [0, 1]
    assert limited["entities"][1]["name"] == "Ren"  # reached by the most recent relation (Ren leads 決済チーム)
    hops = [e["hops"] for e in run["t_width"]["entities"]]
    assert hops == sorted(hops)


def test_traverse_applies_the_scope_of_recall(run):
    assert ("checkout service", "calls", "Stripe") in _relations(run["t_ops"])
    assert "Stripe" not in {n for n, _ in _names(run["t_global"])}  # project 'ops' is not the global pool
    assert ("Ren", "is on", "on-call rota") in _relations(run["t_channel"])
    assert run["t_other_channel"]["reason"] == "no_such_entity"  # declared in #ops only
    source = {e["name"]: e.get("mentions", []) for e in run["t_source"]["entities"]}
    assert source["payments team"] == ["mem:1"]  # mem:3/mem:5 are not Aiko's (source_id)


def test_retract_is_the_only_way_a_declaration_leaves(run):
    data = run["retract"].data
    assert data["retracted"] == {"relations": 1, "mentions": 1}
    assert {d["item"] for d in data["dropped"]} == {"retract.relations[2]", "retract.mentions[1]"}
    assert run["retract_foreign"]["retracted"] == {"relations": 0, "mentions": 0}
    after = run["t_after_retract"]
    assert ("Aiko", "leads", "payments team") not in _relations(after)
    assert ("Ren", "leads", "payments team") in _relations(after)
    assert "Aiko" not in {name for name, _ in _names(after)}  # its only relation to the team is gone


def test_nothing_is_declared_while_paused(run):
    assert run["paused"].data["result"] == "skipped" and run["paused"].data["persisted"] is False
    assert run["paused_store"]["persisted"] is False and "associations" not in run["paused_store"]
    assert run["t_ghost"]["reason"] == "no_such_entity"


def test_the_graph_travels_with_export_import_and_merge(run, tmp_path_factory):
    assert run["export"]["associations"]["relations"] >= 6
    assert run["import"]["associations"]["entities"] == run["export"]["associations"]["entities"]
    assert run["reimport"]["imported_memories"] == 0  # a re-import adds nothing, the graph included
    assert _names(run["t_kai2"])[0] == ("payments team", 0)
    assert run["import_orig"]["format"] == "cpersona-export/1.1"
    assert run["import_orig"]["associations"] == {"entities": 8, "mentions": 10, "relations": 8}
    orig = run["t_orig"]
    assert _names(orig)[0] == ("Aiko", 0) and ("Aiko", "member of", "platform team") in _relations(orig)
    assert any(e["name"] == "payments team" and "決済チーム" in e["aliases"] for e in orig["entities"])
    assert run["import_orig_db"]["associations"] == {"entities": 8, "mentions": 10, "relations": 8}
    assert _names(run["t_orig_db"])[0] == ("payments team", 0)
    assert run["merge"]["associations"] == {"entities": 8, "mentions": 10, "relations": 8}
    assert _names(run["t_merged"]) == _names(orig)
    assert run["t_moved_away"]["reason"] == "no_such_entity"  # the move emptied the source


def test_deleting_a_record_or_an_agent_takes_its_declarations(run):
    after = run["t_after_delete"]
    ren = after["entities"][0]
    assert ren["name"] == "Ren" and "mem:7" not in ren.get("mentions", [])
    assert ("Ren", "owns", "checkout runbook") not in _relations(after)  # anchored on mem:7
    assert run["t_erased"]["reason"] == "no_such_entity"


def test_session_findings_over_mcp(run):
    findings = run["findings"]
    assert findings["ok"] is True and findings["per_kind_limit"] == 1
    assert all({"kind", "check", "severity", "health_severity"} <= set(f) for f in findings["findings"])
    assert findings["health"]["status"] in ("healthy", "degraded", "unhealthy")
    assert findings["summary"].startswith("Storage findings")
    assert run["findings_bad"].is_error


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory):
    """Our server on a copy of the original 2.6.14's graph database."""
    if not GRAPH.is_dir():
        pytest.skip("../shared/fixtures is absent (CPERSONA_FIXTURES names it)")
    path = tmp_path_factory.mktemp("graph-fixture") / "memory.db"
    shutil.copyfile(GRAPH / "memory.db", path)
    path.chmod(0o600)

    async def scenario(c):
        return {
            "aiko": await c.ok("traverse", {"agent_id": "kai", "entity": "Aiko Tanaka", "max_hops": 5}),
            "jp": await c.ok("traverse", {"agent_id": "kai", "entity": "決済チーム"}),
            "global": await c.ok("traverse", {"agent_id": "kai", "entity": "checkout service", "project_id": ""}),
            "more": await c.ok("declare_associations", {"agent_id": "kai", "anchor_ref": "mem:6", "associations": {
                "entities": [{"name": "Ren", "aliases": ["レン"]}],
                "relations": [{"subject": "Ren", "predicate": "writes", "object": "incident notes"}]}}),
            "after": await c.ok("traverse", {"agent_id": "kai", "entity": "レン"}),
            "findings": await c.ok("get_session_findings", {}),
        }

    out = run_mcp(scenario, path)
    assert not out.stream_errors and "Traceback" not in out.stderr, out.stderr
    return out.result


def test_a_26_database_is_walked_as_it_is(fixture_db):
    aiko = fixture_db["aiko"]
    assert _names(aiko) == [("Aiko", 0), ("platform team", 1), ("payments team", 1), ("Ren", 2),
                            ("checkout service", 2), ("checkout runbook", 3), ("payments-gateway proxy", 3),
                            ("Stripe", 4)]
    assert aiko["entities"][2]["mentions"] == ["mem:1", "mem:5"] and "bounds" not in aiko
    assert ("checkout service", "calls", "payments-gateway proxy") in _relations(aiko)  # project 'ops'
    assert _names(fixture_db["jp"])[0] == ("payments team", 0)
    assert "payments-gateway proxy" not in {n for n, _ in _names(fixture_db["global"])}
    assert fixture_db["more"]["entities"] == [{"id": 6, "name": "Ren", "created": False}]  # the 2.6 entity
    assert ("Ren", "writes", "incident notes") in _relations(fixture_db["after"])
    assert fixture_db["findings"]["health"]["severity_summary"]["critical"] == 0
