"""Checks on the structured fields: JSON, timestamps, episode times, sources."""

from __future__ import annotations

import json

import pytest

from health_helpers import add_memory, cycle, find, memory, one, raw, rows

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends

CREATED = "2026-03-01 09:00:00"


def test_bad_json_in_metadata_and_source_becomes_empty_object(engine_none):
    a = add_memory(engine_none, "bad metadata", metadata="{bad json")
    b = add_memory(engine_none, "bad source", source="{'single': quotes}")
    locked = add_memory(engine_none, "locked bad", metadata="{bad json", locked=1)
    before_locked = memory(engine_none, locked)
    before, during, _ = cycle(engine_none, "invalid_json", "invalid_json", "warn", locked=1)
    assert before["count"] == 3 and before["metadata"] == 2 and before["source"] == 1
    assert during["fixed"] == 2
    assert memory(engine_none, a)[7] == "{}" and memory(engine_none, b)[5] == "{}"
    assert memory(engine_none, locked) == before_locked


def test_unparseable_timestamp_becomes_the_creation_time(engine_none):
    a = add_memory(engine_none, "when?", timestamp="yesterday", created_at=CREATED)
    locked = add_memory(engine_none, "locked when?", timestamp="next week", locked=1)
    before_locked = memory(engine_none, locked)
    before, _, _ = cycle(engine_none, "invalid_timestamp", "invalid_timestamp", "warn", locked=1)
    assert before["samples"][0] == {"id": a, "timestamp": "yesterday"}
    assert memory(engine_none, a)[6] == "2026-03-01T09:00:00+00:00"
    assert memory(engine_none, locked) == before_locked


def test_episode_without_start_time_gets_its_creation_time(engine_none):
    ep = engine_none.archive_episode("kai", "a session without history")["episode_id"]
    # archived without history: no span at all, the original's normal shape too — nothing to report
    assert not find(engine_none.check_health(checks=["missing_episode_start_time"]), "missing_episode_start_time")
    raw(engine_none, "UPDATE episodes SET created_at = ?, end_time = ? WHERE id = ?", (CREATED, CREATED, ep))
    cycle(engine_none, "missing_episode_start_time", "missing_episode_start_time", "info")
    assert rows(engine_none, "SELECT start_time FROM episodes WHERE id = ?", (ep,)) == [("2026-03-01T09:00:00+00:00",)]


def test_offset_timestamps_are_converted_to_utc_and_naive_ones_left(engine_none):
    add_memory(engine_none, "utc row", timestamp="2026-03-01T09:00:00Z")
    tokyo = add_memory(engine_none, "tokyo row", timestamp="2026-03-01T18:00:00+09:00")
    naive = add_memory(engine_none, "naive row", timestamp="2026-03-01T10:00:00")
    locked = add_memory(engine_none, "locked tokyo", timestamp="2026-03-02T18:00:00+09:00", locked=1)
    before = one(engine_none.check_health(checks=["timestamp_format_drift"]), "timestamp_format_drift")
    assert before["severity"] == "warn" and before["forms"] == {"utc": 1, "aware": 2, "naive": 1}
    assert before["repairable"] == 1 and before["unfixable_naive"] == 1 and before["unfixable_locked"] == 1
    fixed = one(engine_none.check_health(checks=["timestamp_format_drift"], fix=True), "timestamp_format_drift")
    assert fixed["normalized"] == 1
    assert memory(engine_none, tokyo)[6] == "2026-03-01T09:00:00+00:00"
    assert memory(engine_none, naive)[6] == "2026-03-01T10:00:00"
    assert memory(engine_none, locked)[6] == "2026-03-02T18:00:00+09:00"
    left = one(engine_none.check_health(checks=["timestamp_format_drift"]), "timestamp_format_drift")
    assert left["repairable"] == 0 and left["needs_human_review"] and left["severity"] == "info"


def test_episode_times_are_converted_to_utc(engine_none):
    a = engine_none.archive_episode("kai", "tokyo session", history=[{"timestamp": "2026-03-01T18:00:00+09:00"},
                                                                     {"timestamp": "2026-03-01T19:00:00+09:00"}])
    engine_none.archive_episode("kai", "utc session", history=[{"timestamp": "2026-03-02T09:00:00Z"}])
    raw(engine_none, "UPDATE episodes SET start_time = '2026-03-01T18:00:00+09:00', "
        "end_time = '2026-03-01T19:00:00+09:00' WHERE id = ?", (a["episode_id"],))
    cycle(engine_none, "episode_timestamp_format_drift", "episode_timestamp_format_drift", "warn")
    assert rows(engine_none, "SELECT start_time, end_time FROM episodes WHERE id = ?", (a["episode_id"],)) == [
        ("2026-03-01T09:00:00+00:00", "2026-03-01T10:00:00+00:00")]


def test_legacy_source_shapes_are_mapped_and_unknown_ones_left(engine_none):
    lower = add_memory(engine_none, "lower type", source='{"type": "user", "id": "u1", "name": "Ann"}')
    tagged = add_memory(engine_none, "tagged", source='{"Agent": "kai"}')
    bare = add_memory(engine_none, "bare string", source='"kai"')
    locked = add_memory(engine_none, "locked lower", source='{"type": "assistant"}', locked=1)
    before_locked = memory(engine_none, locked)
    before = one(engine_none.check_health(checks=["invalid_source_type"]), "invalid_source_type")
    assert before["count"] == 4 and before["mappable"] == 2 and before["unmapped"] == 1 and before["locked"] == 1
    fixed = one(engine_none.check_health(checks=["invalid_source_type"], fix=True), "invalid_source_type")
    assert fixed["mapped"] == 2 and fixed["remaining"] == 2
    assert json.loads(memory(engine_none, lower)[5]) == {"type": "User", "id": "u1", "name": "Ann"}
    assert json.loads(memory(engine_none, tagged)[5]) == {"type": "Agent", "id": "kai", "name": "kai"}
    assert memory(engine_none, bare)[5] == '"kai"'
    assert memory(engine_none, locked) == before_locked
    left = one(engine_none.check_health(checks=["invalid_source_type"]), "invalid_source_type")
    assert left["repairable"] == 0 and left["severity"] == "info" and left["needs_human_review"]


def test_anonymous_sources_are_counted(engine_none):
    add_memory(engine_none, "nobody", source="{}")
    add_memory(engine_none, "sentinel", source='{"type": "User", "id": "", "name": ""}')
    add_memory(engine_none, "someone", source='{"type": "User", "id": "u1", "name": "Ann"}')
    # nothing can name the speaker of these: no finding, and no hint of a fix that does nothing
    assert not find(engine_none.check_health(checks=["anonymous_source"]), "anonymous_source")
    add_memory(engine_none, "[Bo] a named line", source='{"type": "User", "id": "", "name": ""}')
    issue = one(engine_none.check_health(checks=["anonymous_source"]), "anonymous_source")
    assert issue["severity"] == "info" and issue["unattributed"] == 3 and issue["recoverable"] == 1
    assert "deep_check" in issue["hint"]
    assert engine_none.deep_check(issue["agents"][0], checks=["anonymous_source"],
                                  fix=True)["results"]["anonymous_source"]["fixed"] == 1
    assert not find(engine_none.check_health(checks=["anonymous_source"]), "anonymous_source")
    assert not find(engine_none.check_health(checks=["invalid_source_type"]), "invalid_source_type")
