"""The check_health run: names, the report's shape, the pause, crashing checks and
repairs, and a fix waiting for another process's write lock."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from cpersona.errors import InvalidArgument
from cpersona.health import NAMES, runner
from cpersona.storage.repairs import RepairRepo

from health_helpers import add_memory, find, memory, one, rows

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


def test_a_clean_store_is_healthy_and_every_check_ran(engine_none):
    engine_none.store("kai", "a fact", source={"type": "User", "id": "u1", "name": "Ann"})
    engine_none.update_profile("kai", "a profile")
    report = engine_none.check_health()
    assert report["status"] == "healthy" and report["severity_summary"] == {"critical": 0, "warn": 0, "info": 1}
    assert [i["type"] for i in report["issues"]] == ["null_embedding"]  # mode none: expected, info
    assert report["checks_run"] == list(NAMES) and len(NAMES) == 33 and NAMES[:3] == (
        "memory_annotation", "discord_mention", "oversized_content")
    assert report["fixed"] is False and report["total_memories"] == 1
    stats = report["stats"]
    assert stats["memories"] == 1 and stats["profiles"] == 1 and stats["axes"]["project_id"] == {"(global)": 1}
    assert "healthy" not in report  # the original removed its boolean; status is the answer


def test_unknown_check_names_are_refused_with_the_valid_ones(engine_none):
    out = engine_none.check_health(checks=["sqlite_integrity", "no_such_check"])
    assert out["ok"] is False and out["unknown_checks"] == ["no_such_check"] and "sqlite_integrity" in out["valid_checks"]


def test_issue_types_are_accepted_as_check_names(engine_none):
    assert engine_none.check_health(checks=["embedding_dimension_mismatch"])["checks_run"] == ["embedding_dimension"]


@pytest.mark.parametrize(("args", "argument"), [({"fix": "yes"}, "fix"), ({"agent_id": 3}, "agent_id"),
                                                 ({"checks": "sqlite_integrity"}, "checks")])
def test_arguments_of_the_wrong_type_are_named(engine_none, args, argument):
    with pytest.raises(InvalidArgument, match=argument):
        engine_none.check_health(**args)


@pytest.mark.parametrize("tool", ["check_health", "deep_check"])
@pytest.mark.parametrize(("checks", "rule"), [(["c" * 100_000] * 20, r"^checks\[0\]: is 100000 characters; the limit is 64"),
                                              (["stale_profile"] * 101, r"^checks: has 101 items; the limit is"),
                                              (["a\x00"], r"^checks\[0\]: must not contain NUL")])
def test_check_names_are_bounded_not_echoed_back_in_megabytes(engine_none, tool, checks, rule):
    args = {"agent_id": "a", "checks": checks}
    with pytest.raises(InvalidArgument, match=rule) as raised:
        getattr(engine_none, tool)(**args)
    assert len(str(raised.value)) < 200


@pytest.mark.parametrize("tool", ["check_health", "deep_check"])
@pytest.mark.parametrize(("agent_id", "rule"), [("a\x00b", "NUL"), ("x" * 513, "the limit is 512")])
def test_an_agent_id_no_other_tool_accepts_is_refused_not_reported_healthy(engine_none, tool, agent_id, rule):
    with pytest.raises(InvalidArgument, match=f"^agent_id: .*{rule}"):
        getattr(engine_none, tool)(agent_id)


def test_the_pause_turns_a_fix_into_a_report(engine_none):
    bad = add_memory(engine_none, "<@1> hello")
    engine_none.pause_persistence(60)
    out = engine_none.check_health(fix=True, checks=["discord_mention"])
    assert out["fixed"] is False and out["repairs_skipped"] is True and "paused" in out["repairs_skip_reason"]
    deep = engine_none.deep_check("kai", fix=True)
    assert deep["fixed"] is False and deep["repairs_skipped"] is True
    assert memory(engine_none, bad)[4] == "<@1> hello"
    engine_none.resume_persistence()
    assert engine_none.check_health(fix=True, checks=["discord_mention"])["fixed"] is True
    assert memory(engine_none, bad)[4] == "hello"


def test_a_crashing_check_is_reported_and_the_others_still_run(engine_none, monkeypatch):
    add_memory(engine_none, "  ")

    def broken(self, agent):
        raise RuntimeError("boom")

    monkeypatch.setattr(RepairRepo, "duplicate_rows", broken)
    report = engine_none.check_health(checks=["duplicate_content", "empty_content"])
    crash = [i for i in report["issues"] if i["type"] == "check_crashed"]
    assert [c["check_name"] for c in crash] == ["duplicate_content"] and crash[0]["severity"] == "warn"
    assert "RuntimeError: boom" in crash[0]["detail"]
    assert one(report, "empty_content")["count"] == 1 and report["status"] == "degraded"


@pytest.mark.sqlite_only("drives SQLite's file lock or its error types")
def test_a_failing_repair_is_undone_and_the_others_are_kept(engine_none, monkeypatch):
    mention = add_memory(engine_none, "<@1> keep me")
    blank = add_memory(engine_none, " ")
    real = RepairRepo.rewrite_memory

    def half_then_fail(self, memory_id, content):
        real(self, memory_id, content)
        raise RuntimeError("disk full")

    monkeypatch.setattr(RepairRepo, "rewrite_memory", half_then_fail)
    out = engine_none.check_health(fix=True, checks=["discord_mention", "empty_content"])
    assert one(out, "discord_mention")["fix_error"] == "RuntimeError: disk full"
    assert one(out, "empty_content")["fixed"] == 1
    assert memory(engine_none, mention)[4] == "<@1> keep me"  # the half-done rewrite was rolled back
    assert memory(engine_none, blank) is None
    # discord_mention is an info finding; a repair that failed is not: the run is not healthy
    assert one(out, "discord_mention")["severity"] == "warn"
    assert out["status"] == "degraded" and out["severity_summary"]["warn"] == 1
    report = engine_none.check_health(checks=["discord_mention"])  # a plain report: the finding as it is
    assert one(report, "discord_mention")["severity"] == "info" and report["status"] == "healthy"


def test_severity_summary_describes_what_is_left_after_the_fix(engine_none):
    add_memory(engine_none, " ")
    add_memory(engine_none, "{}", metadata="{bad")
    out = engine_none.check_health(fix=True, checks=["empty_content", "invalid_json"])
    assert [i["type"] for i in out["issues"]] == ["invalid_json", "empty_content"]  # registry order
    assert out["severity_summary"]["warn"] == 0 and out["status"] == "healthy"


def _hold_write_lock(path: str, seconds: float, ready: threading.Event) -> None:
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO memories(agent_id, content, timestamp) VALUES ('other', 'from another process', '')")
    ready.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def _fix_while_locked(engine, seconds: float) -> dict:
    """check_health(fix) of discord_mention while another connection holds the write lock
    for `seconds` (as another process writing the file would)."""
    ready = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(engine.db.path, seconds, ready))
    holder.start()
    ready.wait(10)
    try:
        return engine.check_health(fix=True, checks=["discord_mention"])
    finally:
        holder.join()


@pytest.mark.sqlite_only("drives SQLite's file lock or its error types")
def test_a_fix_waits_for_another_writer_and_leaves_a_sound_file(engine_none):
    bad = add_memory(engine_none, "<@1> waiting")
    out = _fix_while_locked(engine_none, 1.5)
    assert one(out, "discord_mention")["fixed"] == 1 and memory(engine_none, bad)[4] == "waiting"
    assert rows(engine_none, "SELECT content FROM memories WHERE agent_id = 'other'") == [("from another process",)]
    assert rows(engine_none, "PRAGMA integrity_check") == [("ok",)]


@pytest.mark.sqlite_only("drives SQLite's file lock or its error types")
def test_a_write_lock_never_released_means_nothing_is_repaired(engine_none, monkeypatch):
    monkeypatch.setattr(runner, "LOCK_ATTEMPTS", 1)
    bad = add_memory(engine_none, "<@1> blocked")
    out = _fix_while_locked(engine_none, 7)
    assert out["repairs_skipped"] is True and "write lock" in out["repairs_skip_reason"]
    assert out["fixed"] is False and memory(engine_none, bad)[4] == "<@1> blocked"
    assert find(out, "discord_mention")[0]["repairable"] == 1


@pytest.mark.sqlite_only("drives SQLite's file lock or its error types")
def test_a_write_lock_held_elsewhere_is_not_reported_as_a_damaged_index(make_engine):
    """FTS5's integrity-check runs as a write: a lock held past the busy timeout leaves the
    index unchecked (info), never 'fts_integrity_failure' (critical)."""
    engine = make_engine(embedding_mode="none", busy_timeout_ms=100)
    engine.store("kai", "a row to index")
    ready = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(engine.db.path, 1.0, ready))
    holder.start()
    ready.wait(10)
    try:
        report = engine.check_health(checks=["fts_integrity"])
    finally:
        holder.join()
    assert find(report, "fts_integrity_failure") == [] and report["status"] == "healthy"
    unchecked = find(report, "fts_not_checked")
    assert unchecked and all("write lock" in i["reason"] and i["severity"] == "info" for i in unchecked)


def test_every_registered_check_has_its_own_test():
    """Each check is exercised by name in a test of this folder (one test per check)."""
    from pathlib import Path

    texts = "".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("test_*.py")
                    if p.name != "test_runner.py")
    missing = [name for name in NAMES if f'"{name}"' not in texts]
    assert not missing, f"checks without a test: {missing}"
