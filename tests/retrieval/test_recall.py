"""The recall pipeline through `Engine.recall` (retrievers, fusion, gate, limit, reversal, the
episode boundary penalty) and our deviations from the original: exact matches always pass the
gate; LIKE stands in whenever MATCH is empty. Filters: test_recall_filters.py; the advisory,
backfill and the vector retriever: test_recall_vectors.py."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC

import pytest

from conftest import db_rows
from quality_helpers import contents, recall, store_all

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


# These tests check the spec's RRF arithmetic (rank 0 → 1/61, penalties on rrf, …), so they
# pin CPERSONA_RECALL_MODE=rrf; the default `cc` fusion has its own tests (test_fusion_cc.py).
@pytest.fixture
def engine_none(make_engine):
    return make_engine(embedding_mode="none", recall_mode="rrf")


@pytest.fixture
def engine_http(http_engine_factory):
    return http_engine_factory(recall_mode="rrf")




# ---------------------------------------------------------------- ordering
def test_last_element_is_the_best_match_http(engine_http):
    store_all(engine_http, [
        "ERR_TIMEOUT_1750: checkout gateway timed out",
        "checkout page redesign approved",
        "checkout failed because card expired",
        "payment retries failed with ERR_TIMEOUT_1751",
        "weekly team lunch on friday",
    ])
    res = recall(engine_http, "ERR_TIMEOUT_1750")
    msgs = res["messages"]
    assert len(msgs) >= 2
    assert msgs[-1]["content"] == "ERR_TIMEOUT_1750: checkout gateway timed out"
    rrf = [m["match_reason"]["rrf"] for m in msgs]
    assert rrf == sorted(rrf)  # worst → best
    assert "weekly team lunch on friday" not in contents(res)


def test_last_element_is_the_best_match_keyword_only(engine_none):
    store_all(engine_none, [
        "the nightly batch job logged CVE-2024-3094 once while the database was being vacuumed and reindexed",
        "CVE-2024-3094 CVE-2024-3094 xz backdoor",
        "we discussed CVE-2024-3094 during the long security review meeting on monday afternoon",
    ])
    msgs = recall(engine_none, "CVE-2024-3094")["messages"]
    assert len(msgs) == 3
    assert msgs[-1]["content"] == "CVE-2024-3094 CVE-2024-3094 xz backdoor"
    scores = [m["match_reason"]["rrf"] for m in msgs]
    assert scores == sorted(scores)
    assert scores[-1] == pytest.approx(1 / 61)


def test_limit_caps_the_response(engine_none):
    store_all(engine_none, [f"lim-42 note number {i}" for i in range(12)])
    assert len(recall(engine_none, "lim-42")["messages"]) == 10  # default limit
    assert len(recall(engine_none, "lim-42", limit=5)["messages"]) == 5
    assert len(recall(engine_none, "lim-42", limit=1)["messages"]) == 1
    assert len(recall(engine_none, "lim-42", limit=100)["messages"]) == 12


def test_limit_caps_the_fused_list_of_several_channels(engine_none):
    store_all(engine_none, [f"lim-43 memory {i}" for i in range(3)])
    for i in range(3):
        engine_none.archive_episode("a", f"lim-43 episode {i}")
    assert len(recall(engine_none, "lim-43", limit=6)["messages"]) == 6  # 3 keyword + 3 episode rows
    msgs = recall(engine_none, "lim-43", limit=3)["messages"]
    assert len(msgs) == 3
    full = recall(engine_none, "lim-43", limit=6)["messages"]
    rrf3 = sorted(m["match_reason"]["rrf"] for m in msgs)
    assert rrf3[-1] == pytest.approx(max(m["match_reason"]["rrf"] for m in full))  # the cut keeps the best


def test_message_fields(engine_none):
    engine_none.store(
        "a", "fieldcheck-1 the office moved to Osaka", msg_id="msg-77",
        source={"type": "User", "id": "discord:42", "name": "Kei"}, timestamp="2026-03-01T09:30:00Z",
    )
    (msg,) = recall(engine_none, "fieldcheck-1")["messages"]
    assert msg["content"] == "fieldcheck-1 the office moved to Osaka"
    assert msg["ref"] == "mem:1"
    assert msg["id"] == "msg-77"
    assert msg["source"] == {"type": "User", "id": "discord:42", "name": "Kei"}
    assert msg["timestamp"] == "2026-03-01T09:30:00Z"
    assert msg["match_reason"]["signal"] == "rrf"


def test_episode_rows_in_recall(engine_none):
    engine_none.archive_episode(
        "a", "episodecheck-5 we chose PostgreSQL", keywords="database choice",
        history=[{"timestamp": "2026-02-02T10:00:00Z"}, {"timestamp": "2026-02-01T08:00:00Z"}],
    )
    (msg,) = recall(engine_none, "episodecheck-5")["messages"]
    assert msg["content"] == "[Episode] episodecheck-5 we chose PostgreSQL"
    assert msg["ref"] == "ep:1"
    assert msg["source"] == {"System": "episode"}
    assert msg["timestamp"] == "2026-02-01T08:00:00Z"  # start_time = min history timestamp
    row = db_rows(engine_none.db.path, "SELECT start_time, end_time FROM episodes")[0]
    assert row == ("2026-02-01T08:00:00Z", "2026-02-02T10:00:00Z")


# --------------------------------------------------------- match_reason.signal
def test_signal_rrf_keyword_only(engine_none):
    store_all(engine_none, ["sig-01 alpha"])
    (msg,) = recall(engine_none, "sig-01")["messages"]
    assert msg["match_reason"]["signal"] == "rrf"
    assert msg["match_reason"]["score"] == msg["match_reason"]["rrf"] == pytest.approx(1 / 61)
    assert msg["match_reason"]["retrievers"] == ["keyword"]
    assert "cosine" not in msg["match_reason"] and "rsf" not in msg["match_reason"]


def test_signal_rrf_k_is_configurable(make_engine):
    eng = make_engine(rrf_k=10, recall_mode="rrf")
    store_all(eng, ["sig-02 beta"])
    (msg,) = recall(eng, "sig-02")["messages"]
    assert msg["match_reason"]["rrf"] == pytest.approx(1 / 11)


def test_signal_cosine_for_vector_rows_in_rrf_mode(engine_http):
    store_all(engine_http, ["sig-03 gamma ray burst"])
    (msg,) = recall(engine_http, "sig-03 gamma ray burst")["messages"]
    reason = msg["match_reason"]
    assert reason["signal"] == "cosine"
    assert reason["score"] == reason["cosine"] == pytest.approx(1.0, abs=1e-4)
    assert reason["rrf"] == pytest.approx(2 / 61)  # rank 0 in vector and keyword
    assert set(reason["retrievers"]) == {"vector", "keyword"}


def test_signal_rsf_mode(make_engine):
    eng = make_engine(recall_mode="rsf")
    store_all(eng, ["sig-04 delta", "sig-04 delta delta epsilon and a much longer tail of words to lower bm25"])
    msgs = recall(eng, "sig-04")["messages"]
    assert len(msgs) == 2
    assert {m["match_reason"]["signal"] for m in msgs} == {"rsf"}
    scores = [m["match_reason"]["rsf"] for m in msgs]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores)
    assert scores[-1] == pytest.approx(1.0)  # only the keyword channel answered: best row normalises to 1
    assert scores[0] == pytest.approx(0.0)
    assert all("rrf" not in m["match_reason"] for m in msgs)


def test_signal_rsf_mode_http_two_channels(http_engine_factory):
    eng = http_engine_factory(recall_mode="rsf")
    store_all(eng, ["sig-05 zeta"])
    (msg,) = recall(eng, "sig-05 zeta")["messages"]
    assert msg["match_reason"]["signal"] == "rsf"
    assert msg["match_reason"]["rsf"] == pytest.approx(1.0)  # top of both active channels
    assert "cosine" in msg["match_reason"]


def test_cascade_mode_keyword_rows_are_unscored(make_engine):
    eng = make_engine(recall_mode="cascade")
    store_all(eng, ["sig-06 eta"])
    (msg,) = recall(eng, "sig-06")["messages"]
    assert msg["content"] == "sig-06 eta"
    assert "match_reason" not in msg


def test_cascade_mode_vector_rows_carry_cosine(http_engine_factory):
    eng = http_engine_factory(recall_mode="cascade")
    store_all(eng, ["sig-07 theta"])
    (msg,) = recall(eng, "sig-07 theta")["messages"]
    assert msg["match_reason"]["signal"] == "cosine"
    assert "rrf" not in msg["match_reason"] and "rsf" not in msg["match_reason"]


# ------------------------------------------------------------- LIKE fallback
def test_like_fallback_when_fts_disabled(make_engine):
    eng = make_engine(fts_enabled=False)
    store_all(eng, ["Deploy window is 22:00 UTC on Fridays", "unrelated row"])
    trace = {}
    res = recall(eng, "WINDOW IS 22:00", trace=trace)  # LIKE is ASCII case-insensitive
    assert contents(res) == ["Deploy window is 22:00 UTC on Fridays"]
    assert trace["channels"]["keyword"] == 1
    assert trace["channels"]["episodes"] == 0


def test_like_fallback_for_query_without_trigram_term(engine_none):
    store_all(engine_none, ["梅雨は北海道と小笠原諸島を除く日本で見られる", "DB on port 5432 is healthy", "nothing here"])
    for query, expected in (("梅雨", "梅雨は北海道と小笠原諸島を除く日本で見られる"), ("DB", "DB on port 5432 is healthy")):
        trace = {}
        recall(engine_none, query, trace=trace)
        assert trace["channels"]["keyword"] == 1, query  # LIKE found the row
        res = recall(engine_none, query, deep=True)
        assert contents(res) == [expected]


def test_two_char_cjk_word_contained_in_row_is_returned(engine_none):
    store_all(engine_none, ["梅雨は北海道と小笠原諸島を除く日本で見られる", "北海道の冬は長い"])
    assert contents(recall(engine_none, "梅雨")) == ["梅雨は北海道と小笠原諸島を除く日本で見られる"]


def _drop_fts_posting(path, row_id):
    conn = sqlite3.connect(path)
    with conn:
        (content,) = conn.execute("SELECT content FROM memories WHERE id = ?", (row_id,)).fetchone()
        conn.execute("INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', ?, ?)", (row_id, content))
        conn.execute("DELETE FROM memories_words WHERE rowid = ?", (row_id,))
    conn.close()


@pytest.mark.sqlite_only("drops FTS5 postings of the file")
def test_like_fallback_when_match_finds_nothing(engine_none):
    (rid,) = store_all(engine_none, ["storage outage in eu-west"])
    store_all(engine_none, ["calendar invite for the retro"])
    _drop_fts_posting(engine_none.db.path, rid)  # MATCH can no longer see the row
    assert db_rows(engine_none.db.path, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"outage\"'") == []
    trace = {}
    res = recall(engine_none, "storage outage", trace=trace)
    assert contents(res) == ["storage outage in eu-west"]
    assert trace["channels"]["keyword"] == 1


@pytest.mark.sqlite_only("drops FTS5 postings of the file")
def test_like_is_not_used_when_match_finds_rows(engine_none):
    (hidden,) = store_all(engine_none, ["storage outage in eu-west"])
    store_all(engine_none, ["storage outage drill scheduled"])
    _drop_fts_posting(engine_none.db.path, hidden)
    res = recall(engine_none, "storage outage", limit=10)
    assert contents(res) == ["storage outage drill scheduled"]


def test_like_escapes_wildcards(make_engine):
    eng = make_engine(fts_enabled=False)
    store_all(eng, ["rate is 100% for user_1", "rate is 1000 for userX1"])
    assert contents(recall(eng, "100% for user_1")) == ["rate is 100% for user_1"]


# -------------------------------------------------------------------- CJK
JP = "梅雨は北海道と小笠原諸島を除く日本で見られる"


@pytest.mark.parametrize("query", ["小笠原諸島", "北海道", "日本で見", "原諸島を除く"])
def test_cjk_substring_is_found(engine_none, query):
    store_all(engine_none, [JP, "東京の夏は暑い", "会議は月曜日に移動した"])
    res = recall(engine_none, query)
    assert contents(res)[-1] == JP
    assert "東京の夏は暑い" not in contents(res)


def test_cjk_absent_substring_finds_nothing(engine_none):
    store_all(engine_none, [JP])
    assert recall(engine_none, "沖縄諸島")["messages"] == []


def test_cjk_with_two_matching_rows(engine_none):
    store_all(engine_none, [JP, "北海道の冬は長い", "東京の夏は暑い"])
    assert set(contents(recall(engine_none, "北海道"))) == {JP, "北海道の冬は長い"}


# ---------------------------------------------- identifiers on a tiny corpus
FILLER = [
    "the team agreed to move the standup to 10am",
    "remember to renew the TLS certificate before it expires",
    "error budgets are reviewed every quarter",
    "the staging database was restored from last night's backup",
    "connection pooling was enabled on the api servers",
    "a timeout in the search service caused slow pages",
    "crash reports are collected by the telemetry pipeline",
    "the main branch is protected; merge requests need two approvals",
    "the app uses python 3.11 in production",
    "we upgraded the load balancer firmware",
    "user sessions expire after twelve hours of inactivity",
    "the design review for the new onboarding flow is on thursday",
    "logs are retained for thirty days",
    "the mobile release train leaves every second week",
    "feature flags live in the configuration service",
    "the payment provider sends webhooks for refunds",
    "on-call rotation changes every monday morning",
    "the cache is warmed after each deployment",
    "grafana dashboards show p95 latency per endpoint",
    "kafka consumers lag during the nightly batch",
    "the security team runs a pentest twice a year",
    "docs are published from the docs folder automatically",
    "the office wifi password changed last month",
    "integration tests run against a disposable database",
    "customer support escalations go to the triage channel",
    "the vendor contract renews in january",
    "translations are managed in a separate repository",
]
EXACT_ROWS = {
    "cve": "xz-utils backdoor tracked as CVE-2024-3094 was patched on all build hosts",
    "err": "payment gateway raised ERR_TIMEOUT_1750 after thirty seconds",
    "path": "crash at src/app/main.py:42 when the config file is missing",
}


@pytest.fixture
def tiny_corpus(engine_none):
    store_all(engine_none, FILLER + list(EXACT_ROWS.values()))
    assert engine_none.list_memories("a", 500)["count"] == 30
    return engine_none


@pytest.mark.parametrize(
    "query, key",
    [
        ("CVE-2024-3094", "cve"),
        ("is CVE-2024-3094 fixed?", "cve"),
        ("ERR_TIMEOUT_1750", "err"),
        ("what does ERR_TIMEOUT_1750 mean", "err"),
        ("src/app/main.py:42", "path"),
        ("crash in src/app/main.py:42", "path"),
        ("gateway raised ERR_TIMEOUT_1750 after thirty", "err"),  # exact error string (query contained in row)
    ],
)
def test_identifier_and_exact_string_pass_the_gate_on_tiny_corpus(tiny_corpus, query, key):
    res = recall(tiny_corpus, query)
    assert res["messages"], "an exact match must never be gated away"
    assert res["messages"][-1]["content"] == EXACT_ROWS[key]


def test_quoted_phrase_is_an_exact_match(tiny_corpus):
    res = recall(tiny_corpus, 'anything about "renew the TLS certificate" please')
    assert contents(res)[-1] == "remember to renew the TLS certificate before it expires"


def test_non_exact_keyword_rows_are_gated_on_tiny_corpus(tiny_corpus):
    """rrf mode: FTS-only rows are gated on rrf vs min_score(30)·3/61 — a bare rank-0 row does not pass."""
    trace = {}
    res = recall(tiny_corpus, "nightly telemetry", trace=trace)
    assert trace["channels"]["keyword"] >= 2
    assert res["messages"] == []
    assert trace["pool"] == 30


# ------------------------------------------------- episode boundary penalty
def _reasons(res):
    return {m["content"]: m["match_reason"] for m in res["messages"]}


def test_episode_boundary_penalty_lowers_older_memories(engine_none):
    old = "quarterly budget review"
    new = "quarterly budget review notes from the planning meeting with finance"
    engine_none.store("a", old, timestamp="2020-01-01T00:00:00Z")
    engine_none.store("a", new, timestamp="2099-01-01T00:00:00Z")
    before = recall(engine_none, "quarterly budget review")
    assert contents(before)[-1] == old  # shorter row wins on bm25
    base = _reasons(before)

    # the episode's own time (start_time, from history) is older than the boundary: still exempt
    engine_none.archive_episode(
        "a", "the team discussed quarterly budget review outcomes", history=[{"timestamp": "2020-01-02T00:00:00Z"}]
    )
    after = recall(engine_none, "quarterly budget review")
    reasons = _reasons(after)
    assert reasons[old]["rrf"] == pytest.approx(base[old]["rrf"] * 0.5)  # > 69 h before: the 0.5 floor
    assert reasons[new]["rrf"] == pytest.approx(base[new]["rrf"])  # after the boundary: untouched
    episode = "[Episode] the team discussed quarterly budget review outcomes"
    assert reasons[episode]["rrf"] == pytest.approx(1 / 61)  # episodes are exempt
    assert contents(after)[-1] != old
    assert contents(after).index(new) > contents(after).index(old)
    rrf = [m["match_reason"]["rrf"] for m in after["messages"]]
    assert rrf == sorted(rrf)


def test_episode_penalty_decays_with_hours(engine_none):
    from datetime import datetime, timedelta

    ten_hours_ago = (datetime.now(UTC) - timedelta(hours=10)).isoformat()
    engine_none.store("a", "pen-10 a ten hour old memory", timestamp=ten_hours_ago)
    base = recall(engine_none, "pen-10")["messages"][0]["match_reason"]["rrf"]
    engine_none.archive_episode("a", "boundary episode")
    got = recall(engine_none, "pen-10")["messages"][0]["match_reason"]["rrf"]
    assert got == pytest.approx(base * math.exp(-0.01 * 10), rel=2e-3)


def test_episode_penalty_is_scoped(engine_none):
    engine_none.store("a", "pen-11 old row", timestamp="2020-01-01T00:00:00Z")
    base = recall(engine_none, "pen-11")["messages"][0]["match_reason"]["rrf"]
    engine_none.archive_episode("b", "another agent's episode")
    engine_none.archive_episode("a", "episode in another project", project_id="P")
    assert recall(engine_none, "pen-11", project_id="")["messages"][0]["match_reason"]["rrf"] == pytest.approx(base)
    assert recall(engine_none, "pen-11", project_id="P")["messages"][0]["match_reason"]["rrf"] == pytest.approx(base * 0.5)


def test_episode_penalty_can_be_disabled(make_engine):
    eng = make_engine(episode_penalty_enabled=False, recall_mode="rrf")
    eng.store("a", "pen-12 old row", timestamp="2020-01-01T00:00:00Z")
    eng.archive_episode("a", "boundary")
    assert recall(eng, "pen-12")["messages"][0]["match_reason"]["rrf"] == pytest.approx(1 / 61)
