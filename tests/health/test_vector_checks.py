"""Checks on stored vectors and the embedding side (http mode against the fake /embed
server; the task queue is off so only the health run touches vectors)."""

from __future__ import annotations

import json

import pytest
from cpersona.calibration import sidecar
from cpersona.calibration.state import scoring_version
from cpersona.service.requests import RecallRequest

from health_helpers import add_memory, cycle, find, memory, one, raw, rows


@pytest.fixture
def engine(http_engine_factory):
    return http_engine_factory(task_queue_enabled=False)


def _store(engine, *texts: str) -> list[int]:
    return [engine.store("kai", t)["id"] for t in texts]


def _lengths(engine, table: str = "memories") -> dict[int, int | None]:
    return dict(rows(engine, f"SELECT id, length(embedding) FROM {table}"))


def test_seven_byte_vector_is_dropped_and_re_embedded(engine):
    a, b, c = _store(engine, "alpha fact", "beta fact", "gamma fact")
    engine.lock_memory(b)
    raw(engine, "UPDATE memories SET embedding = ? WHERE id IN (?, ?)", (b"\x00" * 7, a, b))
    locked_before = memory(engine, b)
    before, during, _ = cycle(engine, "embedding_dimension", "embedding_dimension_mismatch", "critical")
    assert before["count"] == 2 and before["expected_dim"] == 512 and before["lengths"] == [7]
    assert during["fixed"] == 2
    assert _lengths(engine) == {a: 2048, b: 2048, c: 2048}
    # the locked row's vector is derived data (re-made); everything the user wrote is untouched
    locked_after = memory(engine, b)
    assert [v for i, v in enumerate(locked_after) if i != 8] == [v for i, v in enumerate(locked_before) if i != 8]


def test_wrong_vector_length_is_found_without_any_backend(engine_none):
    bad = add_memory(engine_none, "odd bytes", embedding=b"1234567")
    zero = add_memory(engine_none, "empty blob", embedding=b"")
    before, _, _ = cycle(engine_none, "embedding_dimension", "embedding_dimension_mismatch", "critical")
    assert before["expected_dim"] is None and before["count"] == 2
    assert memory(engine_none, bad)[8] is None and memory(engine_none, zero)[8] is None


def test_rows_awaiting_re_embedding_are_not_a_dimension_defect(engine):
    (a,) = _store(engine, "old model row")
    raw(engine, "UPDATE memories SET embedding = ? WHERE id = ?", (b"\x00" * 1536, a))
    state = {"model": "fake-hash-512", "dim": 512, "pending": {"from_model": "old", "from_dim": 384,
             "boundary": {"memories": a, "episodes": 0}, "watermark": {"memories": 0, "episodes": 0}}}
    raw(engine, "UPDATE cpersona_meta SET value = ? WHERE key = 'vectors'", (json.dumps(state),))
    report = engine.check_health(checks=["embedding_dimension", "embedding_backend"])
    assert not find(report, "embedding_dimension_mismatch")
    assert one(report, "reembed_pending")["awaiting"] == 1


def test_memories_without_vector_are_re_embedded(engine):
    ids = _store(engine, "one fact", "two fact", "three fact", "four fact")
    engine.lock_memory(ids[1])
    raw(engine, "UPDATE memories SET embedding = NULL WHERE id IN (?, ?)", (ids[0], ids[1]))
    before, during, _ = cycle(engine, "null_embedding", "null_embedding", "warn", locked=1)
    assert before["count"] == 2 and before["repairable"] == 1
    assert during["re_embedded"] == 1 and during["remaining"] == 1
    assert _lengths(engine)[ids[0]] == 2048 and _lengths(engine)[ids[1]] is None


def test_most_memories_without_vector_is_critical(engine):
    ids = _store(engine, "one fact", "two fact", "three fact")
    raw(engine, "UPDATE memories SET embedding = NULL WHERE id IN (?, ?)", (ids[0], ids[1]))
    cycle(engine, "null_embedding", "null_embedding", "critical")


