"""Recall that knows when it has nothing: the answer bar of the quality gate
(retrieval/gate.py `answer_bar`, word coverage in retrieval/lexical.py) and the recency
prior (retrieval/recency.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cpersona.retrieval import recency
from cpersona.retrieval.gate import answer_bar
from cpersona.retrieval.pipeline import RecallRequest

TINY = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "tiny_corpus.json").read_text("utf-8"))


def fill(engine) -> None:
    for text in TINY["memories"]:
        assert engine.store("team", text)["result"] == "stored"


def contents(engine, query: str, **kw) -> list[str]:
    return [m["content"] for m in engine.recall(RecallRequest("team", query, **kw))["messages"]]


def test_question_about_something_not_stored_gets_no_row(engine_http):
    fill(engine_http)
    assert contents(engine_http, "Do we use Kubernetes?") == []
    assert contents(engine_http, "Which Kafka topics does the order service publish?") == []


def test_answerable_questions_still_answer(engine_http):
    fill(engine_http)
    assert contents(engine_http, "Which CI system do we use?")[-1] == TINY["memories"][6]
    assert contents(engine_http, "Who owns billing?")[-1] == TINY["memories"][4]


def test_exact_identifier_is_returned_even_when_nothing_else_matches(engine_http):
    fill(engine_http)
    assert TINY["memories"][7] in contents(engine_http, "ERR_PAYMENT_4021 kubernetes terraform")


def test_deep_recall_does_not_abstain(engine_http):
    fill(engine_http)
    assert contents(engine_http, "Do we use Kubernetes?", deep=True)


def test_precision_moves_the_answer_bar():
    strict, balanced, lenient = (answer_bar(0.3, b) for b in (2.0, 1.0, 0.5))
    assert strict[0] > balanced[0] > lenient[0] and strict[1] > balanced[1] > lenient[1]
    assert balanced == (pytest.approx(0.3), 0.5)
    assert answer_bar(0.3, 1.0, vectors=False)[1] == 0.25


def test_strict_returns_less_than_lenient_on_unanswerable_questions(http_engine_factory):
    rows = {}
    for precision in ("strict", "lenient"):
        eng = http_engine_factory(f"{precision}.db", recall_precision=precision)
        fill(eng)
        rows[precision] = sum(len(contents(eng, q)) for q in TINY["unanswerable"])
    assert rows["strict"] < rows["lenient"]


@pytest.mark.parametrize("query, sign", [
    ("what did we do in the last session", 1), ("the latest deploy plan", 1), ("前回の会議で何を決めた", 1),
    ("When did I first meet Bob?", -1), ("which came first, the mixer or the kettle?", 0),
    ("what did I buy last Saturday", 0), ("who owns billing", 0),
])
def test_time_questions_are_recognised(query, sign):
    assert recency.direction(query) == sign


def test_latest_question_ranks_the_newest_of_equal_rows_first(engine_none):
    for day in ("2024-01-05", "2024-03-09", "2024-06-20"):
        engine_none.store("team", f"deploy plan review notes ({day[:7]})", timestamp=f"{day}T10:00:00Z")
    best = engine_none.recall(RecallRequest("team", "latest deploy plan review"))["messages"][-1]
    assert best["content"] == "deploy plan review notes (2024-06)"
    first = engine_none.recall(RecallRequest("team", "earliest deploy plan review"))["messages"][-1]
    assert first["content"] == "deploy plan review notes (2024-01)"
