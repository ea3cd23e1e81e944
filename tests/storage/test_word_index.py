"""The word index (`memories_words`, storage/schema.py WORD_TABLES): backfilled when a file
is first opened, kept in step by our writes, and harmless to the original CPersona, which
writes the same file without knowing the table (its writes are plain SQL on `memories`)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from cpersona.storage import Database
from cpersona.util.words import index_form

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"


def pairs(path: Path, sql: str) -> dict[int, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute(sql))
    finally:
        conn.close()


def words(path: Path) -> dict[int, str]:
    return pairs(path, "SELECT rowid, body FROM memories_words")


def contents(path: Path) -> dict[int, str]:
    return pairs(path, "SELECT id, content FROM memories")


@pytest.fixture
def original_db(tmp_path) -> Path:
    src = FIXTURES / "original-2.5.4" / "memory.db"
    if not src.exists():
        pytest.skip("shared fixtures are not present")
    dst = tmp_path / "memory.db"
    shutil.copy(src, dst)
    return dst


def test_first_open_backfills_every_memory(original_db):
    Database(str(original_db)).close()
    assert words(original_db) == {i: index_form(c) for i, c in contents(original_db).items()}


def test_writes_of_a_program_without_the_word_index_succeed_and_are_indexed_at_the_next_open(original_db):
    Database(str(original_db)).close()
    # the original CPersona's statements: plain SQL, no knowledge of memories_words
    conn = sqlite3.connect(original_db)
    with conn:
        conn.execute("INSERT INTO memories(agent_id, content, timestamp) VALUES ('kai', 'Café Zürich notes', '')")
        first, second = [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY id LIMIT 2")]
        conn.execute("UPDATE memories SET content = 'rewritten by the original' WHERE id = ?", (first,))
        conn.execute("DELETE FROM memories WHERE id = ?", (second,))
    conn.close()
    assert second not in words(original_db)
    Database(str(original_db)).close()
    assert words(original_db) == {i: index_form(c) for i, c in contents(original_db).items()}


def test_our_writes_keep_the_word_index_in_step(tmp_path):
    from conftest import new_engine

    eng = new_engine(tmp_path / "w.db")
    mid = eng.store("a", "ＮＡＳ２ backups run nightly")["id"]
    eng.update_memory(mid, "the NAS moved to room 4")
    gone = eng.store("a", "temporary note")["id"]
    eng.delete_memory(gone)
    eng.close()
    assert words(tmp_path / "w.db") == {mid: index_form("the NAS moved to room 4")}


def test_import_merge_and_health_repairs_keep_the_word_index_in_step(tmp_path):
    """Every writer of memories.content, not only store/update: import, merge and the
    health repair that rewrites content (found by CI: the repaired row had no word row)."""
    from conftest import new_engine

    eng = new_engine(tmp_path / "w.db", export_dir=str(tmp_path))
    eng.store("a", "ＮＡＳ２ backups run nightly")
    exported = eng.export_memories("a", "a.jsonl")["path"]
    assert eng.import_memories(exported, target_agent_id="b")["imported_memories"] == 1
    assert eng.merge_memories("a", "c")["merged_memories"] == 1
    mention = eng.store("a", "deploy now")["id"]
    eng.close()
    conn = sqlite3.connect(tmp_path / "w.db")
    with conn:  # a mention written by another program (the health check's repair removes it)
        conn.execute("UPDATE memories SET content = '<@42> deploy now' WHERE id = ?", (mention,))
    conn.close()
    eng = new_engine(tmp_path / "w.db", export_dir=str(tmp_path))
    assert eng.check_health(checks=["discord_mention"], fix=True)["issues"][0]["fixed"] == 1
    report = eng.check_health(checks=["fts_integrity"])
    eng.close()
    assert not report["issues"], report["issues"]
    assert words(tmp_path / "w.db") == {i: index_form(c) for i, c in contents(tmp_path / "w.db").items()}
    assert len(words(tmp_path / "w.db")) == 4


@pytest.mark.parametrize("foreign", [
    "INSERT INTO memories(agent_id, content, timestamp) VALUES ('a', 'added elsewhere', '')",
    "UPDATE memories SET content = 'changed elsewhere' WHERE id = 2",
    "DELETE FROM memories WHERE id = 3; INSERT INTO memories(agent_id, content, timestamp) VALUES ('a', 'x y', '')",
    "DELETE FROM memories_words WHERE rowid = 3",  # the newest row lost its word row
])
def test_every_foreign_write_is_found_by_the_open_check(tmp_path, foreign):
    """The open-time check compares row counts first; each kind of write another
    program can make still leaves the two apart, so the next open indexes what lacks."""
    from conftest import new_engine

    db = tmp_path / "f.db"
    eng = new_engine(db)
    for text in ("first note", "second note", "third note"):
        eng.store("a", text)
    eng.close()
    conn = sqlite3.connect(db)
    with conn:
        conn.executescript(foreign)
    conn.close()
    assert words(db) != {i: index_form(c) for i, c in contents(db).items()}
    Database(str(db)).close()
    assert words(db) == {i: index_form(c) for i, c in contents(db).items()}
