"""Recall that knows when it has nothing: the answer bar of the quality gate
(retrieval/gate.py `answer_bar`, word coverage in retrieval/lexical.py) and the recency
prior (retrieval/recency.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cpersona.retrieval import recency
from cpersona.retrieval.gate import answer_bar
from cpersona.service.requests import RecallRequest

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
    assert answer_bar(0.3, 1.0, vectors=False)[1] == pytest.approx(0.2)


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


def test_only_the_rows_a_recall_would_return_can_make_it_answer():
    from cpersona.retrieval.candidate import MEMORY, Candidate
    from cpersona.retrieval.gate import Gate

    weak = [Candidate(MEMORY, i, f"row {i}", cosine=0.1, coverage=0.1, cc=0.5 - i / 100) for i in range(3)]
    deep = Candidate(MEMORY, 9, "deeper row", cosine=0.1, coverage=0.9, cc=0.1)
    gate = Gate(600, 0.2, 60, False, (), answer=(0.3, 0.5))
    assert gate.apply([*weak, deep], limit=3) == []  # the answering row is beyond the limit
    assert gate.apply([*weak, deep], limit=4)  # within it: the recall answers


def _answers(rows, **kw):
    from cpersona.retrieval.gate import Gate

    return Gate(600, 0.2, 60, False, (), answer=(0.3, 0.5), **kw).answers(rows)


def test_a_row_answers_on_joint_evidence_and_a_cosine_alone_needs_more():
    from cpersona.retrieval.candidate import MEMORY, Candidate

    def row(cos, cov):
        return [Candidate(MEMORY, 1, "r", cosine=cos, coverage=cov, cc=0.5)]

    assert _answers(row(0.27, 0.30))  # 0.9 + 0.6 of the bars = 1.5: both halves agree
    assert not _answers(row(0.27, 0.25))  # 0.9 + 0.5: too little of either
    assert not _answers(row(0.33, 0.0))  # a cosine alone must reach 1.2 × the bar
    assert _answers(row(0.36, 0.0))
    assert _answers(row(0.0, 0.5))  # half of the query's word information alone
    # above the chance maximum of its window, the row's words count toward the cosine's bar
    assert _answers(row(0.33, 0.05), chance_max=0.32) and not _answers(row(0.33, 0.05), chance_max=0.34)


def test_the_cosine_bar_rises_with_a_large_scan_window():
    small = answer_bar(0.3, 1.0, background=(400, 0.07))[0]
    large = answer_bar(0.3, 1.0, background=(10_000, 0.07))[0]
    assert small == pytest.approx(0.3)
    assert large == pytest.approx(0.3 + 0.07 * (math.sqrt(2 * math.log(10_000)) - math.sqrt(2 * math.log(500))))


@pytest.mark.parametrize("query, needles", [
    ("is CVE-2024-3094 fixed?", ["cve-2024-3094"]), ("what does ERR_TIMEOUT_1750 mean", ["err_timeout_1750"]),
    ("logs of 2024-01-07 please", ["2024-01-07"]), ("we run python 3.11", ["3.11"]), ("call getUserName now", ["getusername"]),
    ("what happened in 2023?", []), ("who drew a self-portrait?", []), ("the 10,000 rows", []),
])
def test_identifiers_are_needles_but_years_and_hyphenated_words_are_not(query, needles):
    from cpersona.retrieval.gate import exact_needles

    assert exact_needles(query)[1:] == needles


def test_a_threshold_of_zero_or_below_lets_any_cosine_answer():
    from cpersona.retrieval.candidate import MEMORY, Candidate
    from cpersona.retrieval.gate import Gate

    row = [Candidate(MEMORY, 1, "r", cosine=0.01, coverage=0.0, cc=0.5)]
    assert Gate(600, 0.2, 60, False, (), answer=answer_bar(0.0, 1.0)).answers(row)
    assert Gate(600, 0.2, 60, False, (), answer=answer_bar(-0.2, 1.0)).answers(row)


def test_the_answer_bar_judges_a_row_before_the_episode_boundary_penalty():
    """An older row whose cosine the penalty halved still says the recall has an answer (a new
    user's answer went missing when a fifth episode was archived); its rank stays penalised."""
    from cpersona.retrieval.candidate import MEMORY, Candidate
    from cpersona.retrieval.gate import Gate

    row = Candidate(MEMORY, 1, "Hoshiプロジェクトのリードは田中さん", cosine=0.2, coverage=0.0, penalty=0.5)
    assert Gate(600, 0.2, 60, False, (), answer=(0.3, 0.5)).answers([row])
    young = Candidate(MEMORY, 2, "x", cosine=0.2, coverage=0.0)
    assert not Gate(600, 0.2, 60, False, (), answer=(0.3, 0.5)).answers([young])
