"""list_memories / list_episodes: answers that fit a host's tool-output cap, a cursor to
continue, and limits clamped as the original CPersona clamps them."""

from __future__ import annotations

import json

import pytest
from cpersona.errors import InvalidArgument
from cpersona.service.listing import BYTES_PER_TOKEN

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


def answer_bytes(out: dict) -> int:
    return len(json.dumps(out, ensure_ascii=False).encode("utf-8"))


def test_a_long_listing_comes_in_pages_that_fit_the_budget(make_engine):
    eng = make_engine()
    for i in range(40):
        eng.store("a", f"{i:03d} " + "x" * 15990)
    budget = eng.settings.list_budget_tokens * BYTES_PER_TOKEN
    seen: list[int] = []
    cursor = ""
    pages = 0
    while True:
        out = eng.list_memories("a", limit=40, cursor=cursor)
        pages += 1
        assert answer_bytes(out) <= budget
        assert all("content_truncated" not in m for m in out["memories"])  # whole rows, never silently cut
        seen += [m["id"] for m in out["memories"]]
        if "next_cursor" not in out:
            break
        assert out["budget_tokens"] == eng.settings.list_budget_tokens and "cursor" in out["note"]
        cursor = out["next_cursor"]
    assert seen == list(range(40, 0, -1))  # every row once, newest first
    assert pages > 1


def test_japanese_rows_are_budgeted_by_their_bytes(make_engine):
    eng = make_engine(list_budget_tokens=2000)
    for i in range(20):
        eng.store("a", f"{i}番目の記録：" + "梅雨前線" * 100)
    out = eng.list_memories("a")
    assert answer_bytes(out) <= 2000 * BYTES_PER_TOKEN and out["count"] < 20 and "next_cursor" in out


def test_a_row_larger_than_the_whole_budget_comes_as_a_preview(make_engine):
    eng = make_engine(list_budget_tokens=500)
    big = eng.store("a", "y" * 5000)["id"]
    eng.store("a", "small, stored later")
    out = eng.list_memories("a", limit=1)
    assert out["count"] == 1 and out["memories"][0]["content"] == "small, stored later"
    out = eng.list_memories("a", limit=5, cursor=out["next_cursor"])
    first = out["memories"][0]
    assert first["id"] == big and first["content_truncated"] is True and first["content_len"] == 5000
    assert first["ref"] == f"mem:{big}" and len(first["content"]) == eng.settings.recall_preview_chars
    assert eng.get_contents("a", [first["ref"]])["items"][0]["content"] == "y" * 5000


def test_limits_are_clamped_and_a_capped_listing_says_so(make_engine):
    eng = make_engine(list_budget_tokens=100_000)
    for i in range(503):
        eng.store("a", f"row {i}")
    out = eng.list_memories("a", limit=10_000)
    assert out["count"] == 500 and out["budget_rows"] == 500 and "next_cursor" in out
    rest = eng.list_memories("a", limit=10_000, cursor=out["next_cursor"])
    assert rest["count"] == 3 and "next_cursor" not in rest and "budget_rows" not in rest
    assert eng.list_memories("a", limit=0) == {"memories": [], "count": 0}
    assert eng.list_memories("a", limit=-1) == {"memories": [], "count": 0}
    assert "budget_rows" not in eng.list_memories("a", limit=500)


def test_episodes_page_the_same_way(make_engine):
    eng = make_engine()
    for i in range(5):
        eng.archive_episode("a", f"session {i} summary")
    first = eng.list_episodes("a", limit=2)
    assert [e["summary"] for e in first["episodes"]] == ["session 4 summary", "session 3 summary"]
    second = eng.list_episodes("a", limit=2, cursor=first["next_cursor"])
    assert [e["summary"] for e in second["episodes"]] == ["session 2 summary", "session 1 summary"]


@pytest.mark.parametrize("cursor", ["nonsense", "2026-01-01|x", "|5", 5, "z" * 200])
def test_a_malformed_cursor_is_refused_naming_it(make_engine, cursor):
    eng = make_engine()
    with pytest.raises(InvalidArgument, match="cursor"):
        eng.list_memories("a", cursor=cursor)
