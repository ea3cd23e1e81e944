"""The default fusion, `cc`: α·max(cosine, 0) + (1 − α)·lexical, lexical = bm25 relative to
the query's best keyword hit (Bruch et al., TOIS 2023). Checked on the fusion function
directly and through the engine."""

from __future__ import annotations

import pytest

from cpersona.core.retrieval import fusion
from cpersona.core.retrieval.candidate import EPISODE, MEMORY, Candidate
from cpersona.core.retrieval.pipeline import RecallRequest


def cand(kind, i, cosine=None, bm25=None):
    return Candidate(kind, i, f"{kind}{i}", cosine=cosine, bm25=bm25)


def test_cc_formula_and_per_channel_lexical_normalisation():
    vector = [cand(MEMORY, 1, cosine=0.9), cand(MEMORY, 2, cosine=0.5)]
    keyword = [cand(MEMORY, 2, bm25=-4.0), cand(MEMORY, 3, bm25=-2.0)]
    episodes = [cand(EPISODE, 1, bm25=-1.0)]
    ranked = fusion.cc({"vector": vector, "episodes": episodes, "keyword": keyword}, alpha=0.2)
    scores = {c.key: c.cc for c in ranked}
    assert scores[(MEMORY, 2)] == pytest.approx(0.2 * 0.5 + 0.8 * 1.0)  # both channels
    assert scores[(MEMORY, 3)] == pytest.approx(0.8 * 0.5)  # keyword only, half the best bm25
    assert scores[(EPISODE, 1)] == pytest.approx(0.8 * 1.0)  # best of its own channel
    assert scores[(MEMORY, 1)] == pytest.approx(0.2 * 0.9)  # vector only
    assert [c.key for c in ranked] == [(MEMORY, 2), (EPISODE, 1), (MEMORY, 3), (MEMORY, 1)]


def test_cc_equal_scores_keep_memories_before_episodes():
    ranked = fusion.cc({"episodes": [cand(EPISODE, 1, bm25=-3.0)], "keyword": [cand(MEMORY, 1, bm25=-5.0)]}, alpha=0.2)
    assert [c.key for c in ranked] == [(MEMORY, 1), (EPISODE, 1)]


def test_cc_negative_cosine_contributes_nothing_and_like_rows_count_fully():
    ranked = fusion.cc({"vector": [cand(MEMORY, 1, cosine=-0.4)], "keyword": [cand(MEMORY, 2)]}, alpha=0.5)
    scores = {c.key: c.cc for c in ranked}
    assert scores[(MEMORY, 1)] == 0.0
    assert scores[(MEMORY, 2)] == pytest.approx(0.5)  # LIKE hit: lexical 1.0


def test_default_mode_is_cc_and_reports_its_signal(engine_none):
    engine_none.store("a", "cc-check-7 the deploy of billing failed")
    engine_none.store("a", "cc-check-7 minor note")
    msgs = engine_none.recall(RecallRequest("a", "cc-check-7 billing deploy"))["messages"]
    assert [m["content"] for m in msgs][-1] == "cc-check-7 the deploy of billing failed"
    best = msgs[-1]["match_reason"]
    assert best["signal"] == "cc" and best["lexical"] == pytest.approx(1.0)
    assert best["score"] == pytest.approx(0.95)  # (1 − α) · 1.0 with the default α = 0.05


def test_cc_vector_only_row_is_gated_on_its_cosine(http_engine_factory):
    eng = http_engine_factory()
    eng.store("a", "she runs a marathon every spring")
    for i in range(60):
        eng.store("a", f"filler note number {i} about gardening and compost")
    msgs = eng.recall(RecallRequest("a", "running marathons"))["messages"]
    got = {m["content"]: m["match_reason"] for m in msgs}
    assert "she runs a marathon every spring" in got  # no keyword hit; cosine clears the gate
    assert got["she runs a marathon every spring"]["retrievers"] == ["vector"]
    assert not any(c.startswith("filler") for c in got)  # low cosine, no keyword: gated out