def test_no_backend_means_vector_less_rows_are_expected(engine_none):
    engine_none.store("kai", "keyword only")
    issue = one(engine_none.check_health(checks=["null_embedding"]), "null_embedding")
    assert issue["severity"] == "info" and issue["expected"] is True and "needs_human_review" not in issue


def test_a_failing_backend_is_reported_and_nothing_is_re_embedded(engine, fake_embed):
    (a,) = _store(engine, "will lose its vector")
    raw(engine, "UPDATE memories SET embedding = NULL WHERE id = ?", (a,))
    fake_embed.fail = True
    report = engine.check_health(checks=["null_embedding", "embedding_backend"], fix=True)
    issue = one(report, "null_embedding")
    assert issue["repairable"] == 0 and "cannot re-embed" in issue["reason"] and "fixed" not in issue
    assert one(report, "embedding_backend_unavailable")["severity"] == "warn"


def test_episodes_without_vector_are_re_embedded(engine):
    ep = engine.archive_episode("kai", "a session about deploys")["episode_id"]
    raw(engine, "UPDATE episodes SET embedding = NULL WHERE id = ?", (ep,))
    _, during, _ = cycle(engine, "null_episode_embedding", "null_episode_embedding", "warn")
    assert during["re_embedded"] == 1 and _lengths(engine, "episodes")[ep] == 2048


def test_backend_answering_with_another_model_is_reported(engine):
    _store(engine, "recorded by the fake model")
    state = {"model": "other-model", "dim": 384, "pending": None}
    raw(engine, "UPDATE cpersona_meta SET value = ? WHERE key = 'vectors'", (json.dumps(state),))
    report = engine.check_health(checks=["embedding_backend", "embedding_dimension"], fix=True)
    issue = one(report, "embedding_model_mismatch")
    assert issue["recorded_model"] == "other-model" and issue["backend_dim"] == 512
    # a record the backend contradicts never makes the dimension repair drop vectors
    assert not find(report, "embedding_dimension_mismatch")
    assert _lengths(engine) == {1: 2048}


def test_resident_index_drift_is_repaired_by_reloading(engine):
    ids = _store(engine, "indexed one", "indexed two", "indexed three")
    engine.recall(RecallRequest("kai", "indexed", 5, False, "", None, ""))
    assert engine.resident.loaded() == {"memories": (3, 512), "episodes": (0, 512)}
    engine.resident.remove("memories", ids[0])  # the index lost a row the table still has
    before, during, _ = cycle(engine, "vector_index", "vector_index_drift", "warn")
    assert during["fixed"] == 1
    assert before["tables"] == [{"table": "memories", "index_rows": 2, "table_rows": 3, "index_dim": 512,
                                 "recorded_dim": 512}]
    engine.recall(RecallRequest("kai", "indexed", 5, False, "", None, ""))
    assert engine.resident.loaded()["memories"] == (3, 512)
    assert not find(engine.check_health(checks=["vector_index"]), "vector_index_drift")


def _sidecar(engine, **fields):
    path = sidecar.path_for(engine.settings.db_file)
    payload = {"format": 1, "embedding_model": "fake-hash-512", "embedding_dim": 512,
               "scoring_version": scoring_version(engine.settings), "agent_thresholds": {},
               "calibrated_at": "2026-01-01T00:00:00+00:00", **fields}
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


@pytest.mark.parametrize(("fields", "status"), [
    ({"embedding_model": "another-model"}, "stale_model"),
    ({"scoring_version": "old-scoring"}, "stale_scoring_version"),
])
def test_stale_calibration_file_is_reported(engine, fields, status):
    _store(engine, "calibrated row")
    _sidecar(engine, **fields)
    issue = one(engine.check_health(checks=["calibration_file"]), "calibration_stale")
    assert issue["severity"] == "warn" and issue["status"] == status


