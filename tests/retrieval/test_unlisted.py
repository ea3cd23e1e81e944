"""Keyword evidence for vector hits the keyword channel cut off (retrieval/unlisted.py): a
row either index listed keeps its exact score, a row no index listed scores at most the last
row of a list that was cut, times its coverage factor, and nothing when it holds no query word."""

from __future__ import annotations

import pytest
from cpersona.retrieval import lexical, retrievers, unlisted
from cpersona.retrieval.candidate import Candidate
from cpersona.storage.scope import Scope


def _wq() -> lexical.WordQuery:
    return lexical.WordQuery(("sister", "gift"), {"sister": 3.0, "gift": 1.0})


def test_the_ceiling_is_the_last_row_of_a_cut_list_relative_to_its_best():
    found = [Candidate("mem", 1, "a", bm25=-8.0, word_bm25=-10.0), Candidate("mem", 2, "b", bm25=-4.0)]
    assert unlisted.ceiling(found, [(-4.0, "bm25")]) == pytest.approx(0.5)
    assert unlisted.ceiling(found, [(-4.0, "bm25"), (-7.0, "word_bm25")]) == pytest.approx(0.7)
    assert unlisted.ceiling(found, []) == 0.0  # no list was cut: an unlisted row matched nothing


def test_fill_scores_only_the_vector_hits_the_channel_did_not_return():
    listed = Candidate("mem", 1, "gift for my sister", lexical=0.9)
    dropped = Candidate("mem", 2, "a gift", cosine=0.5)
    unseen = Candidate("mem", 3, "my sister called", cosine=0.6)
    wordless = Candidate("mem", 4, "nothing in common", cosine=0.7)
    vector_copy = Candidate("mem", 1, "gift for my sister", cosine=0.4)
    known = unlisted.Unlisted({2: 0.3}, ceiling=0.6)
    assert unlisted.fill([vector_copy, dropped, unseen, wordless], [listed], known, _wq()) == 2
    assert vector_copy.lexical is None  # fusion copies the keyword row's own score in
    assert dropped.lexical == 0.3
    assert unseen.coverage == pytest.approx(0.75)
    assert unseen.lexical == pytest.approx(0.6 * (1 - lexical.COVERAGE_SHARE + lexical.COVERAGE_SHARE * 0.75))
    assert wordless.lexical is None and wordless.coverage == 0.0


def test_nothing_is_lent_without_a_cut_list():
    row = Candidate("mem", 3, "my sister called", cosine=0.6)
    assert unlisted.fill([row], [], unlisted.NONE, _wq()) == 0
    assert row.lexical is None


def test_the_keyword_channel_reports_its_cut(engine_none):
    for text in ("gift for my sister", "a gift for the sister of a friend", "gift card", "sister gift gift",
                 "the weather today"):
        assert engine_none.store("a", text)["result"] == "stored"
    with engine_none.db.read() as session:
        query = retrievers.Query("gift for my sister", Scope("a", None, None), 2)
        rows, known = retrievers.keyword(session, query)
        full, everything = retrievers.keyword(session, retrievers.Query(query.text, query.scope, 10))
    assert len(rows) == 2 and 0.0 < known.ceiling <= 1.0
    assert not set(known.dropped) & {c.id for c in rows}  # a returned row carries its own score
    assert len(full) == 4 and everything == unlisted.NONE
