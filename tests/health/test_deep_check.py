"""deep_check: the six per-agent inspections, their repairs, and locked rows."""

from __future__ import annotations

import json

import numpy as np
from cpersona.storage.codec import to_blob

from health_helpers import add_memory, memory, raw

SENTINEL = '{"type": "User", "id": "", "name": ""}'


def _vec(seed: int, dim: int = 8) -> bytes:
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return to_blob(v / np.linalg.norm(v))


def test_names_written_into_content_are_recovered_into_the_source(engine_none):
    named = add_memory(engine_none, "[Ann] the build is green", source=SENTINEL)
    locked = add_memory(engine_none, "[Bob] locked", source=SENTINEL, locked=1)
    unnamed = add_memory(engine_none, "no name here", source=SENTINEL)
    report = engine_none.deep_check("kai", checks=["anonymous_source"])["results"]["anonymous_source"]
    assert report["recoverable"] == 2 and report["unrecoverable"] == 1 and report["unfixable_locked"] == 1
    assert report["samples"][0] == {"id": named, "recovered_name": "Ann"}
    assert report["unrecoverable_samples"] == [{"id": unnamed, "content_preview": "no name here"}]
    fixed = engine_none.deep_check("kai", fix=True, checks=["anonymous_source"])
    assert fixed["fixed"] is True and fixed["results"]["anonymous_source"]["fixed"] == 1
    assert json.loads(memory(engine_none, named)[5]) == {"type": "User", "id": "", "name": "Ann"}
    assert memory(engine_none, locked)[5] == SENTINEL


def test_very_short_rows_are_deleted_unless_locked(engine_none):
    short = add_memory(engine_none, " ok ")
    locked = add_memory(engine_none, "yes", locked=1)
    add_memory(engine_none, "a real sentence")
    result = engine_none.deep_check("kai", fix=True, checks=["short_content"])["results"]["short_content"]
    assert result["count"] == 2 and result["fixed"] == 1 and result["locked"] == 1
    assert memory(engine_none, short) is None and memory(engine_none, locked) is not None


def test_profile_not_updated_for_a_month_is_stale(engine_none):
    engine_none.update_profile("kai", "Backend engineer.")
    fresh = engine_none.deep_check("kai", checks=["stale_profile"])["results"]["stale_profile"]
    assert fresh["count"] == 0 and fresh["threshold_days"] == 30
    raw(engine_none, "UPDATE profiles SET updated_at = '2020-01-01T00:00:00+00:00'")
    assert engine_none.deep_check("kai", checks=["stale_profile"])["results"]["stale_profile"]["count"] == 1


def test_episodes_covering_no_memory_are_orphaned(engine_none):
    engine_none.store("kai", "inside", timestamp="2026-03-01T10:30:00Z")
    covered = {"history": [{"timestamp": "2026-03-01T10:00:00Z"}, {"timestamp": "2026-03-01T11:00:00Z"}]}
    empty = {"history": [{"timestamp": "2026-04-01T10:00:00Z"}, {"timestamp": "2026-04-01T11:00:00Z"}]}
    engine_none.archive_episode("kai", "covered session", **covered)
    orphan = engine_none.archive_episode("kai", "nothing happened", **empty)["episode_id"]
    result = engine_none.deep_check("kai", checks=["orphaned_episodes"])["results"]["orphaned_episodes"]
    assert result["count"] == 1 and result["samples"][0]["id"] == orphan


def test_an_episode_whose_facts_were_stored_after_its_last_turn_is_no_orphan(engine_none):
    """The usual close of a session: the agent stores what it learnt, then archives the
    episode — the memories come after the last turn, before the archiving."""
    turns = {"history": [{"timestamp": "2026-05-01T10:00:00Z"}, {"timestamp": "2026-05-01T10:05:00Z"}]}
    engine_none.store("kai", "the ferry leaves at nine")  # stored now, after the turns
    engine_none.archive_episode("kai", "planned the ferry trip", **turns)
    result = engine_none.deep_check("kai", checks=["orphaned_episodes"])["results"]["orphaned_episodes"]
    assert result["count"] == 0


def test_near_duplicates_exclude_exact_repeats(engine_none):
    a = add_memory(engine_none, "the deploy runs at nine", embedding=_vec(1))
    b = add_memory(engine_none, "deploy runs at 9", embedding=_vec(1))
    c = add_memory(engine_none, "the deploy runs at nine", channel="#x", embedding=_vec(1))
    add_memory(engine_none, "unrelated", embedding=_vec(2))
    result = engine_none.deep_check("kai", checks=["near_duplicate"])["results"]["near_duplicate"]
    assert result["rows_scanned"] == 4 and result["threshold"] == 0.97 and result["pairs"] == 2
    assert {frozenset((s["id_a"], s["id_b"])) for s in result["samples"]} == {frozenset((a, b)), frozenset((b, c))}


def test_mixed_dimensions_skip_near_duplicates(engine_none):
    add_memory(engine_none, "eight", embedding=_vec(1, 8))
    add_memory(engine_none, "sixteen", embedding=_vec(1, 16))
    result = engine_none.deep_check("kai", checks=["near_duplicate"])["results"]["near_duplicate"]
    assert result["skipped"] == "mixed embedding dimensions"


def test_calibration_staleness_without_backend_is_not_applicable(engine_none):
    result = engine_none.deep_check("kai", checks=["calibration_staleness"])["results"]["calibration_staleness"]
    assert result == {"status": "not_applicable"}


def test_unknown_deep_check_names_are_listed_not_run(engine_none):
    out = engine_none.deep_check("kai", checks=["short_content", "nope"])
    assert out["checks_run"] == ["short_content"] and out["unknown_checks"] == ["nope"]
    assert list(out["results"]) == ["short_content"]


def test_a_crashing_deep_check_answers_error_and_the_others_run(engine_none, monkeypatch):
    from cpersona.storage.inventory import InventoryRepo

    monkeypatch.setattr(InventoryRepo, "short_rows", lambda self, agent, n: 1 / 0)
    out = engine_none.deep_check("kai")
    assert out["results"]["short_content"] == {"error": "ZeroDivisionError: division by zero"}
    assert out["results"]["stale_profile"]["count"] == 0
