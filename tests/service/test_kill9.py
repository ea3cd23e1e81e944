"""kill -9 in the middle of export, import, merge, backup or restore leaves no half file and
no half import: each operation runs in a child process that is killed (SIGKILL) once it is
observably mid-way (journal rows committed, a temp file or folder written, the restore's
WAL growing); then the files are checked — and a bulk write is undone by the next start."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import clean_env, db_rows, new_engine, wait_until

ROWS = 3000
DIM = 512
_CHILD = """
import sys
from cpersona.config import Settings
from cpersona.service import backups
from cpersona.service.engine import Engine
op, db, arg = sys.argv[1:4]
settings = Settings.from_env({}, db_path=db, embedding_mode="none")
if op in ("backup", "restore"):
    getattr(backups, op)(settings, arg)
else:
    eng = Engine(settings, start_background=False, model_authority=False)
    if op == "export":
        eng.export_memories("", arg, True, confined=False)
    elif op == "import":
        eng.import_memories(arg, confined=False)
    else:
        eng.merge_memories("src", "dst", mode="move")
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A database of ROWS memories of agent 'src', each with a vector of the recorded model."""
    path = tmp_path_factory.mktemp("kill9") / "template.db"
    new_engine(path).close()
    rng = np.random.default_rng(7)
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO memories(agent_id, content, timestamp, embedding) VALUES ('src', ?, '', ?)",
            [(f"memory {i} about harbour ferries, tides and timetables number {i * 7}",
              (rng.standard_normal(DIM).astype("<f4") / np.sqrt(DIM)).tobytes()) for i in range(ROWS)])
        conn.execute("INSERT INTO cpersona_meta(key, value) VALUES ('vectors', ?)",
                     (json.dumps({"model": "test-model", "dim": DIM, "pending": None}),))
    conn.close()
    return path


def _size(path: Path) -> int:
    """Bytes in `path`, 0 when it does not exist (a WAL comes and goes while we poll)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _copy(template: Path, tmp_path: Path, name: str = "live.db") -> Path:
    target = tmp_path / name
    shutil.copyfile(template, target)
    return target


def _counts(path: Path) -> tuple:
    return tuple(db_rows(path, f"SELECT agent_id, COUNT(*) FROM {t} GROUP BY 1 ORDER BY 1")
                 for t in ("memories", "episodes", "profiles"))


def _kill_when(op: str, db: Path, arg: Path, ready, timeout: float = 120.0) -> None:
    """Run `op` in a child; SIGKILL it as soon as `ready()` holds (it must still run then)."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, op, str(db), str(arg)], env=clean_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert proc.poll() is None, f"{op} ended before it could be killed mid-way: {proc.stderr.read()!r}"
            assert time.monotonic() < deadline, f"{op} never reached its mid-way point"
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


def _journal_rows(db: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05)
        try:
            return conn.execute("SELECT COUNT(*) FROM cpersona_bulk_rows").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_kill_during_import_leaves_no_half_import(tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join(json.dumps({"content": f"imported row {i} about tides", "agent_id": "imp"})
                                for i in range(ROWS)))
    db = tmp_path / "live.db"
    eng = new_engine(db)
    eng.store("keep", "a memory that was there before")
    eng.close()
    before = _counts(db)
    _kill_when("import", db, source, lambda: _journal_rows(db) > 200)
    assert db_rows(db, "SELECT COUNT(*) FROM memories WHERE agent_id = 'imp'")[0][0] > 0  # half of it is there
    eng = new_engine(db)  # the next start undoes the import of the killed process
    try:
        # the undo removes the rows, then (in its own transaction) the journal's record of the operation
        assert wait_until(lambda: _counts(db) == before
                          and db_rows(db, "SELECT COUNT(*) FROM cpersona_bulk_ops") == [(0,)], timeout=60)
        assert eng.import_memories(str(source), confined=False)["imported_memories"] == ROWS  # and it can run again
    finally:
        eng.close()


def test_kill_during_merge_leaves_no_half_merge(template, tmp_path):
    db = _copy(template, tmp_path)
    before = _counts(db)
    _kill_when("merge", db, tmp_path, lambda: _journal_rows(db) > 400)
    assert _counts(db) != before
    eng = new_engine(db)
    try:
        assert wait_until(lambda: _counts(db) == before, timeout=60)
    finally:
        eng.close()


def test_kill_during_export_leaves_no_half_file(template, tmp_path):
    db = _copy(template, tmp_path)
    out = tmp_path / "out" / "all.jsonl"
    _kill_when("export", db, out, lambda: any(out.parent.glob(".all.jsonl.tmp.*")))
    assert not out.exists()
    eng = new_engine(db)
    try:
        assert eng.export_memories("", str(out), True, confined=False)["memories"] == ROWS
        assert not list(out.parent.glob(".all.jsonl.tmp.*"))  # the dead process's temp file is gone too
    finally:
        eng.close()


def test_kill_during_backup_leaves_no_half_backup(template, tmp_path):
    db = _copy(template, tmp_path)
    dest = tmp_path / "backups" / "monday"
    _kill_when("backup", db, dest, lambda: any(p.is_file() for p in dest.parent.glob(".monday.partial.*/*")))
    assert not dest.exists()
    assert db_rows(db, "PRAGMA integrity_check") == [("ok",)]
    from cpersona.config import Settings
    from cpersona.service.backups import backup
    res = backup(Settings.from_env({}, db_path=str(db), embedding_mode="none"), dest)
    assert res["rows"]["memories"] == ROWS and not list(dest.parent.glob(".monday.partial.*"))


def test_kill_during_restore_leaves_the_old_or_the_new_database(template, tmp_path):
    from cpersona.config import Settings
    from cpersona.service.backups import backup

    db = _copy(template, tmp_path, "big.db")
    folder = tmp_path / "bk"
    backup(Settings.from_env({}, db_path=str(db), embedding_mode="none"), folder)
    live = tmp_path / "live" / "live.db"
    live.parent.mkdir()
    eng = new_engine(live)
    eng.store("small", "the small live database")
    eng.close()
    old, new = _counts(live), _counts(db)
    wal = Path(str(live) + "-wal")
    _kill_when("restore", live, folder, lambda: _size(wal) > 1_000_000)
    assert db_rows(live, "PRAGMA integrity_check") == [("ok",)]
    assert _counts(live) in (old, new)  # never a mix
    assert _counts(live) == old  # killed mid-copy: the transaction never committed
