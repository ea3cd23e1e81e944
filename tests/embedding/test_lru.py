"""The bounded LRU map (util/lru.py) behind the query-vector cache."""

from __future__ import annotations

from cpersona.util.lru import LRU


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