def test_corrupt_or_lost_calibration_file_is_reported(engine):
    _store(engine, "calibrated row")
    path = _sidecar(engine)
    assert not find(engine.check_health(checks=["calibration_file"]), "calibration_stale")
    path.write_text("{", encoding="utf-8")
    assert one(engine.check_health(checks=["calibration_file"]), "calibration_stale")["status"] == "corrupt"
    raw(engine, "INSERT OR REPLACE INTO cpersona_meta(key, value) VALUES ('calibration', '{\"sidecar\": \"x\"}')")
    path.unlink()
    assert one(engine.check_health(checks=["calibration_file"]), "calibration_stale")["status"] == "lost"


def _queue_embeds(engine, table: str, ids: list[int]) -> None:
    """Rows lose their vector and get an embed task, as after an import (the queue is off here)."""
    from cpersona.storage.tasks import embed_payload

    for i in ids:
        raw(engine, f"UPDATE {table} SET embedding = NULL WHERE id = ?", (i,))
        raw(engine, "INSERT INTO pending_memory_tasks(task_type, agent_id, project_id, payload) VALUES "
                    "('embed', 'kai', '', ?)", (embed_payload(table, i),))


def test_rows_the_running_queue_is_embedding_are_expected_and_left_to_it(engine, monkeypatch):
    ids = _store(engine, "one fact", "two fact", "three fact", "four fact")
    _queue_embeds(engine, "memories", ids[:3])  # 3 of 4 without a vector: critical, were no queue at work
    monkeypatch.setattr(engine.queue, "running", lambda: True)
    issue = one(engine.check_health(checks=["null_embedding"]), "null_embedding")
    assert issue["severity"] == "info" and issue["queued"] == 3 and "task queue is embedding" in issue["reason"]
    assert issue["repairable"] == 0
    fixed = one(engine.check_health(checks=["null_embedding"], fix=True), "null_embedding")
    assert "re_embedded" not in fixed and "fixed" not in fixed  # the queue's work is not done twice
    assert [_lengths(engine)[i] for i in ids] == [None, None, None, 2048]


def test_a_row_without_a_task_is_still_repaired_beside_queued_ones(engine, monkeypatch):
    ids = _store(engine, "one fact", "two fact", "three fact", "four fact")
    _queue_embeds(engine, "memories", ids[:1])
    raw(engine, "UPDATE memories SET embedding = NULL WHERE id = ?", (ids[1],))  # no task: nobody embeds it
    monkeypatch.setattr(engine.queue, "running", lambda: True)
    issue = one(engine.check_health(checks=["null_embedding"]), "null_embedding")
    assert issue["severity"] == "warn" and issue["count"] == 2 and issue["queued"] == 1 and issue["repairable"] == 1
    fixed = one(engine.check_health(checks=["null_embedding"], fix=True), "null_embedding")
    assert fixed["re_embedded"] == 1
    assert _lengths(engine)[ids[0]] is None and _lengths(engine)[ids[1]] == 2048


def test_queued_rows_with_no_queue_at_work_are_repaired_by_a_fix_run(engine):
    ids = _store(engine, "one fact", "two fact", "three fact")
    _queue_embeds(engine, "memories", ids[:2])
    issue = one(engine.check_health(checks=["null_embedding"]), "null_embedding")
    assert issue["severity"] == "critical" and issue["queued"] == 2 and issue["repairable"] == 2
    assert one(engine.check_health(checks=["null_embedding"], fix=True), "null_embedding")["re_embedded"] == 2


def test_queued_episodes_are_expected_while_the_queue_runs(engine, monkeypatch):
    ep = engine.archive_episode("kai", "a session about deploys")["episode_id"]
    _queue_embeds(engine, "episodes", [ep])
    monkeypatch.setattr(engine.queue, "running", lambda: True)
    issue = one(engine.check_health(checks=["null_episode_embedding"]), "null_episode_embedding")
    assert issue["severity"] == "info" and issue["queued"] == 1 and issue["repairable"] == 0
