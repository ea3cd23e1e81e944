"""The recall pipeline through `Engine.recall` (retrievers, fusion, gate, limit, reversal,
advisory) and our deviations from the original: exact matches always pass the gate; LIKE stands in whenever MATCH is empty)."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC

import numpy as np
import pytest
from cpersona.devtools.fake_embed import fake_vector
from cpersona.retrieval.pipeline import RecallRequest
from cpersona.storage.codec import to_blob

from conftest import db_rows, wait_until

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


def recall(engine, query, agent="a", trace=None, **kw):
    return engine.recall(RecallRequest(agent, query, **kw), trace=trace)


def contents(res):
    return [m["content"] for m in res["messages"]]


def store_all(engine, texts, agent="a", **kw):
    ids = []
    for text in texts:
        res = engine.store(agent, text, **kw)
        assert res["result"] == "stored", res
        ids.append(res["id"])
    return ids


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


# ---------------------------------------------------------- blank = recency
def test_blank_query_lists_most_recent_oldest_first(engine_none):
    store_all(engine_none, [f"recency row {i}" for i in range(6)])
    engine_none.archive_episode("a", "an episode is not part of the recency listing")
    for blank in ("", "   "):
        res = recall(engine_none, blank, limit=3)
        assert contents(res) == ["recency row 3", "recency row 4", "recency row 5"]
        assert all("match_reason" not in m for m in res["messages"])


def test_blank_query_respects_scope(engine_none):
    engine_none.store("a", "mine", channel="c1")
    engine_none.store("b", "theirs")
    engine_none.store("a", "other channel", channel="c2")
    assert contents(recall(engine_none, "", channel="c1")) == ["mine"]


# --------------------------------------------------------- exclude_contents
def test_exclude_contents(engine_none):
    long_row = "excl-3 long fact about the migration plan for the billing database cluster"
    store_all(engine_none, ["excl-3 fact one", "excl-3 fact two", long_row])
    all_rows = set(contents(recall(engine_none, "excl-3")))
    assert len(all_rows) == 3

    res = recall(engine_none, "excl-3", exclude_contents=("  EXCL-3 FACT TWO ",))
    assert set(contents(res)) == all_rows - {"excl-3 fact two"}

    # short entries (< 32 chars) exclude only exact equals, not prefixes
    res = recall(engine_none, "excl-3", exclude_contents=("excl-3 fact",))
    assert set(contents(res)) == all_rows

    # long entries exclude by prefix in both directions
    res = recall(engine_none, "excl-3", exclude_contents=(long_row[:40],))
    assert set(contents(res)) == all_rows - {long_row}
    res = recall(engine_none, "excl-3", exclude_contents=(long_row + " and some trailing words",))
    assert set(contents(res)) == all_rows - {long_row}

    # blank entries are ignored
    assert set(contents(recall(engine_none, "excl-3", exclude_contents=("", "  ")))) == all_rows


# ------------------------------------------------------------- source_id
def test_source_id_prefix_filter(engine_none):
    e = engine_none
    e.store("a", "srcf-9 one", source={"type": "User", "id": "discord:12_3", "name": "u"})
    e.store("a", "srcf-9 two", source={"type": "User", "id": "discord:1293", "name": "v"})
    e.store("a", "srcf-9 three", source={"type": "User", "id": "slack:12_3", "name": "w"})
    e.store("a", "srcf-9 four")
    e.archive_episode("a", "srcf-9 episode")

    assert set(contents(recall(e, "srcf-9"))) == {
        "srcf-9 one", "srcf-9 two", "srcf-9 three", "srcf-9 four", "[Episode] srcf-9 episode"
    }
    assert contents(recall(e, "srcf-9", source_id="discord:12_3")) == ["srcf-9 one"]  # '_' is literal
    assert set(contents(recall(e, "srcf-9", source_id="discord:"))) == {"srcf-9 one", "srcf-9 two"}
    assert recall(e, "srcf-9", source_id="teams:")["messages"] == []
    # with a channel, channel-scoped episodes come back
    assert set(contents(recall(e, "srcf-9", source_id="discord:12", channel="c1"))) == {
        "srcf-9 one", "srcf-9 two", "[Episode] srcf-9 episode"
    }
    assert set(contents(recall(e, "", source_id="slack:"))) == {"srcf-9 three"}


def test_legacy_source_shape_is_normalised(engine_none):
    engine_none.store("a", "legacy-1 row", source={"User": "discord:5"})
    (msg,) = recall(engine_none, "legacy-1")["messages"]
    assert msg["source"] == {"type": "User", "id": "discord:5", "name": "discord:5"}
    assert contents(recall(engine_none, "legacy-1", source_id="discord:5")) == ["legacy-1 row"]


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


# ------------------------------------------------------------- advisory
def test_advisory_hint_in_mode_none(engine_none):
    first = recall(engine_none, "anything")
    assert first["messages"] == []
    adv = first["advisory"]
    assert adv["degraded"] is True
    assert adv["severity"] == "hint"
    assert "embeddings disabled" in adv["reason"]
    assert "CPERSONA_EMBEDDING_URL" in adv["runbook"]  # full runbook the first time
    second = recall(engine_none, "anything else")["advisory"]
    assert second["severity"] == "hint"
    assert len(second["runbook"]) < len(adv["runbook"])  # short reminder afterwards
    assert engine_none.advisory.state == "hint"


def test_advisory_can_be_disabled(make_engine):
    eng = make_engine(degraded_advisory=False)
    assert "advisory" not in recall(eng, "anything")


def test_advisory_fault_on_first_degraded_recall_then_cleared(engine_http, fake_embed):
    engine_http.store("a", "adv-77 stored while healthy")
    assert "advisory" not in recall(engine_http, "adv-77 warmup")

    fake_embed.fail_next = 1
    blip = recall(engine_http, "adv-77 single blip")
    assert "advisory" not in blip  # the probe answered: a single blip is forgiven
    assert engine_http.advisory.state == "healthy"

    fake_embed.fail = True
    two = recall(engine_http, "adv-77 first failure")  # failed embed + failed probe = down
    adv = two["advisory"]
    assert adv["degraded"] is True and adv["severity"] == "fault"
    assert fake_embed.url in adv["evidence"]
    assert "CPERSONA_EMBEDDING_URL" in adv["runbook"]
    assert contents(two) == ["adv-77 stored while healthy"]

    three = recall(engine_http, "adv-77 third failure")["advisory"]
    assert three["severity"] == "fault" and len(three["runbook"]) < len(adv["runbook"])

    fake_embed.fail = False
    healed = recall(engine_http, "adv-77 after recovery")
    assert "advisory" not in healed
    assert engine_http.advisory.state == "healthy"
    assert "vector" in healed["messages"][-1]["match_reason"]["retrievers"]


# ------------------------------------------------------------- backfill
def test_store_while_endpoint_down_is_backfilled(http_engine_factory, fake_embed):
    eng = http_engine_factory()  # default retry delay (30 s): only wake() brings the worker back early
    text = "she runs a marathon every spring"
    fake_embed.fail = True
    res = eng.store("a", text)
    assert res["result"] == "stored" and res["embedded"] is False
    assert db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (res["id"],)) == [(None,)]

    fake_embed.fail = False
    eng.queue.wake()
    assert wait_until(
        lambda: db_rows(eng.db.path, "SELECT embedding IS NOT NULL FROM memories WHERE id = ?", (res["id"],)) == [(1,)]
    ), eng.queue.last_error
    (blob,) = db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (res["id"],))[0]
    assert blob == to_blob(fake_vector(text))
    # now the vector retriever finds it for a query FTS cannot match
    msgs = recall(eng, "running marathons", deep=True)["messages"]
    assert [m["content"] for m in msgs] == [text]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]


def test_writes_during_an_outage_are_backfilled_without_manual_wake(http_engine_factory, fake_embed):
    """store/archive_episode wake the idle worker themselves; its own retry (CPERSONA_TASK_RETRY_DELAY)
    picks the rows up once the endpoint answers again."""
    import time

    eng = http_engine_factory(task_retry_delay=0.1)
    assert wait_until(eng.queue.running)
    time.sleep(0.3)  # let the worker settle into its idle wait (an empty table) — not a timing assertion

    def nulls(table):
        return db_rows(eng.db.path, f"SELECT COUNT(*) FROM {table} WHERE embedding IS NULL")[0][0]

    fake_embed.fail = True
    ids = [eng.store("a", f"retry row {i}")["id"] for i in range(3)]
    assert nulls("memories") == 3
    fake_embed.fail = False
    assert wait_until(lambda: nulls("memories") == 0), eng.queue.last_error
    (blob,) = db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (ids[0],))[0]
    assert blob == to_blob(fake_vector("retry row 0"))

    fake_embed.fail = True
    assert eng.archive_episode("a", "episode stored while down")["embedded"] is False
    fake_embed.fail = False
    assert wait_until(lambda: nulls("episodes") == 0), eng.queue.last_error
    assert eng.queue.pending() == 0


def test_stored_vector_is_little_endian_float32_unit(engine_http):
    res = engine_http.store("a", "vector format check")
    assert res["embedded"] is True
    (blob,) = db_rows(engine_http.db.path, "SELECT embedding FROM memories WHERE id = ?", (res["id"],))[0]
    assert len(blob) == 4 * 512
    vec = np.frombuffer(blob, dtype="<f4")
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-4)
    assert np.allclose(vec, fake_vector("vector format check"))


# ---------------------------------------------------- vector vs keyword
MARATHON_ROWS = ["running late for the meeting", "she runs a marathon every spring", "marathon training plan for runners"]
FILLERS = [f"filler note number {i} about gardening and compost" for i in range(60)]


def test_word_index_finds_inflections_and_vector_adds_its_cosine(make_engine, http_engine_factory):
    kw = make_engine("kw.db", recall_mode="rrf")
    hy = http_engine_factory("hy.db", recall_mode="rrf")
    for eng in (kw, hy):
        store_all(eng, MARATHON_ROWS + FILLERS)

    trace = {}
    kw_res = recall(kw, "running marathons", trace=trace, deep=True)
    # the word index matches stems (running/runs → run, marathons → marathon); trigram alone found one row
    assert set(contents(kw_res)) == set(MARATHON_ROWS)

    hy_res = recall(hy, "running marathons")
    got = {m["content"]: m["match_reason"] for m in hy_res["messages"]}
    assert "she runs a marathon every spring" in got
    assert "marathon training plan for runners" in got
    assert "vector" in got["she runs a marathon every spring"]["retrievers"]
    assert got["she runs a marathon every spring"]["cosine"] is not None
    assert not any(c.startswith("filler") for c in got)
    assert "vector" in got[contents(hy_res)[-1]]["retrievers"]  # the best row: found by both channels


@pytest.mark.sqlite_only("two processes on one file (tests/storage/test_postgres.py has the nodes)")
def test_second_engine_on_same_file_is_seen_by_vector_search(http_engine_factory):
    first = http_engine_factory("shared.db")
    second = http_engine_factory("shared.db")
    assert recall(first, "running marathons", deep=True)["messages"] == []
    assert first.indexes() is not None  # resident index loaded

    assert second.store("a", "marathon training plan for runners")["embedded"] is True
    msgs = recall(first, "running marathons", deep=True)["messages"]
    assert [m["content"] for m in msgs] == ["marathon training plan for runners"]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]


def test_vector_window_limits_only_the_vector_channel(http_engine_factory):
    eng = http_engine_factory(max_memories=1)
    store_all(eng, ["marathon training plan for runners", "unrelated newest row about taxes"])
    # the only embedded row in the 1-row window is the newest one, so the vector channel misses the older row
    trace: dict = {}
    recall(eng, "running marathons", trace=trace, deep=True)
    assert trace["channels"]["vector"] == 0
    # FTS/LIKE still see everything
    assert contents(recall(eng, "training plan")) == ["marathon training plan for runners"]


def test_out_of_scope_vectors_do_not_crowd_out_in_scope_rows(engine_http):
    """The vector top-`limit` is taken INSIDE the scope: a perfect match in another project or
    agent must not use up the slots (rows are re-checked in SQL afterwards, which would hide it)."""
    query = "crowd-1 lighthouse keeper schedule"
    engine_http.store("a", query, project_id="P")  # cosine 1.0, other project
    engine_http.store("b", query)  # cosine 1.0, other agent
    engine_http.store("a", query + " for the winter season")  # global pool, in scope for project Q
    msgs = recall(engine_http, query, limit=1, project_id="Q")["messages"]
    assert [m["content"] for m in msgs] == [query + " for the winter season"]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]


def test_vector_window_is_taken_inside_the_scope(http_engine_factory):
    eng = http_engine_factory(max_memories=1)
    eng.store("a", "marathon training plan for runners")
    eng.store("b", "newer row of another agent about taxes")
    msgs = recall(eng, "running marathons", deep=True)["messages"]
    assert [m["content"] for m in msgs] == ["marathon training plan for runners"]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]
