"""Profiles:
caller-computed text with a length cap, injected into recall only when the scoped pool
(memories + episodes) holds ≥ 50 rows, at most 3, scoreless — so `limit` cuts them first —
and never another agent's."""

from __future__ import annotations

import pytest

from conftest import db_counts
from quality_helpers import contents, make, recall


@pytest.fixture
def eng(tmp_path):
    e = make(tmp_path / "p.db", embedder=None)
    yield e
    e.close()


def fill(e, n, agent="a", word="heron", **kw):
    for i in range(n):
        assert e.store(agent, f"{word} sighting number {i} near the lake", **kw)["result"] == "stored"


def test_update_and_get_round_trip(eng):
    assert eng.get_profile("a") == {"profile": ""}
    out = eng.update_profile("a", "  [Memory from chat] Prefers metric units. Lives in Osaka.  ")
    assert out == {"ok": True, "profiles_updated": 1, "length": len("Prefers metric units. Lives in Osaka.")}
    assert eng.get_profile("a")["profile"] == "Prefers metric units. Lives in Osaka."
    eng.update_profile("a", "Moved to Kyoto.")
    assert eng.get_profile("a")["profile"] == "Moved to Kyoto."  # replaced, not appended
    assert db_counts(eng.settings.db_file)["profiles"] == 1


def test_empty_and_marker_only_profiles_change_nothing(eng):
    assert eng.update_profile("a", "   ")["reason"] == "empty profile"
    assert eng.update_profile("a", "[Memory from x]")["reason"] == "empty after sanitization"
    assert eng.get_profile("a")["profile"] == ""


@pytest.mark.parametrize("invisible", ["\u200b\u200c\ufeff", " \u2060 \u200d ", "[Memory from x] \u200b"])
def test_a_profile_of_only_invisible_characters_changes_nothing(eng, invisible):
    assert eng.update_profile("a", "Lives in Osaka.")["profiles_updated"] == 1
    out = eng.update_profile("a", invisible)
    assert out["ok"] is True and out["profiles_updated"] == 0 and out["reason"].startswith("empty")
    assert eng.get_profile("a")["profile"] == "Lives in Osaka."


def test_length_cap_truncates_and_says_so(tmp_path):
    e = make(tmp_path / "cap.db", embedder=None, max_profile_length=20)
    try:
        out = e.update_profile("a", "x" * 50)
        assert out["truncated"] is True and out["max_length"] == 20 and out["length"] == 20
        assert e.get_profile("a")["profile"] == "x" * 20
    finally:
        e.close()


def test_bad_arguments(eng):
    from cpersona.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        eng.update_profile("a", 42)
    with pytest.raises(InvalidArgument):
        eng.get_profile(None)


def test_paused_update_is_skipped(eng):
    eng.pause_persistence(60)
    out = eng.update_profile("a", "should not be written")
    assert out["persisted"] is False and out["dry_run"] is True and out["profiles_updated"] == 0
    eng.resume_persistence()
    assert eng.get_profile("a")["profile"] == ""


def test_injected_only_when_the_pool_has_50_rows(eng):
    eng.update_profile("a", "Birdwatcher; keeps a lake log.")
    fill(eng, 48)
    eng.archive_episode("a", "a heron session")  # episodes count toward the pool
    assert not any(c.startswith("[Profile]") for c in contents(recall(eng, "heron sighting", limit=100)))  # pool 49
    fill(eng, 1, word="egret")
    msgs = recall(eng, "heron sighting", limit=100)["messages"]  # pool 50
    prof = [m for m in msgs if m["content"].startswith("[Profile]")]
    assert prof == [{"content": "[Profile] Birdwatcher; keeps a lake log.", "source": {"System": "profile"}}]
    assert msgs[0] is prof[0] or msgs[0] == prof[0]  # scoreless: the weakest row (first, responses are worst → best)


def test_profile_rows_are_cut_by_limit_first(eng):
    eng.update_profile("a", "Birdwatcher.")
    fill(eng, 60)
    assert not any(c.startswith("[Profile]") for c in contents(recall(eng, "heron sighting", limit=10)))
    eng.store("a", "osprey nest on the pylon")
    few = recall(eng, "osprey", limit=10)  # fewer scored rows than the limit → room for it
    assert contents(few) == ["[Profile] Birdwatcher.", "osprey nest on the pylon"]


def test_the_pool_is_the_recall_scope(eng):
    eng.update_profile("a", "Birdwatcher.")
    fill(eng, 60, project_id="big")
    fill(eng, 3, word="heron", project_id="small")
    assert "[Profile] Birdwatcher." in contents(recall(eng, "heron sighting", limit=100, project_id="big"))
    assert "[Profile] Birdwatcher." not in contents(recall(eng, "heron sighting", limit=100, project_id="small"))


def test_never_another_agents_profile(eng):
    eng.update_profile("b", "Secret profile of b.")
    fill(eng, 60)
    fill(eng, 60, agent="b")
    assert not any("Secret" in c for c in contents(recall(eng, "heron sighting", limit=100)))
    assert eng.get_profile("a")["profile"] == ""


def test_blank_query_cascade_places_the_profile_before_keyword_rows(eng):
    eng.update_profile("a", "Birdwatcher.")
    fill(eng, 55)
    msgs = recall(eng, "", limit=5)["messages"]
    assert "[Profile] Birdwatcher." in [m["content"] for m in msgs] and len(msgs) == 5


def test_confidence_mode_scores_the_profile(tmp_path):
    e = make(tmp_path / "c.db", embedder=None, confidence_enabled=True)
    try:
        e.update_profile("a", "Birdwatcher.")
        fill(e, 55)
        prof = next(m for m in recall(e, "heron sighting", limit=100)["messages"] if m["content"].startswith("[Profile]"))
        assert prof["confidence"]["age_unknown"] is True and prof["match_reason"]["signal"] == "confidence"
    finally:
        e.close()


def test_blank_query_on_a_small_store_is_not_a_row_short_because_of_the_profile(tmp_path):
    from cpersona.config import Settings
    from cpersona.service.engine import Engine
    from cpersona.service.requests import RecallRequest

    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "p.db"), embedding_mode="none"))
    for i in range(6):
        eng.store("a", f"memory number {i}")
    eng.update_profile("a", "likes tea")
    assert [len(eng.recall(RecallRequest("a", "", limit))["messages"]) for limit in (1, 2, 3)] == [1, 2, 3]
    assert eng.recall(RecallRequest("a", "", 1))["messages"][0]["content"] == "memory number 5"
    eng.close()
