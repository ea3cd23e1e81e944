"""The keyword score rests half on the row's word coverage (retrieval/lexical.py): a short
row holding only a common word of the query (a speaker's name) no longer outranks the row
that holds its content words, and a row holding the query's identifier verbatim keeps its
credit although the word index splits the identifier."""

from __future__ import annotations

import pytest
from cpersona.retrieval import lexical
from cpersona.retrieval.candidate import Candidate
from cpersona.util.words import query_terms


def test_the_row_with_the_content_words_outranks_a_short_row_with_only_the_name(monkeypatch):
    """LoCoMo: "When did Jolene lose a lot of progress in her work?" — bm25's length
    normalisation put "Jolene: It brings us closer together!" (the name, and `her` inside
    `together` for the trigram index) above the rows about her work."""
    name, progress, work = query_terms("Jolene progress work")
    wq = lexical.WordQuery((name, progress, work), {name: 2.8, progress: 4.9, work: 3.0})
    short = Candidate("mem", 1, "Jolene: It brings us closer together!", bm25=-6.0, word_bm25=-5.0)
    answer = Candidate("mem", 2, "Jolene: my project had a setback, weeks of progress and work gone",
                       bm25=-5.5, word_bm25=-4.6)
    assert [c.id for c in lexical.score([short, answer], wq)] == [2, 1]
    assert answer.coverage == 1.0 and short.coverage == pytest.approx(2.8 / 10.7)
    monkeypatch.setattr(lexical, "COVERAGE_SHARE", 0.0)  # bm25 alone: the short row wins
    assert [c.id for c in lexical.score([short, answer], wq)] == [1, 2]


def test_identifiers_are_credited_verbatim():
    wq = lexical.WordQuery(("e44671", "fix"), {"e44671": 1.0, "fix": 1.0}, identifiers=("e44671", "follow-up"))
    assert wq.credited("E44671: the fix and the follow-up", 0.3) == 1.0
    assert wq.credited("E44671 was fixed", 0.3) == 0.5
    assert wq.credited("nothing of it", 0.3) == 0.3
    assert lexical.WordQuery(("fix",), {"fix": 1.0}).credited("E44671", 0.2) == 0.2


def test_word_query_finds_identifiers_also_inside_cjk_text(make_engine):
    engine = make_engine(embedding_mode="none")
    assert engine.store("a", "aurora-eu-cli の設定ファイル")["result"] == "stored"
    with engine.db.read() as session:
        wq = lexical.word_query(session, "aurora-eu-cliの設定ファイルの場所とrrf_kの値は？ plain words")
        plain = lexical.word_query(session, "When did Caroline go to the group?")
    assert wq.identifiers == ("aurora-eu-cli", "rrf_k")
    assert plain.identifiers == ()
