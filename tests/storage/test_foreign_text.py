"""Rows another program wrote into the file with text columns that are not valid text: a
BLOB (bytes bound by a program), a TEXT value whose bytes are not UTF-8, a number. Every
read that hands rows to a caller reads them as text (U+FFFD for what is not UTF-8, as FTS5
reads them): one such row must not make every recall, listing or export of its agent fail
(storage/text_columns.py)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cpersona.service.requests import RecallRequest

from conftest import new_engine

FOREIGN = (
    ("blob", b"deploy blob \xff\xfe payment"),
    ("badtext", "CAST"),  # the bytes below, stored as TEXT
    ("number", 12345),
)
BAD_UTF8 = b"deploy \xc3\x28 invalid payment"


@pytest.fixture
def foreign_db(tmp_path):
    """A store with two ordinary memories, an episode and a profile, then rows written by
    another program whose text columns are a BLOB, non-UTF-8 TEXT and a number."""
    path = tmp_path / "f.db"
    eng = new_engine(path)
    eng.store("kai", "deploy note about the payment service")
    eng.store("kai", "the payment service runs on port 8080")
    eng.archive_episode("kai", "we planned the payment deploy", keywords="deploy")
    eng.update_profile("kai", "prefers short answers")
    eng.close()
    conn = sqlite3.connect(path)
    with conn:
        for msg_id, content in FOREIGN:
            value, cast = (BAD_UTF8, "CAST(? AS TEXT)") if content == "CAST" else (content, "?")
            conn.execute(f"INSERT INTO memories(agent_id, msg_id, content, source, timestamp, metadata) "
                         f"VALUES ('kai', ?, {cast}, ?, ?, ?)", (msg_id, value, b'{"id": 1}', b"2026-01-02", b"\x00"))
        conn.execute("INSERT INTO episodes(agent_id, summary, keywords) VALUES ('kai', ?, ?)",
                     (b"episode blob \xff payment", b"deploy"))
        conn.execute("UPDATE profiles SET content = ? WHERE agent_id = 'kai'", (b"profile \xff blob",))
    conn.close()
    return path


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False)  # raises on bytes: what an MCP answer would do


def test_recall_list_contents_and_export_answer_with_the_rows_as_text(foreign_db, tmp_path):
    eng = new_engine(foreign_db, export_dir=str(tmp_path))
    try:
        answer = eng.recall(RecallRequest("kai", "deploy payment", limit=20), preview_rows=True, verbose=False)
        texts = [m["content"] for m in answer["messages"]]
        _json(answer)
        assert "deploy blob \ufffd\ufffd payment" in texts and "deploy \ufffd( invalid payment" in texts
        assert any(t.startswith("[Episode] episode blob \ufffd payment") for t in texts)
        newest = eng.recall(RecallRequest("kai", ""), preview_rows=True, verbose=False)
        assert "12345" in [m["content"] for m in newest["messages"]]
        listed = eng.list_memories("kai", 100, None, "")
        _json(listed)
        assert {"deploy blob \ufffd\ufffd payment", "12345"} <= {m["content"] for m in listed["memories"]}
        assert {m["project_id"] for m in listed["memories"]} == {""}  # an empty text stays empty, not NULL
        _json(eng.list_episodes("kai", 50, None, ""))
        refs = [m["ref"] for m in answer["messages"]]
        _json(eng.get_contents("kai", refs))
        _json(eng.get_profile("kai"))
        exported = eng.export_memories("kai", "kai.jsonl")
        lines = (tmp_path / "kai.jsonl").read_text(encoding="utf-8").splitlines()
        assert exported["ok"] is not False and any("deploy blob \ufffd\ufffd payment" in line for line in lines)
    finally:
        eng.close()


def test_the_queue_embeds_foreign_rows_and_ends_their_tasks(foreign_db, fake_embed):
    """A row read as text (U+FFFD) must compare equal to itself when its vector is written,
    or its embed task finds it "changed" and runs again forever (a core spent for nothing)."""
    from conftest import db_rows, wait_until

    eng = new_engine(foreign_db, embedding_mode="http", embedding_url=fake_embed.url, task_retry_delay=0.2)
    try:
        with eng.db.write() as s:
            for table in ("memories", "episodes"):
                for (row_id,) in s.conn.execute(f"SELECT id FROM {table} WHERE embedding IS NULL").fetchall():
                    s.tasks.enqueue_embed(table, row_id, "kai", "")
        eng.queue.wake()
        assert wait_until(lambda: eng.queue.pending() == 0, timeout=30), eng.queue.status()
        assert db_rows(foreign_db, "SELECT COUNT(*) FROM memories WHERE embedding IS NULL") == [(0,)]
        assert db_rows(foreign_db, "SELECT COUNT(*) FROM episodes WHERE embedding IS NULL") == [(0,)]
        assert eng.queue.status()["failed"] == 0
    finally:
        eng.close()


def test_the_null_embedding_repair_embeds_foreign_rows(foreign_db, fake_embed):
    from conftest import db_rows

    eng = new_engine(foreign_db, embedding_mode="http", embedding_url=fake_embed.url, task_queue_enabled=False)
    try:
        out = eng.check_health(checks=["null_embedding"], fix=True)
        assert not [i for i in out["issues"] if i.get("fix_error")], out["issues"]
        assert db_rows(foreign_db, "SELECT COUNT(*) FROM memories WHERE embedding IS NULL") == [(0,)]
    finally:
        eng.close()
