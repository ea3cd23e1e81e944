"""The word index (`memories_words`, storage/schema.py WORD_TABLES): backfilled when a file
is first opened, kept in step by our writes, and harmless to the original CPersona, which
writes the same file without knowing the table (its writes are plain SQL on `memories`)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from cpersona.storage.db import Database
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


def test_rows_another_program_wrote_with_odd_ids_or_bytes_are_indexed_and_the_store_opens(original_db):
    """Ids ≤ 0 (SQLite allows them) are indexed too, and content written as a BLOB or as bytes
    that are not UTF-8 is read with U+FFFD instead of keeping the store from opening."""
    Database(str(original_db)).close()
    conn = sqlite3.connect(original_db)
    with conn:
        conn.execute("INSERT INTO memories(id, agent_id, content, timestamp) VALUES (-5, 'kai', 'negative id', '')")
        conn.execute("INSERT INTO memories(agent_id, content, timestamp) VALUES ('kai', ?, '')", (b"blob \xff",))
        conn.execute("INSERT INTO memories(agent_id, content, timestamp) VALUES ('kai', CAST(? AS TEXT), '')",
                     (b"text \xfe",))
    conn.close()
    Database(str(original_db)).close()
    held = words(original_db)
    assert held[-5] == index_form("negative id")
    assert {index_form("blob \ufffd"), index_form("text \ufffd")} <= set(held.values())


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


# ------------------------------------------------- the word form, on both backends
def test_the_word_index_ranks_the_whole_date_and_identifier_first(db):
    """A date in another notation (2024-01-07 ↔ 2024年1月7日) and an identifier in full
    (`ERR_DISK_9755`) are one token each, rarer than any of their parts: the row holding the
    whole one is the word index's best match, above rows that share only parts."""
    from cpersona.storage.records import MemoryDraft
    from cpersona.storage.scope import Scope
    from cpersona.util.text import match_expression
    from cpersona.util.words import query_terms

    texts = ["Deploy of search-indexer failed on 2024-01-17 with HTTP 429.",
             "Deploy of search-indexer failed on 2024-11-07 with HTTP 503.",
             "2024年1月7日にsearch-indexerのデプロイが失敗した。",
             "ERR_DISK_9756 on the billing host, fixed by a restart.",
             "ERR_NET_9755 on the billing host, a flaky switch.",
             "The billing host had ERR_DISK_9755: the volume was full."]
    filler = [f"status note of 2024-01-{d:02d} and 2024-{d:02d}-07: err, disk and net checks passed" for d in range(1, 13)]
    with db.write() as s:
        for text in texts + filler:
            s.memories.insert(MemoryDraft("a", "", "", "", text, "{}", "2024", "{}"), None)
    for query, best in [("What happened with search-indexer on 2024-01-07?", texts[2]),
                        ("What was the root cause of ERR_DISK_9755?", texts[5])]:
        with db.read() as s:
            hits = s.search.memories_words(match_expression(query_terms(query)), Scope("a"), "", 10)
        assert hits[0][0].content == best, [r.content for r, _ in hits]


OLD_FORM = "indexerで old form"  # what an older release stored: the Latin part unstemmed


def _age_the_index(where: dict[str, str]) -> None:
    """Make the stored index look written by an older release: other tokens, no form record."""
    if "db_path" in where:
        conn = sqlite3.connect(where["db_path"])
        with conn:
            conn.execute("UPDATE memories_words SET body = ?", (OLD_FORM,))
            conn.execute("DELETE FROM cpersona_meta WHERE key = 'word_form'")
        conn.close()
        return
    import psycopg

    with psycopg.connect(where["db_url"]) as conn:
        conn.execute("DELETE FROM memories_word_postings")
        conn.execute("INSERT INTO memories_word_postings(term, id, tf) SELECT 'indexerで', id, 1 FROM memories_words")
        conn.execute("DELETE FROM cpersona_meta WHERE key = 'word_form'")


def _stored_terms(where: dict[str, str]) -> dict[int, list[str]]:
    if "db_path" in where:
        return {i: sorted(body.split()) for i, body in words(Path(where["db_path"])).items()}
    import psycopg

    with psycopg.connect(where["db_url"]) as conn:
        out: dict[int, list[str]] = {}
        for term, i, tf in conn.execute("SELECT term, id, tf FROM memories_word_postings ORDER BY term"):
            out.setdefault(i, []).extend([term] * tf)
        return {i: sorted(t) for i, t in out.items()}


def test_an_index_written_in_an_older_form_is_retokenised_at_open(where):
    from cpersona.storage.backend import open_url
    from cpersona.storage.records import MemoryDraft

    texts = ["2024年1月7日にsearch-indexerで障害があった", "ERR_DISK_9755 on the billing host", "plain words"]
    db = open_url(where.get("db_url") or where["db_path"])
    with db.write() as s:
        ids = [s.memories.insert(MemoryDraft("a", "", "", "", t, "{}", "2024", "{}"), None).id for t in texts]
    db.close()
    _age_the_index(where)
    assert all("indexerで" in terms for terms in _stored_terms(where).values())
    open_url(where.get("db_url") or where["db_path"]).close()
    assert _stored_terms(where) == {i: sorted(index_form(t).split()) for i, t in zip(ids, texts)}


def test_a_retokenisation_killed_midway_leaves_the_old_index_and_is_redone(tmp_path, monkeypatch):
    """The re-tokenisation runs inside the migration's one transaction: a process that dies
    in the middle (here: an error after the first batch) leaves the file as it was."""
    from cpersona.storage import migration, word_index

    path = tmp_path / "k.db"
    db = Database(str(path))
    with db.write() as s:
        from cpersona.storage.records import MemoryDraft

        for i in range(7):
            s.memories.insert(MemoryDraft("a", "", "", "", f"note {i} about search-indexerで", "{}", "", "{}"), None)
    db.close()
    _age_the_index({"db_path": str(path)})
    before = words(path)
    calls = []

    def dying(conn, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        real(conn, rows)

    real = word_index.put_many
    monkeypatch.setattr(migration, "WORD_BACKFILL_BATCH", 3)
    monkeypatch.setattr(word_index, "put_many", dying)
    with pytest.raises(KeyboardInterrupt):
        Database(str(path))
    assert words(path) == before and calls == [3, 3]
    assert pairs(path, "SELECT key, value FROM cpersona_meta WHERE key = 'word_form'") == {}
    monkeypatch.setattr(word_index, "put_many", real)
    Database(str(path)).close()
    assert words(path) == {i: index_form(c) for i, c in contents(path).items()}
