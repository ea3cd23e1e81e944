"""Writes from outside an unfinished bulk operation (an import or merge killed mid-way, or
still running) are never undone by it: the write claims its row first (found by a break-it
pass: an update, a lock and a store answered "already stored" made while a killed import
waited for its undo were all removed by the undo; an update made during a merge "move" was
lost because the moved copy had been taken before it)."""

from __future__ import annotations

import pytest
from cpersona.service import bulkwrite

pytestmark = pytest.mark.both_backends


def _unfinished_import(eng, texts: list[str]) -> tuple[int, list[int]]:
    """Rows stored, then journaled as the inserts of an operation still in phase `writing`."""
    ids = [eng.store("imp", t)["id"] for t in texts]
    with eng.db.write() as s:
        op = s.journal.begin("import", "a process that was killed", {})
        for i in ids:
            s.journal.note(op, "insert", "memories", i)
    return op, ids


def _contents(eng) -> dict[int, tuple[str, int]]:
    rows = eng.list_memories(agent_id="imp", limit=100)["memories"]
    return {r["id"]: (r["content"], int(r["locked"])) for r in rows}


def test_rows_written_from_outside_survive_the_undo(make_engine):
    eng = make_engine(embedding_mode="none")
    op, (a, b, c, d) = _unfinished_import(eng, ["imported fact one", "imported fact two",
                                                "imported fact three", "imported fact four"])
    assert eng.update_memory(a, "imported fact one, corrected by the user")["ok"] is True
    assert eng.lock_memory(b)["ok"] is True
    assert eng.store("imp", "imported fact three") == {"ok": True, "result": "skipped",
                                                        "reason": "duplicate content", "id": c}
    removed = bulkwrite._undo(eng.db, op, lambda rows: None)
    assert removed == 1  # only the row nobody else wrote or vouched for
    left = _contents(eng)
    assert left[a][0] == "imported fact one, corrected by the user"
    assert left[b] == ("imported fact two", 1)
    assert left[c][0] == "imported fact three"
    assert d not in left


def test_a_profile_updated_during_an_import_is_not_put_back(make_engine):
    eng = make_engine(embedding_mode="none")
    eng.update_profile("imp", "old profile")
    with eng.db.write() as s:
        op = s.journal.begin("import", "a process that was killed", {})
    with eng.db.read() as s:
        pid = s.conn.execute("SELECT id FROM profiles WHERE agent_id = 'imp'").fetchone()[0]
    with eng.db.write() as s:
        s.journal.note(op, "profile", "profiles", pid, {"content": "older", "updated_at": "2020-01-01",
                                                        "project_id": ""})
    eng.update_profile("imp", "what the user said today")
    bulkwrite._undo(eng.db, op, lambda rows: None)
    assert eng.get_profile("imp")["profile"] == "what the user said today"


def test_a_write_to_a_row_being_moved_is_refused_not_lost(make_engine):
    eng = make_engine(embedding_mode="none")
    mid = eng.store("imp", "a fact a merge is moving")["id"]
    with eng.db.write() as s:
        op = s.journal.begin("merge", "a running merge", {})
        s.journal.note(op, "delete", "memories", mid)
    for res in (eng.update_memory(mid, "corrected"), eng.lock_memory(mid), eng.delete_memory(mid)):
        assert res["ok"] is False and "being moved by merge_memories" in res["error"]
    again = eng.store("imp", "a fact a merge is moving")
    assert again["ok"] is False and "being moved" in again["reason"]
    assert _contents(eng)[mid] == ("a fact a merge is moving", 0)
    eid = eng.archive_episode("imp", "a session a merge is moving")["episode_id"]
    with eng.db.write() as s:
        s.journal.note(op, "delete", "episodes", eid)
    gone = eng.delete_episode(eid)
    assert gone["ok"] is False and "episode" in gone["error"] and "being moved" in gone["error"]


def test_a_write_between_the_merge_snapshot_and_its_copy_is_carried(make_engine, monkeypatch):
    """The merge copies each row as it is when its chunk is written, not as the snapshot
    read it (found by a second break-it pass: updates, deletes and locks acknowledged after
    the snapshot were undone by the move)."""
    eng = make_engine(embedding_mode="none")
    ids = [eng.store("src", f"fact number {i}")["id"] for i in range(4)]
    real = bulkwrite.BulkRun.write

    def write(self, items, write_one, progress=None):
        assert eng.update_memory(ids[1], "fact number 1, corrected")["ok"] is True
        assert eng.delete_memory(ids[2])["ok"] is True
        assert eng.lock_memory(ids[3])["ok"] is True
        return real(self, items, write_one, progress)

    monkeypatch.setattr(bulkwrite.BulkRun, "write", write)
    res = eng.merge_memories("src", "dst", mode="move")
    assert res["ok"] is True and res["merged_memories"] == 3
    moved = {r["content"]: r["locked"] for r in eng.list_memories(agent_id="dst", limit=10)["memories"]}
    assert moved == {"fact number 0": False, "fact number 1, corrected": False, "fact number 3": True}
    assert eng.list_memories(agent_id="src", limit=10)["memories"] == []


def test_an_undo_that_fails_says_so_instead_of_nothing_was_changed(make_engine, monkeypatch):
    """When the rollback of a failed import fails too (the database busy), the answer says the
    rows are not rolled back yet and when they will be (found by a break-it pass: the CLI said
    'nothing was changed' while 40,958 imported rows stayed until a later start)."""
    eng = make_engine(embedding_mode="none")
    run = bulkwrite.BulkRun(eng.db, "import", {}, lambda rows: None)

    def busy() -> int:
        raise RuntimeError("database is busy")

    monkeypatch.setattr(run, "abort", busy)
    said = run.rolled_back()
    assert said.startswith("NOT rolled back yet") and "database is busy" in said and "next start" in said
    monkeypatch.undo()
    assert run.rolled_back() == "rolled back (0 rows removed)"
