"""Databases and exports written by the original CPersona releases (../shared/fixtures):
every one opens in place or imports with every row intact, and the original's own tables
are left exactly as they were. Each test copies its fixture to a temp folder first."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from cpersona.service.requests import RecallRequest
from cpersona.storage.dump import FIELDS

from conftest import db_rows, new_engine

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
RELEASES = ("original-2.5.4", "original-2.6.14")
pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures is absent")

#: Fields compared per table (the export's, without the row id).
COMPARED = {t: [name for name, _ in FIELDS[t] if name != "id"] for t in FIELDS}


def _copy(release: str, tmp_path: Path, name: str = "memory.db") -> Path:
    target = tmp_path / name
    shutil.copyfile(FIXTURES / release / "memory.db", target)
    target.chmod(0o600)
    return target


def _rows(path: Path, table: str) -> list[tuple]:
    cols = ", ".join(COMPARED[table])
    order = "agent_id, user_id" if table == "profiles" else "id"
    return db_rows(path, f"SELECT {cols} FROM {table} ORDER BY {order}")


def _objects(path: Path, exclude_prefix: str = "cpersona") -> dict[str, str]:
    """name → DDL of every schema object except ours."""
    return {n: sql for n, sql in db_rows(path, "SELECT name, sql FROM sqlite_master WHERE name NOT LIKE ?",
                                         (exclude_prefix + "%",))}


@pytest.mark.parametrize("release", RELEASES)
def test_the_original_database_opens_in_place_with_every_row(release, tmp_path):
    pristine = FIXTURES / release / "memory.db"
    path = _copy(release, tmp_path)
    before = {t: _rows(pristine, t) for t in COMPARED}
    eng = new_engine(path)
    try:
        assert {t: _rows(path, t) for t in COMPARED} == before  # opening changed no row
        res = eng.recall(RecallRequest("kai", "ERR_TIMEOUT_1750", 5))
        assert any("ERR_TIMEOUT_1750" in m["content"] for m in res["messages"])
        assert eng.get_profile("kai")["profile"].startswith("Backend engineer")
        stored = eng.store("kai", "Written by cpersona into the original's file.")
        assert stored["result"] == "stored"
    finally:
        eng.close()
    version = db_rows(pristine, "SELECT MAX(version) FROM schema_version")
    assert db_rows(path, "SELECT MAX(version) FROM schema_version") == version  # the original's stamp kept
    assert len(_rows(path, "memories")) == len(before["memories"]) + 1


def test_the_original_26_tables_are_kept_untouched(tmp_path):
    pristine = FIXTURES / "original-2.6.14" / "memory.db"
    path = _copy("original-2.6.14", tmp_path)
    eng = new_engine(path)
    try:
        eng.store("kai", "a new memory")
        eng.update_memory(2, "Deploys go out on Thursdays after the 15:00 review.")
        eng.delete_memory(5)
    finally:
        eng.close()
    old, new = _objects(pristine), _objects(path)
    theirs = set(old) - set(_objects(FIXTURES / "original-2.5.4" / "memory.db"))  # what 2.6 added to v13
    assert len(theirs) > 40  # entities, relations, record blocks, folders, change logs and their triggers
    assert {n: new.get(n) for n in theirs} == {n: old[n] for n in theirs}
    for table in ("entities", "relations", "record_blocks", "folders", "block_log_clock", "vector_log_clock"):
        assert db_rows(path, f"SELECT * FROM {table}") == db_rows(pristine, f"SELECT * FROM {table}")
    assert [r[1] for r in db_rows(path, "PRAGMA table_info(memories)")] == \
        [r[1] for r in db_rows(pristine, "PRAGMA table_info(memories)")]  # embedding_model column kept in place


def test_the_original_25_file_keeps_the_v13_schema_the_original_checks(tmp_path):
    """What the original 2.5.4 reads when it opens a file: MAX(version) = 13, the v13 tables
    and columns, the 13 canonical indexes and triggers with the same DDL (whitespace-
    normalised, as its schema_objects check compares them). Ours is only additive."""
    pristine = FIXTURES / "original-2.5.4" / "memory.db"
    path = _copy("original-2.5.4", tmp_path)
    eng = new_engine(path)
    try:
        eng.store("kai", "ours", msg_id="ours-1")
        eng.archive_episode("kai", "an episode of ours")
        eng.import_memories(str(FIXTURES / "original-2.6.14" / "export-mika.jsonl"), "mika2", confined=False)
    finally:
        eng.close()

    def norm(sql: str | None) -> str:
        return " ".join((sql or "").replace("IF NOT EXISTS ", "").split()).lower()

    def objects(db: Path) -> dict[str, str]:  # indexes, triggers, FTS5 tables
        return dict(db_rows(db, "SELECT name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') "
                                "OR sql LIKE 'CREATE VIRTUAL TABLE%'"))

    old, new = objects(pristine), objects(path)
    assert len(old) >= 13
    assert {n: norm(new.get(n)) for n in old} == {n: norm(sql) for n, sql in old.items()}
    assert db_rows(path, "SELECT MAX(version) FROM schema_version") == [(13,)]
    for table in ("memories", "episodes", "profiles", "pending_memory_tasks"):
        theirs = [r[1:] for r in db_rows(pristine, f"PRAGMA table_info({table})")]
        ours = [r[1:] for r in db_rows(path, f"PRAGMA table_info({table})")]
        assert ours[: len(theirs)] == theirs  # same columns in the same order; ours appended with defaults
        assert all(r[2] == 0 or r[3] is not None for r in ours[len(theirs):])  # added columns: nullable or defaulted
    # the original's own statements still work on the file (its column lists, FTS5 trigram MATCH)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO memories (agent_id, project_id, msg_id, content, source, timestamp, metadata, "
                     "embedding, channel) VALUES ('kai', '', 'orig-1', 'the original writes again', '{}', '', '{}', "
                     "NULL, '')")
        conn.execute("INSERT INTO pending_memory_tasks (task_type, agent_id, payload) VALUES ('update_profile', "
                     "'kai', '{}')")
    assert conn.execute("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH '\"original\"'").fetchone()[0] == 1
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


@pytest.mark.parametrize("release", RELEASES)
def test_import_from_db_reads_every_row(release, tmp_path, make_engine):
    pristine = FIXTURES / release / "memory.db"
    eng = make_engine("new.db")
    res = eng.import_memories(str(pristine), confined=False)  # read-only: the fixture folder is not writable
    assert res["ok"] and (res["imported_memories"], res["imported_episodes"], res["profiles_updated"]) == (8, 2, 1)
    path = Path(eng.settings.db_path)
    for table in COMPARED:
        assert sorted(_rows(path, table)) == sorted(_rows(pristine, table)), table
    again = eng.import_memories(str(pristine), confined=False)
    assert (again["imported_memories"], again["imported_episodes"], again["profile_updated"]) == (0, 0, False)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("agent", ["kai", "mika"])
def test_original_exports_import_with_every_field(release, agent, tmp_path, make_engine):
    source = tmp_path / f"export-{agent}.jsonl"
    shutil.copyfile(FIXTURES / release / f"export-{agent}.jsonl", source)
    eng = make_engine("imp.db")
    res = eng.import_memories(str(source), confined=False)
    lines = _lines(source)
    want = {k: sum(1 for x in lines if x["_type"] == k) for k in ("memory", "episode", "profile")}
    assert res["ok"] and res["format"] == lines[0]["version"]
    assert (res["imported_memories"], res["imported_episodes"], res["profiles_updated"]) == \
        (want["memory"], want["episode"], want["profile"])
    out = tmp_path / "again.jsonl"
    assert eng.export_memories(agent, str(out), confined=False)["ok"]
    strip = ("id", "exported_at", "version", "exporter", "entity_count", "mention_count", "relation_count")
    assert [{k: v for k, v in x.items() if k not in strip} for x in _lines(out)] == \
        [{k: v for k, v in x.items() if k not in strip} for x in lines]
    assert eng.import_memories(str(source), confined=False)["imported_memories"] == 0  # a re-import adds nothing
