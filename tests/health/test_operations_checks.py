"""Checks on how the store is operated: project ids, the task queue, profiles, the
operating-context file, the original's remote-vector setting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from health_helpers import add_memory, cycle, find, one, raw, rows

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


def _task(engine, task_type: str, payload: str, *, status: str = "pending", age: str = "-2 hours",
          error: str | None = None) -> int:
    amount, unit = age.split()
    created = datetime.now(UTC).replace(tzinfo=None) + timedelta(**{unit: float(amount)})  # SQLite's datetime('now', age)
    return raw(engine, "INSERT INTO pending_memory_tasks(task_type, agent_id, payload, status, last_error, created_at) "
               "VALUES (?, 'kai', ?, ?, ?, ?)", (task_type, payload, status, error, created.strftime("%Y-%m-%d %H:%M:%S")))


def test_project_ids_differing_only_in_spelling_are_reported(engine_none):
    engine_none.store("kai", "ops row", project_id="Ops")
    engine_none.store("kai", "other ops row", project_id="ops")
    engine_none.store("kai", "web row", project_id="web")
    issue = one(engine_none.check_health(checks=["axis_hygiene"]), "project_id_naming_drift")
    assert issue["severity"] == "warn" and issue["clusters"] == [["Ops", "ops"]]
    assert "repairable" not in issue  # renaming a project is a person's decision


def test_stale_queue_rows_that_can_never_run_are_deleted(make_engine):
    engine = make_engine(task_queue_enabled=False)
    embedded = add_memory(engine, "has a vector", embedding=b"\x00" * 16)
    waiting = add_memory(engine, "still needs one")
    legacy = _task(engine, "archive_episode", "{}")
    orphan = _task(engine, "embed", f'{{"table":"memories","id":{embedded}}}')
    gone = _task(engine, "embed", '{"table":"memories","id":99999}')
    kept = _task(engine, "embed", f'{{"table":"memories","id":{waiting}}}')
    _task(engine, "archive_episode", "{}", age="-5 minutes")  # not stale yet
    report = engine.check_health(checks=["stale_pending_tasks"])
    before = one(report, "stale_pending_tasks")
    assert before["severity"] == "warn" and before["count"] == 4 and before["repairable"] == 3
    assert before["waiting"] == 1 and "wait for the embedding backend" in before["hint"]
    during = one(engine.check_health(checks=["stale_pending_tasks"], fix=True), "stale_pending_tasks")
    assert during["deleted"] == 3 and during["kept_waiting"] == 1
    left_ids = {r[0] for r in rows(engine, "SELECT id FROM pending_memory_tasks")}
    assert kept in left_ids and not {legacy, orphan, gone} & left_ids
    after = one(engine.check_health(checks=["stale_pending_tasks"]), "stale_pending_tasks")
    assert after["repairable"] == 0 and after["severity"] == "info" and after["needs_human_review"]


def test_failed_queue_rows_are_requeued_or_deleted(http_engine_factory):
    engine = http_engine_factory(task_queue_enabled=False)
    waiting = add_memory(engine, "failed to embed once")
    retry = _task(engine, "embed", f'{{"table":"memories","id":{waiting}}}', status="failed", age="-1 minutes",
                  error="timeout")
    legacy = _task(engine, "update_profile", "{}", status="failed", age="-1 minutes", error="never summarises")
    before, during, _ = cycle(engine, "failed_tasks", "failed_tasks", "warn")
    assert before["count"] == 2 and before["samples"][0]["error"] == "timeout"
    assert during["requeued"] == 1 and during["deleted"] == 1
    assert rows(engine, "SELECT id, status, retries FROM pending_memory_tasks") == [(retry, "pending", 0)]
    assert legacy not in {r[0] for r in rows(engine, "SELECT id FROM pending_memory_tasks")}


def test_agents_without_profile_are_listed(engine_none):
    engine_none.store("kai", "a memory")
    engine_none.store("mika", "another memory")
    engine_none.update_profile("kai", "Backend engineer.")
    issue = one(engine_none.check_health(checks=["missing_profile"]), "missing_profile")
    assert issue["severity"] == "info" and issue["agents"] == ["mika"]


def test_remote_vector_setting_does_not_apply_here(engine_none):
    report = engine_none.check_health(checks=["vector_fallback_config"])
    assert report["issues"] == [] and "no remote vector mode" in report["skipped"][0]["reason"]


def test_unusable_operating_context_file_is_reported(make_engine, tmp_path):
    bad = tmp_path / "context.toml"
    bad.write_text("version = [", encoding="utf-8")
    engine = make_engine(operating_context_path=str(bad))
    issue = one(engine.check_health(checks=["operating_context_parse"]), "operating_context_parse_error")
    assert issue["severity"] == "warn" and "not valid TOML" in issue["error"]
    bad.write_text("version = 1\n", encoding="utf-8")
    assert not find(engine.check_health(checks=["operating_context_parse"]), "operating_context_parse_error")


def test_oversized_operating_context_summary_is_reported(make_engine, tmp_path):
    path = tmp_path / "context.toml"
    path.write_text('version = 1\n[instructions]\nsummary = "' + "s" * 3001 + '"\n', encoding="utf-8")
    engine = make_engine(operating_context_path=str(path))
    issue = one(engine.check_health(checks=["operating_context_size"]), "operating_context_summary_oversized")
    assert issue["severity"] == "info" and issue["length"] == 3001


def test_rows_waiting_in_the_queue_for_their_vector_are_counted(make_engine):
    """`queued` counts the vector-less rows that have a pending embed task (the SQL that
    matches a row to its task payload runs on both backends)."""
    engine = make_engine(task_queue_enabled=False)
    queued, failed, bare = (add_memory(engine, text) for text in ("queued row", "failed row", "no task row"))
    _task(engine, "embed", f'{{"table":"memories","id":{queued}}}')
    _task(engine, "embed", f'{{"table":"memories","id":{failed}}}', status="failed", error="boom")
    issue = one(engine.check_health(checks=["null_embedding"]), "null_embedding")
    assert issue["count"] == 3 and issue["queued"] == 1 and bare not in (queued, failed)
