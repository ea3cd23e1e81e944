"""Checks on the file and its schema: FTS5 index damage, schema version, dedup indexes,
drifted indexes and triggers, SQLite's quick_check, and files awaiting our migration."""

from __future__ import annotations

import os
import shutil

from cpersona.service.requests import RecallRequest

from health_helpers import add_memory, cycle, find, memory, one, raw, rows


def _recall_ids(engine, query: str) -> list[int]:
    out = engine.recall(RecallRequest("kai", query, 10, False, "", None, ""))
    return [m.get("id") for m in out["messages"]]


def test_corrupt_fts_shadow_table_is_rebuilt(engine_none):
    for i in range(30):
        engine_none.store("kai", f"fact number {i} about ERR_DISK_{i}")
    raw(engine_none, "UPDATE memories_fts_data SET block = x'00112233' WHERE id = "
        "(SELECT MAX(id) FROM memories_fts_data)")
    before, during, _ = cycle(engine_none, "fts_integrity", "fts_integrity_failure", "critical")
    assert before["table"] == "memories_fts" and "SQLITE_CORRUPT" in before["detail"]
    assert during["fixed"] is True
    assert _recall_ids(engine_none, "ERR_DISK_7")


def test_fts_index_out_of_step_with_its_table_is_rebuilt(engine_none):
    mid = engine_none.store("kai", "the cache warms at 06:00")["id"]
    raw(engine_none, "INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', ?, ?)",
        (mid, "the cache warms at 06:00"))
    cycle(engine_none, "fts_integrity", "fts_integrity_failure", "critical")
    assert rows(engine_none, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"cache\"'") == [(mid,)]


def test_word_index_out_of_step_with_memories_is_refilled(engine_none):
    kept = engine_none.store("kai", "the runners deploy nightly")["id"]
    gone = engine_none.store("kai", "an old note about backups")["id"]
    raw(engine_none, "DELETE FROM memories_words WHERE rowid = ?", (kept,))
    raw(engine_none, "DROP TRIGGER memories_words_ad")
    raw(engine_none, "DELETE FROM memories WHERE id = ?", (gone,))
    raw(engine_none, "CREATE TRIGGER memories_words_ad AFTER DELETE ON memories BEGIN "
        "DELETE FROM memories_words WHERE rowid = old.id; END")
    before, during, _ = cycle(engine_none, "fts_integrity", "fts_integrity_failure", "critical")
    assert before["table"] == "memories_words"
    assert "1 memories not indexed, 1 rows of deleted memories" in before["detail"]
    assert during["fixed"] is True
    assert rows(engine_none, "SELECT rowid FROM memories_words WHERE memories_words MATCH 'deploy'") == [(kept,)]
    assert rows(engine_none, "SELECT COUNT(*) FROM memories_words") == [(1,)]


def test_dropped_word_trigger_is_recreated(engine_none):
    mid = engine_none.store("kai", "a note that will be deleted")["id"]
    raw(engine_none, "DROP TRIGGER memories_words_ad")
    raw(engine_none, "DELETE FROM memories WHERE id = ?", (mid,))
    before, during, _ = cycle(engine_none, "schema_objects", "schema_object_drift", "critical")
    assert before["object"] == "memories_words_ad" and during["fts_rebuilt"] == "memories_words"
    assert rows(engine_none, "SELECT COUNT(*) FROM memories_words") == [(0,)]


def test_missing_fts_shadow_table_is_recreated(engine_none):
    engine_none.archive_episode("kai", "an episode before the damage")
    raw(engine_none, "DROP TABLE episodes_fts_docsize")
    _, during, _ = cycle(engine_none, "fts_integrity", "fts_integrity_failure", "critical")
    assert during["fixed"] is True
    engine_none.archive_episode("kai", "an episode after the repair")
    assert rows(engine_none, "SELECT COUNT(*) FROM episodes_fts WHERE episodes_fts MATCH '\"episode\"'") == [(2,)]


def test_fts_disabled_or_missing_is_reported_not_crashed(make_engine, tmp_path):
    off = make_engine("off.db", fts_enabled=False)
    report = off.check_health(checks=["fts_integrity"])
    assert report["issues"] == [] and "disabled" in report["skipped"][0]["reason"]
    on = make_engine("gone.db")
    raw(on, "DROP TABLE memories_fts")
    issue = one(on.check_health(checks=["fts_integrity"]), "fts_unavailable")
    assert issue["severity"] == "warn" and issue["tables"] == ["memories_fts"]


def test_schema_version_mismatch_is_critical_and_explained(engine_none):
    raw(engine_none, "INSERT INTO schema_version(version) VALUES (99)")
    issue = one(engine_none.check_health(checks=["schema_version"]), "schema_version_mismatch")
    assert issue["severity"] == "critical" and issue["found"] == 99 and "newer release" in issue["reason"]
    assert "repairable" not in issue  # no fix exists: a newer file is never rewritten


def test_missing_msg_id_index_is_recreated_after_blanking_older_duplicates(engine_none):
    raw(engine_none, "DROP INDEX idx_memories_dedup_msg_id")
    old = add_memory(engine_none, "first version", msg_id="m-1")
    new = add_memory(engine_none, "second version", msg_id="m-1")
    before, during, _ = cycle(engine_none, "dedup_msg_id_index", "dedup_msg_id_index_missing", "critical")
    assert before["colliding"] == 1 and during["fixed"] is True and during["msg_ids_blanked"] == 1
    assert memory(engine_none, old)[3] == "" and memory(engine_none, new)[3] == "m-1"


