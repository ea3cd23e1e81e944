"""retrieval/sessions.py: a question about the last (or first) session answers with that
session's summary first, whatever words it shares with the question; a time window or a
question about something else is left to the ranking."""

from __future__ import annotations

import pytest
from cpersona.retrieval import sessions
from cpersona.service.requests import RecallRequest
from cpersona.util.time import parse_ts

from quality_helpers import make

SESSIONS = [  # summary, its turns' time (offsets differ: compared after parsing)
    ("What we did this session: planned the billing database migration and the invoice PDF layout",
     "2026-03-02T10:00:00+00:00"),
    ("Reviewed the IME editor bug for Japanese input and the font fallback", "2026-03-09T18:00:00+09:00"),
    ("Fixed the flaky payment retry test and moved the deploy windows", "2026-03-12T09:00:00+01:00"),
]


@pytest.mark.parametrize("query, sign", [
    ("What did we do last session?", 1), ("what did we talk about in our previous conversation", 1),
    ("前回のセッションでは何をした？", 1), ("前回は何を決めた？", 1), ("Summarise the latest session", 1),
    ("What was our first session about?", -1), ("最初のセッションの内容は？", -1),
    ("What did we do last week?", 0), ("What is the latest version of the API?", 0), ("Which session fixed it?", 0),
    ("Last time I checked, which Postgres version did we run?", 0), ("the first call to the billing API", 0),
    ("What was the latest call volume?", 0), ("Who gave the first talk at PyCon?", 0), ("初回ログインの手順は？", 0),
    ("前回の値はいくつ？", 0), ("compare our first session with the last session", 0),
    ("What did we discuss last time we talked?", 1), ("前回の会話の要点は？", 1),
    ("What did we work on last time?", 1), ("what were we discussing last time", 1),
    ("Remind me where we left off", 1), ("How much did we pay last time?", 0),
    ("What was the price last time?", 0), ("last time we deployed, what broke?", 0)])
def test_a_question_about_a_session_is_recognised(query, sign):
    assert sessions.direction(query) == sign


@pytest.fixture
def eng(tmp_path):
    engine = make(tmp_path / "s.db")
    for i in range(30):  # memories sharing the questions' words, so the summaries are not the only rows
        engine.store("a", f"we did code review number {i} last week and talked about what to do next")
    ids = [engine.archive_episode("a", text, history=[{"role": "user", "content": "x", "timestamp": ts}])["episode_id"]
           for text, ts in SESSIONS]
    yield engine, ids
    engine.close()


def best(engine, query: str, **kw) -> str:
    messages = engine.recall(RecallRequest("a", query, **kw))["messages"]
    assert messages, query
    return messages[-1]["ref"]  # the last row is the best


@pytest.mark.parametrize("query", ["What did we do last session?", "前回のセッションでは何をした？"])
def test_the_last_session_comes_first(eng, query):
    engine, ids = eng
    assert best(engine, query) == f"ep:{ids[2]}"  # 2026-03-12 08:00 UTC, the newest once parsed


def test_the_first_session_comes_first(eng):
    engine, ids = eng
    assert best(engine, "What was our first session about?") == f"ep:{ids[0]}"


def test_other_questions_and_filters_are_left_to_the_ranking(eng):
    engine, ids = eng
    assert best(engine, "billing database migration invoice") == f"ep:{ids[0]}"  # its own words, no pin
    out = engine.recall(RecallRequest("a", "What did we do last session?", source_id="nobody"))
    assert all(not m["ref"].startswith("ep:") for m in out["messages"])  # a source filter hides episodes


def test_an_episode_dated_years_ahead_is_not_the_last_session(eng):
    engine, ids = eng
    engine.archive_episode("a", "a summary from a wrong clock",
                           history=[{"role": "user", "content": "x", "timestamp": "2999-01-01T00:00:00+00:00"}])
    assert best(engine, "What did we do last session?") == f"ep:{ids[2]}"


def test_a_pinned_summary_scores_as_a_full_match_even_when_nothing_else_matched(eng):
    engine, ids = eng
    out = engine.recall(RecallRequest("a", "What did we do last session?"), preview_rows=True, verbose=False)
    best = out["messages"][-1]
    assert best["ref"] == f"ep:{ids[-1]}" and best["match_reason"]["score"] >= 1.0
    assert all(m["match_reason"]["score"] <= best["match_reason"]["score"] for m in out["messages"])


def test_an_episode_without_turn_times_answers_its_creation_time_in_iso_utc(engine_none):
    """Its creation time is stored in SQLite's naive form; answered as every other time is,
    so a client sorting an answer's rows by timestamp string orders them by time (found by a
    new user: `2026-12-02 05:55:17` beside `2026-12-02T05:55:15.86+00:00`)."""
    engine_none.store("a", "we set up the deploy pipeline")
    engine_none.archive_episode("a", "session about the deploy pipeline")
    engine_none.archive_episode("a", "session about lunch", history=[{"role": "user", "content": "x",
                                                                      "timestamp": "2026-01-02 03:04:05"}])
    rows = engine_none.recall(RecallRequest("a", "deploy pipeline session", 10))["messages"]
    times = {m["content"]: m.get("timestamp") for m in rows}
    created = times["[Episode] session about the deploy pipeline"]
    assert created and "T" in created and created.endswith("+00:00")
    assert parse_ts(created) is not None
    given = [t for c, t in times.items() if "lunch" in c]
    assert given in ([], ["2026-01-02 03:04:05"])  # a turn time is answered as it was given
