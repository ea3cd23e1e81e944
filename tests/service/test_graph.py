"""The declared graph in the service layer, on both backends: the walk's breadth bound and
order, the reads reconstruct and the supersedes rule build on (`GraphService.evidence`,
`superseded`, `neighbourhood`, `records_mentioning`), argument errors, and
get_session_findings (kinds, static severities, caps, a crashed check)."""

from __future__ import annotations

import pytest
from cpersona.errors import InvalidArgument
from cpersona.health.findings import SEVERITY, kind_of
from cpersona.retrieval.neighbourhood import MAX_ENTITIES
from cpersona.service.graph import ROLES, role
from cpersona.storage.repairs import RepairRepo
from cpersona.storage.scope import Scope

pytestmark = pytest.mark.both_backends


def _hub(eng, spokes: int) -> None:
    """Entity `hub` related to `spokes` entities, declared 60 per call (later calls more recent)."""
    for start in range(0, spokes, 60):
        relations = [{"subject": "hub", "predicate": "links", "object": f"spoke {i:03d}"}
                     for i in range(start, min(start + 60, spokes))]
        assert eng.declare_associations("kai", {"relations": relations})["dropped"] == []


def test_the_breadth_bound_keeps_the_most_recently_reached(engine_none):
    _hub(engine_none, 300)
    out = engine_none.traverse("kai", "HUB", max_hops=2, limit=100)
    assert len(out["entities"]) == 100 and out["entities_omitted"] == MAX_ENTITIES - 100
    assert out["bounds"] == {"omitted": ["max_hops", "limit"]}  # 300 spokes, 255 expanded
    names = [e["name"] for e in out["entities"]]
    assert names[0] == "hub" and names[1:4] == ["spoke 240", "spoke 241", "spoke 242"]  # the newest call first
    assert len(out["relations"]) == 99 and out["relations"][0]["object"] == out["entities"][1]["id"]


def test_argument_errors_name_the_argument(engine_none):
    for kwargs, argument in (({"max_hops": 6}, "max_hops"), ({"limit": 0}, "limit"), ({"limit": True}, "limit"),
                             ({"project_id": 5}, "project_id")):
        with pytest.raises(InvalidArgument, match=argument):
            engine_none.traverse("kai", "x", **kwargs)
    with pytest.raises(InvalidArgument, match="associations: must be an object"):
        engine_none.declare_associations("kai", ["Aiko"])
    with pytest.raises(InvalidArgument, match="retract: must be an object"):
        engine_none.declare_associations("kai", retract=[1])
    assert engine_none.declare_associations("kai") == {"ok": True, "result": "declared", "entities": [],
                                                       "mentions": 0, "relations": [], "dropped": []}


def test_evidence_links_roles_and_supersedes_for_other_services(engine_none):
    ids = [engine_none.store("kai", f"fact {i}", project_id="ops" if i == 3 else "")["id"] for i in range(4)]
    old, new, note, scoped = (f"mem:{i}" for i in ids)
    engine_none.declare_associations("kai", {
        "entities": [{"name": "payments team"}],
        "relations": [{"subject": new, "predicate": "Supersedes", "object": old},
                      {"subject": note, "predicate": "cites", "object": new},
                      {"subject": "payments team", "predicate": "owns", "object": "checkout"}]}, anchor_ref=new)
    engine_none.declare_associations("kai", {"relations": [{"subject": scoped, "predicate": "corrects",
                                                            "object": old}]}, project_id="ops")
    graph = engine_none.graph
    evidence = graph.evidence(Scope("kai", ""), [new, "mem:007", "bogus"])
    assert [(k.subject, k.predicate, k.object, k.role) for k in evidence.links] == [
        (new, "supersedes", old, "supersedes"), (note, "cites", new, None)]
    assert evidence.mentions == {new: [1]} and [r.predicate for r in evidence.anchored[new]] == [
        "supersedes", "cites", "owns"]
    assert graph.superseded(Scope("kai", ""), [old, new]) == {old: [new]}
    assert graph.superseded(Scope("mika"), [old]) == {}
    everywhere = graph.evidence(Scope("kai"), [old])
    assert {(k.subject, k.role) for k in everywhere.links} == {(new, "supersedes"), (scoped, "corrects")}
    assert graph.evidence(Scope("kai", ""), [old]).links[0].subject == new  # project ops' relation left out
    walked = graph.neighbourhood(Scope("kai"), [1], 1)
    assert walked.distance == {1: 0, 2: 1} and not walked.unexpanded()
    assert graph.records_mentioning(Scope("kai"), [1, 2]) == {1: ([new], 1), 2: ([], 0)}
    assert role("contradicts") == "contradicts" and role("cites") is None and len(ROLES) == 6


def test_findings_are_check_health_issues_with_static_severities(engine_none):
    for i in range(3):
        engine_none.store(f"agent{i}", f"a memory of agent {i}")
    report = engine_none.check_health()
    out = engine_none.get_session_findings(per_kind_limit=5)
    assert out["ok"] is True and out["health"]["status"] == report["status"]
    assert len(out["findings"]) == len(report["issues"]) == out["total"]
    for issue, finding in zip(report["issues"], out["findings"]):
        assert finding["kind"] == kind_of(issue) and finding["severity"] == SEVERITY.get(finding["kind"], "info")
        assert finding["check"] == issue["check"] and finding["health_severity"] == issue["severity"]
        if not finding.get("needs_human_review"):
            assert finding["severity"] == finding["health_severity"], finding
    missing = next(f for f in out["findings"] if f["kind"] == "missing_profile")
    assert missing["agents"] == ["agent0", "agent1", "agent2"]
    assert out["summary"].startswith(f"Storage findings: {out['total']} returned")
    assert "summary" not in engine_none.get_session_findings(include_summary=False)
    with pytest.raises(InvalidArgument, match="per_kind_limit"):
        engine_none.get_session_findings(per_kind_limit=0)


def test_a_crashed_check_is_a_finding_and_kinds_are_capped(engine_none, monkeypatch):
    engine_none.store("kai", "something")

    def broken(self, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr(RepairRepo, "census", broken)
    out = engine_none.get_session_findings(per_kind_limit=2)
    crashed = [f for f in out["findings"] if f["kind"] == "check_crashed"]
    assert len(crashed) == 2 and crashed[0]["severity"] == "warn" and "boom" in crashed[0]["detail"]
    assert out["capped_kinds"] == ["check_crashed"] and out["counts_by_kind"]["check_crashed"] == 2
    assert out["health"]["status"] == "degraded"
