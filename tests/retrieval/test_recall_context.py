"""recall_with_context and the recall filters:
chronological merge with the caller's conversation, deduplicated; other roles only filter;
exclude_contents, source_id prefix filter and deep."""

from __future__ import annotations

import pytest
from cpersona.errors import InvalidArgument
from cpersona.service.requests import RecallRequest

from quality_helpers import contents, make, recall


@pytest.fixture
def eng(tmp_path):
    e = make(tmp_path / "rc.db", embedder=None)
    yield e
    e.close()


def rwc(e, query, context, agent="a", **kw):
    return e.recall_with_context(RecallRequest(agent, query, **kw), context)


def test_chronological_merge_deduplicated(eng):
    eng.store("a", "the harbour crane is due for inspection", timestamp="2026-03-01T09:00:00Z")
    eng.store("a", "harbour crane inspection passed", timestamp="2026-03-03T09:00:00Z")
    ctx = [
        {"role": "user", "content": "did the harbour crane inspection pass?", "name": "Aki", "user_id": "u7",
         "timestamp": "2026-03-04T08:00:00Z"},
        {"role": "assistant", "content": "the harbour crane is due for inspection", "timestamp": "2026-03-02T08:00:00Z"},
        {"role": "assistant", "content": "the harbour crane is due for inspection", "timestamp": "2026-03-02T08:00:00Z"},
        {"role": "system", "content": "be brief"},
        {"content": "harbour crane inspection passed"},
    ]
    out = rwc(eng, "harbour crane inspection", ctx)
    msgs = out["messages"]
    # the recalled copy of the assistant's line and of the role-less line are excluded (dedup)
    assert [m["content"] for m in msgs] == [
        "the harbour crane is due for inspection", "did the harbour crane inspection pass?"]
    assert msgs[0]["source"] == {"type": "Agent", "id": "self"} and msgs[0]["context_type"] == "conversation"
    assert msgs[1]["source"] == {"type": "User", "id": "u7", "name": "Aki"}
    assert out["context_filter_only"]["roles"] == ["(unset)", "system"]


def test_recalled_rows_and_echoes_sort_by_time(eng):
    eng.store("a", "pelican feeding schedule morning", timestamp="2026-03-01T09:00:00Z")
    eng.store("a", "pelican feeding schedule evening", timestamp="2026-03-05T09:00:00Z")
    out = rwc(eng, "pelican feeding schedule", [
        {"role": "user", "content": "what is the pelican plan", "timestamp": "2026-03-03T00:00:00+00:00"},
        {"role": "user", "content": "undated question"},
    ])
    # an undated conversation entry is the live conversation: after every dated row (the original put it first)
    assert contents(out) == ["pelican feeding schedule morning", "what is the pelican plan",
                             "pelican feeding schedule evening", "undated question"]
    assert "ref" in out["messages"][0] and "ref" not in out["messages"][1]


def test_context_validation(eng):
    with pytest.raises(InvalidArgument):
        rwc(eng, "x", "not a list")
    with pytest.raises(InvalidArgument):
        rwc(eng, "x", [{"role": "user", "content": 5}])
    with pytest.raises(InvalidArgument):
        rwc(eng, "x", [{"role": "user", "content": "x"}] * 201)
    assert rwc(eng, "x", [])["messages"] == []


def test_exclude_contents_short_exact_long_prefix(eng):
    eng.store("a", "osprey")
    long = "osprey nest camera on the north pylon recorded two chicks hatching in may"
    eng.store("a", long)
    assert set(contents(recall(eng, "osprey"))) == {"osprey", long}
    assert contents(recall(eng, "osprey", exclude_contents=("OSPREY ",))) == [long]
    # ≥ 32 chars: prefix either way — the long row starts with it, and it starts with "osprey"
    assert contents(recall(eng, "osprey", exclude_contents=(long[:40],))) == []
    inner = "north pylon recorded two chicks hatching"  # neither a prefix nor prefixed: nothing left out
    assert set(contents(recall(eng, "osprey", exclude_contents=(inner,)))) == {"osprey", long}


def test_source_id_prefix_filter(eng):
    eng.store("a", "egret seen at dawn", source={"type": "User", "id": "discord:42", "name": "Aki"})
    eng.store("a", "egret seen at dusk", source={"type": "User", "id": "slack:9"})
    eng.archive_episode("a", "egret session")
    assert contents(recall(eng, "egret seen", source_id="discord:")) == ["egret seen at dawn"]
    assert contents(recall(eng, "egret seen", source_id="disc_")) == []  # wildcards are literal
    assert contents(rwc(eng, "egret seen", [], source_id="slack")) == ["egret seen at dusk"]


def test_deep_halves_the_gate(eng):
    for i in range(30):
        eng.store("a", f"filler row {i} about tides and moon phases")
    eng.store("a", "lighthouse keeper rota for october and the tides")
    normal, deep = {}, {}
    recall(eng, "lighthouse keeper rota", trace=normal)
    recall(eng, "lighthouse keeper rota", trace=deep, deep=True)
    assert deep["min_score"] == pytest.approx(normal["min_score"] * 0.5)
