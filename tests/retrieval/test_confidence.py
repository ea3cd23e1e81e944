"""Confidence scoring and penalties:
the formula, re-sort and gate on confidence, recall_count bump (never while paused, deep
or rescued), the recent-recall penalty, gate_fallback, autocut keyed on confidence and
sparing exact matches, and the episode boundary penalty inside the same axis scope."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from cpersona.retrieval import confidence as conf
from cpersona.retrieval import gate
from cpersona.retrieval.candidate import EPISODE, MEMORY, PROFILE, Candidate

from conftest import db_rows
from quality_helpers import contents, make, recall, store_rows, utc

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
P = conf.ConfidenceParams()


@pytest.fixture
def engines():
    made = []
    yield made
    for eng in made:
        eng.close()


@pytest.fixture
def factory(tmp_path, engines):
    def build(name="c.db", **overrides):
        eng = make(tmp_path / name, **overrides)
        engines.append(eng)
        return eng
    return build


# ------------------------------------------------------------------ formula
def test_formula_with_cosine_and_dynamic_decay():
    cand = Candidate(MEMORY, 1, "x", timestamp=(NOW - timedelta(hours=100)).isoformat(), cosine=0.6)
    span = conf.CorpusSpan(range_h=500.0, newest_age_h=1.0)
    d = conf.score(cand, P, span, (0, None), NOW)
    decay = max(0.3, 1 / (1 + 100 * 0.005 / max(1, 500 / 168)))
    expected = round(math.sqrt((0.6 - 0.2) / 0.55 * decay), 4)
    assert d == {"cosine": 0.6, "age_hours": 100.0, "score": expected}


def test_formula_without_cosine_resolved_boost_and_recency():
    ep = Candidate(EPISODE, 2, "[Episode] e", timestamp=(NOW - timedelta(hours=10)).isoformat(), resolved=True)
    d = conf.score(ep, P, conf.CorpusSpan(), None, NOW)
    assert d["resolved"] is True and d["score"] == round(math.sqrt(max(0.3, 1 / (1 + 10 * 0.005))) * 0.3, 4)
    old = Candidate(MEMORY, 3, "m", timestamp=(NOW - timedelta(days=400)).isoformat(), cosine=0.75)
    plain = conf.score(old, P, conf.CorpusSpan(), (0, None), NOW)["score"]
    boosted = conf.score(old, P, conf.CorpusSpan(), (50, (NOW - timedelta(hours=1)).isoformat()), NOW)
    assert plain == round(math.sqrt(0.3), 4)  # floor of the time decay
    assert "recently_recalled" not in boosted and boosted["score"] > plain  # boost lifts the floor
    recent = conf.score(old, P, conf.CorpusSpan(), (1, (NOW - timedelta(minutes=2)).isoformat()), NOW)
    assert recent["recently_recalled"] is True and recent["score"] < plain * 0.75
    deep = conf.score(old, P, conf.CorpusSpan(), (1, (NOW - timedelta(minutes=2)).isoformat()), NOW, deep=True)
    assert deep["score"] == 1.0  # deep: no decay, no recency penalty


def test_profile_rows_get_an_imputed_age():
    prof = Candidate(PROFILE, -1, "[Profile] p")
    d = conf.score(prof, P, conf.CorpusSpan(range_h=48, newest_age_h=2), None, NOW)
    assert d["age_unknown"] is True and d["age_hours"] == 26.0 and "cosine" not in d


def test_signal_precedence_puts_confidence_first():
    c = Candidate(MEMORY, 1, "x", cosine=0.9, cc=0.5, rsf=0.4)
    assert gate.signal(c) == ("rsf", 0.4)
    c.confidence = 0.2
    assert gate.signal(c) == ("confidence", 0.2)


# ------------------------------------------------------------ through recall
def corpus(eng, agent="a"):
    rows = [
        ("release train for the billing service moves to thursday", utc(-30)),
        ("billing service owner is the payments team", utc(-1)),
        ("billing alerts page the on-call engineer", utc(-200)),
        ("lunch menu for friday is curry", utc(-2)),
    ]
    return store_rows(eng, rows, agent=agent)


def test_confidence_mode_resorts_and_gates_on_confidence(factory):
    eng = factory(confidence_enabled=True)
    corpus(eng)
    msgs = recall(eng, "billing service")["messages"]
    assert msgs and all(m["match_reason"]["signal"] == "confidence" for m in msgs)
    scores = [m["confidence"]["score"] for m in msgs]
    assert scores == sorted(scores)  # worst → best on confidence
    assert all("age_hours" in m["confidence"] for m in msgs)


def test_confidence_off_has_no_confidence_and_no_bump(factory):
    eng = factory()
    ids = corpus(eng)
    msgs = recall(eng, "billing service")["messages"]
    assert msgs and all("confidence" not in m for m in msgs)
    assert db_rows(eng.settings.db_file, "SELECT SUM(recall_count) FROM memories")[0][0] == 0
    assert ids


def test_recall_count_bump_and_recent_recall_penalty(factory):
    eng = factory(confidence_enabled=True)
    corpus(eng)
    first = recall(eng, "billing service")["messages"]
    returned = [int(m["ref"].split(":")[1]) for m in first]
    counts = dict(db_rows(eng.settings.db_file, "SELECT id, recall_count FROM memories"))
    assert all(counts[i] == 1 for i in returned) and sum(counts.values()) == len(returned)
    second = {m["ref"]: m for m in recall(eng, "billing service")["messages"]}
    for m in first:
        again = second.get(m["ref"])
        if again is not None:
            assert again["confidence"].get("recently_recalled") is True
            assert again["confidence"]["score"] <= m["confidence"]["score"]


def test_no_bump_when_deep_or_paused(factory):
    eng = factory(confidence_enabled=True)
    corpus(eng)
    assert recall(eng, "billing service", deep=True)["messages"]
    eng.pause_persistence(60)
    assert recall(eng, "billing service")["messages"]
    eng.resume_persistence()
    assert db_rows(eng.settings.db_file, "SELECT SUM(recall_count) FROM memories")[0][0] == 0


def test_gate_fallback_rescues_backfilled_rows_and_flags_them(factory):
    # scan window 1: only the newest row is seen by the vector retriever, the others are
    # keyword-only and get a back-filled cosine; weak cosines fail the confidence gate.
    eng = factory(confidence_enabled=True, max_memories=1)
    store_rows(eng, [
        ("quarterly planning notes mention zeppelin hangar budget overrun and twelve other topics", utc(-40)),
        ("zeppelin", utc(-30)),
        ("unrelated newest row about tea", utc(-1)),
    ])
    query = "zeppelin airship maintenance schedule review with the inspection crew roster and spare parts"
    out = recall(eng, query)
    assert out.get("gate_fallback") is True
    assert "zeppelin" in contents(out)
    assert db_rows(eng.settings.db_file, "SELECT SUM(recall_count) FROM memories")[0][0] == 0  # rescues never bump
    plain = factory("plain.db", max_memories=1)
    store_rows(plain, [("zeppelin", utc(-30))])
    assert "gate_fallback" not in recall(plain, query)


def test_autocut_keys_on_confidence_and_spares_exact_matches():
    rows = [Candidate(MEMORY, i, f"row {i}") for i in range(5)]
    for cand, score in zip(rows, (0.9, 0.88, 0.2, 0.19, 0.18)):
        cand.confidence = score
    assert [c.id for c in gate.autocut(rows, 3, 0.15)] == [0, 1]
    kept = gate.autocut(rows, 3, 0.15, keep=lambda c: c.id == 4)
    assert [c.id for c in kept] == [0, 1, 4]
    for cand in rows:  # rank-fusion lists are never cut
        cand.confidence, cand.cc = None, cand.confidence
    assert len(gate.autocut(rows, 3, 0.15)) == 5


# ------------------------------------------------------ episode boundary penalty
def penalty_of(eng, query, agent="a", **kw):
    msgs = recall(eng, query, agent=agent, **kw)["messages"]
    return {m["content"]: m["match_reason"]["score"] for m in msgs}


def test_episode_boundary_penalty_within_the_same_scope(factory):
    eng = factory("p.db", embedder=None)
    old_ts = utc(-10)
    eng.store("a", "kestrel migration plan for the warehouse", timestamp=old_ts, project_id="p1", channel="c1")
    eng.store("a", "kestrel", timestamp=old_ts, project_id="p1", channel="c1")
    before = penalty_of(eng, "kestrel migration plan for the warehouse", project_id="p1", channel="c1")
    # episodes of another agent, another project, another channel do not move the boundary
    eng.archive_episode("b", "kestrel summary elsewhere")
    eng.archive_episode("a", "summary in another project", project_id="p2")
    eng.archive_episode("a", "summary in another channel", project_id="p1", channel="c2")
    assert penalty_of(eng, "kestrel migration plan for the warehouse", project_id="p1", channel="c1") == before
    # an episode in the same scope does: rows older than it are multiplied by max(e^(-0.01·h), 0.5)
    eng.archive_episode("a", "kestrel session summary", project_id="p1", channel="c1")
    after = penalty_of(eng, "kestrel migration plan for the warehouse", project_id="p1", channel="c1")
    key = "kestrel migration plan for the warehouse"
    assert after[key] == pytest.approx(before[key] * 0.5, rel=1e-3)  # 10 days old: at the 0.5 floor


def test_episode_rows_profiles_and_undated_rows_are_exempt():
    from cpersona.retrieval import scoring

    boundary = "2026-06-10T00:00:00+00:00"
    old = "2026-06-09T00:00:00+00:00"  # 24 h before: factor e^(-0.24)
    mem = Candidate(MEMORY, 1, "m", timestamp=old, cc=0.8, cosine=0.5, lexical=1.0)
    ep = Candidate(EPISODE, 1, "[Episode] e", timestamp=old, cc=0.8)
    prof = Candidate(PROFILE, -1, "[Profile] p")
    undated = Candidate(MEMORY, 2, "u", cc=0.8)
    assert scoring.episode_penalty([mem, ep, prof, undated], boundary, 0.01, 0.5) is True
    assert mem.cc == pytest.approx(0.8 * math.exp(-0.24)) and mem.cosine == pytest.approx(0.5 * math.exp(-0.24))
    assert ep.cc == 0.8 and undated.cc == 0.8 and prof.penalty == 1.0


def test_recent_rows_after_the_boundary_are_not_penalised(factory):
    eng = factory("q.db", embedder=None)
    eng.archive_episode("a", "earlier session about falcons")
    eng.store("a", "falcon nest camera installed", timestamp=utc(1))
    msgs = recall(eng, "falcon nest camera installed")["messages"]
    mem = next(m for m in msgs if m["content"] == "falcon nest camera installed")
    assert mem["match_reason"]["score"] == pytest.approx(0.8)  # cc = (1 − α)·lexical 1.0 (α 0.2), unpenalised
