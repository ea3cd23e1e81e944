"""Several servers opening one file at the same moment (a host opening several windows):
every one starts, the migration runs once under one exclusive lock, and every write lands.

Long-lived worker processes (real processes: separate connections, locks and SQLite
caches) are told to open a file the instant a "go" file appears, after a drawn delay;
hypothesis draws how many open it, their delays, whether each has FTS enabled, and what
the file holds first (nothing, an empty file, a file of the original CPersona, a file of
ours left half-migrated)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpersona.storage import migration
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import db_rows, new_engine

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
WORKERS = 4

#: One worker: reads a JSON job per line, waits for the go file, sleeps its delay, opens the
#: file with an Engine, stores one memory, answers {"ok": true} or {"error": "..."}.
WORKER = r"""
import json, os, sys, time, traceback
from cpersona.config import Settings
from cpersona.service.engine import Engine
for line in sys.stdin:
    job = json.loads(line)
    while not os.path.exists(job["go"]):
        time.sleep(0.0005)
    time.sleep(job["delay"])
    try:
        eng = Engine(Settings.from_env({}, db_path=job["path"], embedding_mode="none", fts_enabled=job["fts"]),
                     start_background=False)
        try:
            out = eng.store("kai", job["text"])
        finally:
            eng.close()
        answer = {"ok": out.get("result") == "stored", "out": out}
    except BaseException as err:
        answer = {"error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()}
    print(json.dumps(answer), flush=True)
"""


@pytest.fixture(scope="module")
def workers():
    procs = [subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(WORKERS)]
    yield procs
    for proc in procs:
        proc.stdin.close()
        proc.wait(30)


def _half_migrated(path: Path) -> None:
    """A file of ours as an interrupted older migration could leave it: a later column, an
    index, the FTS triggers and the version stamp missing."""
    eng = new_engine(path)
    eng.store("kai", "stored before the upgrade")
    eng.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX idx_memories_isolation")
    conn.execute("ALTER TABLE pending_memory_tasks DROP COLUMN not_before")
    for name in ("memories_fts_ai", "memories_fts_au", "episodes_ai"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DELETE FROM schema_version")
    conn.commit()
    conn.close()


def _prepare(kind: str, path: Path) -> int:
    """Make the starting file; returns the memories it already holds."""
    if kind == "empty file":
        path.write_bytes(b"")
    elif kind.startswith("original"):
        fixture = FIXTURES / f"original-{kind.split()[1]}" / "memory.db"
        if not fixture.exists():
            pytest.skip(f"{fixture} is absent")
        shutil.copy(fixture, path)
    elif kind == "half-migrated":
        _half_migrated(path)
    return db_rows(path, "SELECT COUNT(*) FROM memories")[0][0] if path.exists() and path.stat().st_size else 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    starts=st.lists(st.tuples(st.floats(0, 0.02), st.booleans() | st.just(True)), min_size=2, max_size=WORKERS),
    kind=st.sampled_from(["fresh", "empty file", "original 2.5.4", "half-migrated"]),
)
def test_servers_starting_together_on_one_file_all_start_and_store(workers, tmp_path_factory, starts, kind):
    folder = tmp_path_factory.mktemp("together")
    path, go = folder / "memory.db", folder / "go"
    before = _prepare(kind, path)
    for i, (delay, fts) in enumerate(starts):
        job = {"path": str(path), "go": str(go), "delay": delay, "fts": fts, "text": f"window {i} opened the file"}
        workers[i].stdin.write(json.dumps(job) + "\n")
        workers[i].stdin.flush()
    time.sleep(0.05)
    go.touch()
    answers = [json.loads(workers[i].stdout.readline()) for i in range(len(starts))]
    assert all(a.get("ok") for a in answers), answers

    # Every write landed; a final open with FTS leaves the file up to date and its index whole.
    assert db_rows(path, "SELECT COUNT(*) FROM memories")[0][0] == before + len(starts)
    eng = new_engine(path)
    try:
        assert migration.up_to_date(eng.db.reader(), True)
        for i in range(len(starts)):
            found = eng.recall(_request(f"window {i} opened"))["messages"]
            assert any(m["content"] == f"window {i} opened the file" for m in found), (i, found)
    finally:
        eng.close()
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def _request(query: str):
    from cpersona.service.requests import RecallRequest

    return RecallRequest(agent_id="kai", query=query)
