"""The stored texts' word-token sets held in memory (index/token_sets.py) and recall's use of
them (retrieval/lexical.py `holds_word`, `WordQuery.coverage`)."""

from __future__ import annotations

import sys
import threading

import pytest
from cpersona.index import token_sets
from cpersona.retrieval.lexical import WordQuery, holds_word
from cpersona.util.words import word_token_set, word_tokens
from hypothesis import given, settings
from hypothesis import strategies as st

from quality_helpers import contents, recall

TEXTS = [
    "2023年10月11日にsession-cache v1.11.20を本番リリース ERR_DISK_9755",
    "Caroline uses the deploy script; the user's deploy was used twice",
    "ｗｉｄｅ ＮＡＳ２ and zero\u200bwidth, 서울 广西 雨",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_held_set_answers_as_the_texts_tokens(text):
    tokens = word_token_set(text)
    assert all(holds_word(text, t) for t in tokens)
    # a part of a token, two tokens joined, a token with its neighbour's first letter: none is held
    for near in ({t[:-1] for t in tokens if len(t) > 1} | {a + b for a in tokens for b in tokens}) - tokens:
        assert not holds_word(text, near), near
    assert not holds_word(text, "")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.lists(st.text(max_size=8), max_size=6))
def test_holding_a_word_is_membership_in_the_tokens(text, terms):
    tokens = word_token_set(text)
    for term in [*terms, *word_tokens(text)]:
        assert holds_word(text, term) == (term in tokens)


def test_coverage_counts_the_idf_of_the_terms_a_row_holds():
    wq = WordQuery(("deploy", "kubernet"), {"deploy": 1.0, "kubernet": 3.0})
    assert wq.coverage("we deployed it") == pytest.approx(0.25)
    assert wq.coverage("Kubernetes deploys") == pytest.approx(1.0)
    assert wq.coverage("nothing here") == 0.0
    either = WordQuery(("广西", "桂林"), {"广西": 1.0, "桂林": 1.0}, groups=(("广西",), ("桂林",)))
    assert either.coverage("桂林的山水") == pytest.approx(1.0)  # an OR query: the best alternative


def test_fill_holds_the_newest_texts_within_the_budget_and_stops_when_asked(monkeypatch):
    pages = [[f"text number {i}-{j}" for j in range(3)] for i in range(4)]  # newest first
    sets = token_sets.TokenSets()
    assert token_sets.fill(iter(pages), sets=sets) == 12 and len(sets) == 12
    flat = [t for page in pages for t in page]
    small = token_sets.TokenSets(budget=sum(token_sets.cost(t, token_sets.pack(t)) for t in flat[:5]))
    assert token_sets.fill(iter(pages), sets=small) == 5 and small.used <= small.budget
    small.packed("text number 9-9")  # a miss of the same size: kept, the least recently used goes
    assert [t for t in flat if t in small._sets] == flat[:4]  # the oldest one filled went first
    stop, real = threading.Event(), token_sets.pack
    monkeypatch.setattr(token_sets, "pack", lambda text: (stop.set() if text == flat[4] else None) or real(text))
    assert token_sets.fill(iter(pages), stop, sets=(stopped := token_sets.TokenSets())) == 0 and len(stopped) == 0


def test_fill_gives_way_to_recalls(monkeypatch):
    """It yields the interpreter after every text and hands its texts over a few at a time:
    a recall beside it never waits for a whole page or the whole store."""
    yields, steps = [], []
    monkeypatch.setattr(token_sets, "yield_gil", lambda: yields.append(1))
    monkeypatch.setattr(token_sets, "KEEP_STEP", 2)
    sets = token_sets.TokenSets()
    real_keep = sets.keep
    monkeypatch.setattr(sets, "keep", lambda entries: steps.append(len(entries)) or real_keep(entries))
    texts = [f"note {i}" for i in range(5)]
    assert token_sets.fill(iter([texts]), sets=sets) == 5
    assert len(yields) >= 5 and steps == [2, 2, 1] and len(sets) == 5


def test_a_set_too_large_to_keep_is_tokenised_each_time_and_never_filled(monkeypatch):
    crowded = "".join(chr(0x4E00 + i * 7919 % 20_000) for i in range(60_000))  # its bigrams outweigh it
    assert sys.getsizeof(crowded) < token_sets.MAX_ENTRY_BYTES < token_sets.cost(crowded, token_sets.pack(crowded))
    huge = "word " * (token_sets.MAX_ENTRY_BYTES // 4)
    sets = token_sets.TokenSets()
    assert sets.packed(huge) == token_sets.pack(huge) and sets.packed(crowded) and len(sets) == 0
    assert token_sets.fill(iter([[huge, crowded, "short"]]), sets=sets) == 1 and len(sets) == 1
    tokenised = []
    monkeypatch.setattr(token_sets, "word_token_set", lambda text: tokenised.append(text) or frozenset({"x"}))
    token_sets.fill(iter([[huge, "other"]]), sets=sets)
    assert tokenised == ["other"]  # the huge text was skipped before tokenising


@pytest.mark.both_backends
def test_a_served_store_is_tokenised_at_start_and_stops_at_close(make_engine, monkeypatch):
    first = make_engine("a.db", embedding_mode="none")
    texts = [f"note {i}: the deploy of service-{i} moved to rack {i % 7}" for i in range(600)]
    for i, text in enumerate(texts):
        assert first.store(f"agent-{i % 3}", text)["result"] == "stored"
    first.close()
    token_sets.SETS.clear()
    monkeypatch.setattr(token_sets, "PAGE", 64)  # several pages, each its own read
    filled = threading.Event()
    real = token_sets.fill_from

    def fill_from(db, stop):
        try:
            return real(db, stop)
        finally:
            filled.set()

    monkeypatch.setattr(token_sets, "fill_from", fill_from)
    again = make_engine("a.db", embedding_mode="none")
    assert filled.wait(30)
    assert len(token_sets.SETS) == len(texts)
    packs = []
    monkeypatch.setattr(token_sets, "pack", lambda text: packs.append(text) or token_sets.SEP)
    assert contents(recall(again, "deploy of service-3", agent="agent-0", limit=3))
    assert packs == []  # recall tokenised no stored row again
    again.close()
    assert not again._token_fill.is_alive()

