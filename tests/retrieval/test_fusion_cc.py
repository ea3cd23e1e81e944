"""The default fusion, `cc`: α·max(cosine, 0) + (1 − α)·lexical, lexical = bm25 relative to
the query's best keyword hit (Bruch et al., TOIS 2023). Checked on the fusion function
directly and through the engine."""

from __future__ import annotations

import numpy as np
import pytest
from cpersona.devtools.fake_embed import fake_vector
from cpersona.index.vector_index import VectorIndex
from cpersona.retrieval import fusion
from cpersona.retrieval.candidate import EPISODE, MEMORY, Candidate
from cpersona.service.requests import RecallRequest

from quality_helpers import HashEmbedder, make


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
    assert best["score"] == pytest.approx(0.8)  # (1 − α) · 1.0 with the default α = 0.2


def test_cc_vector_only_row_is_gated_on_its_cosine(http_engine_factory):
    eng = http_engine_factory()
    eng.store("a", "she runs a marathon every spring")
    for i in range(60):
        eng.store("a", f"filler note number {i} about gardening and compost")
    msgs = eng.recall(RecallRequest("a", "running marathons"))["messages"]
    got = {m["content"]: m["match_reason"] for m in msgs}
    assert "she runs a marathon every spring" in got  # no keyword hit; cosine clears the gate
    assert "vector" in got["she runs a marathon every spring"]["retrievers"]
    assert not any(c.startswith("filler") for c in got)  # low cosine, no keyword: gated out


# ------------------------------------------- cosine for every candidate, rerank depth
class TableEmbedder(HashEmbedder):
    """Hashing backend with chosen vectors for chosen texts (the semantic ground truth)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        super().__init__("table-512")
        self.table = table

    def embed(self, texts):
        return np.stack([self.table.get(t, fake_vector(t, self.dim)) for t in texts])


def axis(i: int) -> np.ndarray:
    vec = np.zeros(512, np.float32)
    vec[i] = 1.0
    return vec


@pytest.mark.parametrize("semantic", ["kiwi harvest report alpha", "kiwi harvest report gamma"])
def test_cc_reranks_keyword_hits_below_limit_by_their_cosine(tmp_path, semantic):
    """Two rows tie on bm25; neither is in the vector channel (scan window 1 holds only the
    newest, unrelated row). With limit 1 the keyword channel is read 2 deep and each row
    gets its cosine from the resident index, so the row whose vector matches the query wins
    — whichever of the two it is."""
    rows = ["kiwi harvest report alpha", "kiwi harvest report gamma"]
    other = next(r for r in rows if r != semantic)
    table = {"kiwi harvest report": axis(1), semantic: axis(1), other: axis(2), "tea on the porch": axis(3)}
    eng = make(tmp_path / "t.db", embedder=TableEmbedder(table), max_memories=1)
    try:
        for text in [*rows, "tea on the porch"]:
            assert eng.store("a", text)["embedded"] is True
        trace: dict = {}
        msgs = eng.recall(RecallRequest("a", "kiwi harvest report", limit=1), trace)["messages"]
        assert trace["channels"]["keyword"] == 2
        assert [m["content"] for m in msgs] == [semantic]
        reason = msgs[0]["match_reason"]
        assert reason["retrievers"] == ["keyword"] and reason["cosine"] == pytest.approx(1.0)
        assert reason["cc"] == pytest.approx(0.2 * 1.0 + 0.8 * reason["lexical"])
    finally:
        eng.close()


def test_keyword_depth_is_limit_outside_cc(make_engine):
    """cc reads the keyword channel 2 × deeper; every mode reads at least the judged depth (10)."""
    for mode, depths in (("cc", {3: 20, 12: 24}), ("rrf", {3: 10, 12: 12}), ("rsf", {3: 10, 12: 12})):
        eng = make_engine(f"{mode}.db", recall_mode=mode)
        for i in range(30):
            eng.store("a", f"kiwi note {i}")
        for limit, depth in depths.items():
            trace: dict = {}
            eng.recall(RecallRequest("a", "kiwi note", limit=limit), trace)
            assert trace["channels"]["keyword"] == depth, (mode, limit)


def test_vector_index_cosines_cover_only_rows_it_holds():
    index = VectorIndex(4)
    index.add(1, "a", "", "", "2026-01-01", np.array([1, 0, 0, 0], np.float32))
    index.add(2, "b", "", "", "2026-01-02", np.array([0, 1, 0, 0], np.float32))
    query = np.array([0.6, 0.8, 0, 0], np.float32)
    assert index.cosines(query, [1, 2, 3]) == {1: pytest.approx(0.6), 2: pytest.approx(0.8)}
    assert index.cosines(np.ones(3, np.float32), [1]) == {}  # another dimension: nothing
    index.remove(1)
    assert index.cosines(query, [1, 2]) == {2: pytest.approx(0.8)}


def test_vector_evidence_is_the_excess_over_the_background_in_chance_maxima():
    import math

    from cpersona.index.vector_index import WindowStats

    background = WindowStats()
    background.add(np.array([0.1, 0.3] * 50, np.float32))  # mean 0.2, std 0.1, n 100
    unit = 0.1 * math.sqrt(2 * math.log(100))
    evidence = fusion.vector_evidence(background)
    assert evidence(0.2 + unit) == pytest.approx(1.0, abs=1e-5)
    assert evidence(0.1) == 0.0  # below the background: no evidence
    assert evidence(0.99) == fusion.EVIDENCE_CAP
    assert fusion.vector_evidence(None)(0.4) == 0.4 and fusion.vector_evidence(WindowStats())(-0.2) == 0.0
