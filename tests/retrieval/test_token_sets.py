"""The bounded LRU map (util/lru.py) and the rows' cached word-token sets (retrieval/lexical.py)."""

from __future__ import annotations

from cpersona.retrieval import lexical
from cpersona.util.lru import LRU
from cpersona.util.words import word_token_set


def test_lru_keeps_the_most_recently_used():
    sets: LRU[str, frozenset[str]] = LRU(2)
    sets.put("a", frozenset({"a"}))
    sets.put("b", frozenset({"b"}))
    assert sets.get("a") == frozenset({"a"})  # a is now the most recent
    sets.put("c", frozenset({"c"}))
    assert sets.missing(["a", "b", "c"]) == ["b"] and len(sets) == 2
    sets.pop("a")
    assert sets.get("a") is None and len(sets) == 1
    nothing: LRU[str, int] = LRU(0)
    nothing.put("x", 1)
    assert nothing.get("x") is None  # size 0 keeps nothing


def test_a_token_set_is_the_texts_tokens_whether_cached_or_not():
    lexical.token_set.cache_clear()
    text = "2023年10月11日にsession-cache v1.11.20を本番リリース ERR_DISK_9755"
    assert lexical.token_set(text) == word_token_set(text)  # tokenised on a miss
    assert lexical.token_set(text) == word_token_set(text)  # the cached set
    assert lexical.token_set.cache_info().hits == 1