def test_locked_msg_id_duplicates_block_the_index_and_stay(engine_none):
    raw(engine_none, "DROP INDEX idx_memories_dedup_msg_id")
    old = add_memory(engine_none, "first version", msg_id="m-1", locked=1)
    add_memory(engine_none, "second version", msg_id="m-1")
    issue = one(engine_none.check_health(checks=["dedup_msg_id_index"], fix=True), "dedup_msg_id_index_missing")
    assert issue["severity"] == "critical" and issue["needs_human_review"] and "fixed" not in issue
    assert memory(engine_none, old)[3] == "m-1"


def test_dropped_declared_graph_trigger_is_recreated(engine_none):
    mid = engine_none.store("kai", "Aiko leads payments.", associations={"entities": [{"name": "Aiko"}]})["id"]
    raw(engine_none, "DROP TRIGGER associations_memories_ad")
    before, during, _ = cycle(engine_none, "schema_objects", "schema_object_drift", "critical")
    assert before["object"] == "associations_memories_ad" and "fts_rebuilt" not in during
    engine_none.delete_memory(mid)
    assert rows(engine_none, "SELECT COUNT(*) FROM entity_mentions") == [(0,)]  # the trigger takes its mention


def test_dropped_index_is_recreated(engine_none):
    raw(engine_none, "DROP INDEX idx_memories_agent")
    before, _, _ = cycle(engine_none, "schema_objects", "schema_object_drift", "warn")
    assert before["object"] == "idx_memories_agent" and before["problem"] == "missing"
    assert rows(engine_none, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'idx_memories_agent'") == [(1,)]


def test_changed_index_is_replaced(engine_none):
    raw(engine_none, "DROP INDEX idx_memories_isolation")
    raw(engine_none, "CREATE INDEX idx_memories_isolation ON memories(agent_id)")
    before, _, _ = cycle(engine_none, "schema_objects", "schema_object_drift", "warn")
    assert before["problem"] == "differs"


def test_dropped_fts_trigger_is_recreated_and_the_index_caught_up(engine_none):
    raw(engine_none, "DROP TRIGGER memories_fts_ai")
    missed = engine_none.store("kai", "written while the trigger was gone")["id"]
    before, during, _ = cycle(engine_none, "schema_objects", "schema_object_drift", "critical")
    assert before["object"] == "memories_fts_ai" and during["fts_rebuilt"] == "memories_fts"
    assert rows(engine_none, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"trigger\"'") == [(missed,)]


def test_missing_content_unique_index_removes_exact_repeats_first(engine_none):
    raw(engine_none, "DROP INDEX idx_memories_dedup_content")
    keep = add_memory(engine_none, "said twice")
    extra = add_memory(engine_none, "said twice")
    before, during, _ = cycle(engine_none, "schema_objects", "schema_object_drift", "critical")
    assert before["duplicates"] == 1 and during["duplicates_deleted"] == 1
    assert memory(engine_none, keep) is not None and memory(engine_none, extra) is None


def test_formatting_differences_are_not_drift(engine_none):
    raw(engine_none, "DROP INDEX idx_memories_agent")
    raw(engine_none, 'CREATE INDEX "idx_memories_agent"\n    ON memories( agent_id ,  created_at DESC )')
    assert not find(engine_none.check_health(checks=["schema_objects"]), "schema_object_drift")


def test_quick_check_failure_is_critical(engine_none, tmp_path):
    for i in range(400):
        engine_none.store("kai", f"memory number {i} " + "x" * 200)
    path = engine_none.db.path
    engine_none.close()
    damaged = tmp_path / "damaged.db"
    shutil.copy(path, damaged)
    data = bytearray(damaged.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
    damaged.write_bytes(data)
    assert os.path.getsize(damaged) == len(data)
    from conftest import new_engine

    engine = new_engine(damaged, startup_integrity_check=False)
    try:
        issue = one(engine.check_health(checks=["sqlite_integrity"]), "sqlite_integrity")
        assert issue["severity"] == "critical" and issue["messages"] and "restore a backup" in issue["hint"]
    finally:
        engine.close()


def test_unmigrated_file_of_another_release_is_reported(engine_none):
    raw(engine_none, "DROP TABLE cpersona_meta")
    raw(engine_none, "DROP INDEX idx_pending_tasks_embed")
    issue = one(engine_none.check_health(checks=["migration_pending", "schema_objects"]), "migration_pending")
    assert issue["severity"] == "info" and issue["missing"] == ["cpersona_meta", "idx_pending_tasks_embed"]


def test_a_report_stops_the_fts_check_before_writers_would_wait(engine_none, monkeypatch):
    from cpersona.health import runner

    for i in range(300):
        engine_none.store("kai", f"row number {i} with some searchable words")
    monkeypatch.setattr(runner, "REPORT_LOCK_LIMIT", 0.0)
    report = engine_none.check_health(checks=["fts_integrity"])
    stopped = find(report, "fts_not_checked")
    assert [i["table"] for i in stopped] == ["memories_fts", "episodes_fts", "memories_words"][:len(stopped)] and stopped
    assert stopped[0]["severity"] == "info" and "quiet moment" in stopped[0]["hint"]
    assert report["status"] == "healthy"
    # a fix run is asked for by the operator: it checks without a limit
    assert engine_none.check_health(checks=["fts_integrity"], fix=True)["issues"] == []
