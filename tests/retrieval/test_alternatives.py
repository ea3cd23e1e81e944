"""Questions naming alternatives (retrieval/alternatives.py): the clause `A or B` after a
comma or dash splits the question once per alternative; the lists merge on each row's best
score relative to its list's best; rows only an alternative found are judged on the whole
question's words."""

from __future__ import annotations

import pytest
from cpersona.retrieval import alternatives, lexical
from cpersona.retrieval.candidate import Candidate
from cpersona.service.requests import RecallRequest


@pytest.mark.parametrize(("query", "subs"), [
    ("Which event happened first, the meeting with Rachel or the pride parade?",
     ["Which event happened first, the meeting with Rachel", "Which event happened first, the pride parade?"]),
    ("Which pet did Jolene adopt first - Susie or Seraphim?",
     ["Which pet did Jolene adopt first - Susie", "Which pet did Jolene adopt first - Seraphim?"]),
    ("Who did I meet first, Mark and Sarah or Tom or Anna?",
     ["Who did I meet first, Mark and Sarah", "Who did I meet first, Tom", "Who did I meet first, Anna?"]),
])
def test_an_alternatives_clause_splits_the_question(query, subs):
    assert alternatives.split(query) == subs


@pytest.mark.parametrize("query", [
    "How many items of clothing do I need to pick up or return from a store?",  # verbs sharing an object
    "Would Tim enjoy reading books by C. S. Lewis or John Greene?",  # no clause boundary before it
    "Was it a good month for Nate? Answer yes or no.",
    "Which came first, the bus OR the train?",  # OR is the keyword operator (lexical.WordQuery.groups)
    "Which came first, or not?",  # one alternative
    "Which came first, " + " or ".join(f"thing {i}" for i in range(5)) + "?",  # more than MAX_ALTERNATIVES
    "",
])
def test_other_questions_do_not_split(query):
    assert alternatives.split(query) == []


def _row(i: int, cc: float | None, content: str = "x") -> Candidate:
    return Candidate("mem", i, content, cc=cc, coverage=0.9)


def test_merge_ranks_rows_by_their_best_share_of_their_lists_best():
    whole = [_row(1, 1.0), _row(2, 0.9), _row(3, 0.5)]
    first = [_row(1, 2.0), _row(4, 1.0)]
    second = [_row(5, 0.4), _row(3, 0.36)]  # row 3: 0.9 of this list's best, 0.5 of the whole's
    merged = alternatives.merge([whole, first, second], None)
    assert [c.id for c in merged] == [1, 5, 2, 3, 4]  # ties keep the order rows were first met
    assert merged[0] is whole[0] and merged[3] is whole[2]  # the whole question's object (its evidence) is kept


def test_a_row_only_an_alternative_found_is_judged_on_the_whole_question():
    words = lexical.WordQuery(("necklac", "sister", "album", "mom"), {"necklac": 1.0, "sister": 1.0, "album": 1.0,
                                                                       "mom": 1.0})
    found = _row(7, 0.8, "a photo album for my mom")
    merged = alternatives.merge([[_row(1, 1.0, "gift")], [found]], words)
    assert found.coverage == pytest.approx(0.5)  # not the alternative's 0.9
    assert [c.id for c in merged] == [1, 7]


def test_unscored_rows_follow_the_scored_ones():
    merged = alternatives.merge([[_row(1, None), _row(2, 0.5)], [_row(3, 0.2)]], None)
    assert [c.id for c in merged] == [2, 3, 1]


_GIFTS = [
    "Which gift did I buy first? I bought a photo album for my mom as a gift.",
    "Gift for my mom: I did buy the photo album, the first gift this year.",
    "Did I buy the photo album gift for my mom first? Yes, the photo album.",
    "My mom loved the photo album gift I did buy for her first birthday party.",
    "I got a necklace for my sister last weekend.",
    "The weather was nice at the lake.",
    "My sister called about the lake today.", "My sister called about the car today.",
    "The gold necklace in the shop window was shiny.", "The silver necklace in the shop window was shiny.",
]
_ASKED = "Which gift did I buy first, the photo album for my mom or the necklace for my sister?"


@pytest.mark.parametrize("split", [True, False])
def test_the_row_about_the_other_alternative_reaches_the_answer(make_engine, split):
    """Keyword only: four rows about the photo album hold more of the question's words than the
    one about the necklace; asked per alternative, the necklace row leads its own list."""
    engine = make_engine(embedding_mode="none", split_alternatives=split)
    for text in _GIFTS:
        assert engine.store("a", text)["result"] == "stored"
    trace: dict = {}
    got = [m["content"] for m in engine.recall(RecallRequest("a", _ASKED, 3), trace=trace)["messages"]]
    assert (_GIFTS[4] in got) is split
    assert trace.get("alternatives") == (2 if split else None)
