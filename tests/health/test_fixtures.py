"""Databases written by the original CPersona releases (../shared/fixtures, copied first):
what check_health says about them before and after this server opens them, and why."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from cpersona.config import Settings
from cpersona.errors import SchemaTooNew
from cpersona.service.checkup import run_checkup

from conftest import new_engine
from health_helpers import one, rows

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures is not present")

#: What an original 2.5.4 file reports, and why each is expected:
#: null vectors — written in embedding mode none; episodes archived without history have no
#: start time (the original stored NULL); two of three agents never got a profile.
#: (its two episodes were archived without history: no span, which is no finding)
OPENED_2_5_4 = {"null_embedding", "null_episode_embedding", "missing_profile"}


def _copy(tmp_path: Path, release: str) -> Path:
    target = tmp_path / f"{release}.db"
    shutil.copy(FIXTURES / f"original-{release}" / "memory.db", target)
    target.chmod(0o644)
    return target


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _report(path: Path) -> dict:
    return run_checkup(Settings.from_env({}, db_path=str(path), embedding_mode="none"))


def test_original_2_5_4_before_opening_only_awaits_our_migration(tmp_path):
    path = _copy(tmp_path, "2.5.4")
    digest = _digest(path)
    report = _report(path)
    assert report["status"] == "healthy" and report["severity_summary"]["critical"] == 0
    assert {i["type"] for i in report["issues"]} == OPENED_2_5_4 | {"migration_pending"}
    pending = one(report, "migration_pending")
    assert pending["missing"] == ["pending_memory_tasks.status", "cpersona_meta", "memories_words",
                                  "idx_pending_tasks_embed"]
    assert _digest(path) == digest and sorted(p.name for p in tmp_path.iterdir()) == ["2.5.4.db"]


def test_original_2_5_4_after_opening_is_healthy_and_fixes_keep_the_locked_row(tmp_path):
    path = _copy(tmp_path, "2.5.4")
    locked_before = rows(path, "SELECT * FROM memories WHERE locked = 1")
    engine = new_engine(path)
    try:
        report = engine.check_health()
        assert report["status"] == "healthy" and report["total_memories"] == 8
        assert {i["type"] for i in report["issues"]} == OPENED_2_5_4
        assert one(report, "missing_profile")["agents"] == ["", "mika"]
        engine.check_health(fix=True)
        assert rows(path, "SELECT start_time, end_time FROM episodes") == [(None, None)] * 2  # no span made up
        assert {i["type"] for i in engine.check_health()["issues"]} == OPENED_2_5_4
    finally:
        engine.close()
    assert rows(path, "SELECT * FROM memories WHERE locked = 1") == locked_before


def test_original_2_6_14_opens_in_place_and_its_newer_stamp_is_no_finding(tmp_path):
    path = _copy(tmp_path, "2.6.14")
    digest = _digest(path)
    report = _report(path)
    assert not [i for i in report["issues"] if i["type"] == "schema_version_mismatch"]
    assert _digest(path) == digest  # a report-only checkup leaves the file as it is
    engine = new_engine(path)  # the original's 2.6 line is opened in place (storage/originals.py)
    engine.close()


def test_a_file_newer_than_every_known_release_is_a_critical_finding(tmp_path):
    path = _copy(tmp_path, "2.5.4")
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version(version) VALUES (99)")
    conn.commit()
    conn.close()
    report = _report(path)
    issue = one(report, "schema_version_mismatch")
    assert issue["severity"] == "critical" and issue["found"] == 99 and "newer release" in issue["reason"]
    with pytest.raises(SchemaTooNew):
        new_engine(path)
