"""A damaged database file: the engine still opens it (read-only when it cannot even be
migrated), says that it is damaged, and check_health reports it — never a crash."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from pathlib import Path

import pytest
from cpersona.errors import StorageError

from conftest import new_engine, wait_until
from health_helpers import one


def build(path: Path, rows: int = 400) -> Path:
    """A real store of `rows` memories, checkpointed into the main file."""
    engine = new_engine(path, startup_integrity_check=False)
    for i in range(rows):
        engine.store("kai", f"memory number {i} about topic {i % 17} " + "x" * 200)
    engine.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def flip_middle(path: Path, n: int = 64) -> None:
    """Invert `n` bytes in the middle of the file (a bad sector, a torn copy)."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + n] = bytes(b ^ 0xFF for b in data[middle:middle + n])
    path.write_bytes(data)


def break_page_of(path: Path, table: str) -> None:
    """Overwrite the b-tree page header of `table`'s root page."""
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start:start + 12] = b"\xff" * 12
    path.write_bytes(data)


@pytest.fixture(scope="module")
def clean_store(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("damage") / "clean.db")


def test_flipped_bytes_are_reported_critical(clean_store, tmp_path):
    damaged = tmp_path / "flipped.db"
    shutil.copy(clean_store, damaged)
    flip_middle(damaged)
    engine = new_engine(damaged, startup_integrity_check=False)
    try:
        report = engine.check_health()
        issue = one(report, "sqlite_integrity")
        assert issue["severity"] == "critical" and report["status"] == "unhealthy"
        assert all(i["type"] != "check_crashed" or i["severity"] == "warn" for i in report["issues"])
    finally:
        engine.close()


def test_the_start_up_check_logs_the_damage(clean_store, tmp_path, caplog):
    damaged = tmp_path / "flipped.db"
    shutil.copy(clean_store, damaged)
    flip_middle(damaged)
    with caplog.at_level(logging.ERROR, logger="cpersona.storage.failures"):
        engine = new_engine(damaged)
        try:
            assert wait_until(lambda: bool(engine.damage), timeout=30)
            assert "is damaged" in caplog.text and "checkup" in caplog.text
            assert engine.check_health(checks=["sqlite_integrity"])["database_damage"] == engine.damage
        finally:
            engine.close()


def test_a_file_too_damaged_to_migrate_is_served_read_only(clean_store, tmp_path):
    damaged = tmp_path / "unmigratable.db"
    shutil.copy(clean_store, damaged)
    break_page_of(damaged, "schema_version")
    engine = new_engine(damaged, startup_integrity_check=False)
    try:
        assert engine.db.read_only and "damaged" in engine.damage
        report = engine.check_health(fix=True)
        assert report["fixed"] is False and "read-only" in report["repairs_skip_reason"]
        assert one(report, "sqlite_integrity")["severity"] == "critical"
        with pytest.raises(StorageError, match="read-only"):
            engine.store("kai", "cannot be written")
        assert engine.list_memories("kai", limit=5)["count"] == 5  # what can be read is still served
    finally:
        engine.close()
