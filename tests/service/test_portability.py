"""export_memories / import_memories / merge_memories / migrate_channel_axis on the service:
formats, dedup, dry runs, vectors, the pause, and bad input that changes nothing."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from cpersona.errors import InvalidArgument
from cpersona.service import bulkwrite
from cpersona.storage.bulk import _MEMORY as _BULK_MEMORY
from cpersona.storage.bulk import BulkRepo

from backends import db_write, store_of
from conftest import db_rows, wait_until

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


def _fill(eng, agent="a", n=3):
    for i in range(n):
        assert eng.store(agent, f"{agent} memory number {i} about harbour ferries", msg_id=f"{agent}-{i}",
                         metadata={"i": i}, channel="#c" if i % 2 else "", project_id="p" if i == 2 else "",
                         source={"type": "User", "id": "u", "name": "Ann"})["result"] == "stored"
    assert eng.archive_episode(agent, f"{agent} talked about ferries", keywords="ferries harbour",
                               resolved=True)["ok"]
    assert eng.update_profile(agent, f"{agent} likes ferries")["ok"]


def _state(path) -> str:
    """A digest of every user row of the file (unchanged ⇔ nothing was written)."""
    digest = hashlib.sha256()
    for table in ("memories", "episodes", "profiles", "pending_memory_tasks"):
        digest.update(repr(db_rows(path, f"SELECT * FROM {table} ORDER BY id")).encode())
    return digest.hexdigest()


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.fixture
def export_dir(make_engine, tmp_path):
    return tmp_path / "exports"


# ---------------------------------------------------------------- export
def test_export_writes_header_and_rows_inside_the_export_folder(engine_none, tmp_path):
    _fill(engine_none, "a")
    _fill(engine_none, "b", 1)
    res = engine_none.export_memories("a", "a.jsonl")
    assert res == {"ok": True, "path": str(tmp_path / "exports" / "a.jsonl"), "memories": 3, "episodes": 1,
                   "profiles": 1, "embeddings": 0}
    lines = _lines(res["path"])
    assert lines[0]["_type"] == "header" and lines[0]["version"] == "cpersona-export/1.0"
    assert (lines[0]["memory_count"], lines[0]["episode_count"], lines[0]["profile_count"]) == (3, 1, 1)
    assert [x["_type"] for x in lines[1:]] == ["memory"] * 3 + ["episode", "profile"]
    assert lines[1]["source"] == {"type": "User", "id": "u", "name": "Ann"} and lines[1]["metadata"] == {"i": 0}
    every = engine_none.export_memories("", "all.jsonl")
    assert (every["memories"], every["episodes"], every["profiles"]) == (4, 2, 2)
    assert not list((tmp_path / "exports").glob(".*tmp*"))  # no temp file left behind


@pytest.mark.parametrize("bad", ["../outside.jsonl", "/etc/cron.d/x.jsonl", "sub/../../x.jsonl"])
def test_paths_outside_the_export_folder_are_refused(engine_none, tmp_path, bad):
    _fill(engine_none)
    with pytest.raises(InvalidArgument, match="outside the export folder"):
        engine_none.export_memories("a", bad)
    with pytest.raises(InvalidArgument, match="outside the export folder"):
        engine_none.import_memories(bad)
    assert not (tmp_path / "outside.jsonl").exists()


def test_a_name_the_file_system_cannot_hold_is_an_argument_error(engine_none):
    _fill(engine_none)
    with pytest.raises(InvalidArgument, match="output_path: the file name is 300 bytes; at most 235 fit"):
        engine_none.export_memories("a", "x" * 300)
    with pytest.raises(InvalidArgument, match="input_path: the file name is 300 bytes; at most 255 fit in this fold"):
        engine_none.import_memories("x" * 300)
    missing = engine_none.import_memories("x" * 250)  # a name that fits: only the file is missing
    assert missing["ok"] is False and missing["error"].endswith("does not exist")


def test_a_symlink_out_of_the_export_folder_is_refused(engine_none, tmp_path):
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "link").symlink_to(tmp_path)
    with pytest.raises(InvalidArgument, match="outside"):
        engine_none.export_memories("a", "link/escape.jsonl")


def test_export_embeddings_round_trip_with_the_same_model(http_engine_factory, tmp_path):
    src = http_engine_factory("src.db", export_dir=str(tmp_path))
    _fill(src)
    res = src.export_memories("a", "v.jsonl", include_embeddings=True)
    lines = _lines(res["path"])
    assert res["embeddings"] == 3 and lines[0]["embedding_model"] and lines[0]["embedding_dim"] == 512
    blob = base64.b64decode(lines[1]["embedding_b64"])
    assert blob == db_rows(src.settings.db_path, "SELECT embedding FROM memories WHERE id = 1")[0][0]
    same = http_engine_factory("same.db", export_dir=str(tmp_path))
    same.store("z", "records the model")  # the same model is recorded in the new database
    out = same.import_memories(res["path"])
    assert out["embeddings_kept"] == 3
    rows = db_rows(same.settings.db_path, "SELECT embedding FROM memories WHERE agent_id = 'a' ORDER BY id")
    assert rows[0][0] == blob


def test_vectors_of_another_model_are_dropped_and_queued(http_engine_factory, engine_none, tmp_path):
    src = http_engine_factory("src.db", export_dir=str(tmp_path))
    _fill(src)
    path = src.export_memories("a", "v.jsonl", include_embeddings=True)["path"]
    text = Path(path).read_text().replace(_lines(path)[0]["embedding_model"], "some-other-model")
    Path(path).write_text(text)
    dst = http_engine_factory("dst.db", export_dir=str(tmp_path), task_queue_enabled=False)
    dst.store("z", "records the model")
    out = dst.import_memories(path)
    assert out["imported_memories"] == 3 and out["embeddings_kept"] == 0
    assert db_rows(dst.settings.db_path, "SELECT COUNT(*) FROM memories WHERE agent_id = 'a' AND embedding IS NULL") \
        == [(3,)]
    tasks = db_rows(dst.settings.db_path, "SELECT COUNT(*) FROM pending_memory_tasks WHERE task_type = 'embed'")
    assert tasks == [(4,)]  # 3 memories + 1 episode, embedded later by the task queue


def test_a_restore_into_a_new_database_records_the_model_and_keeps_the_vectors(http_engine_factory, tmp_path):
    src = http_engine_factory("src.db", export_dir=str(tmp_path))
    _fill(src)
    res = src.export_memories("a", "v.jsonl", include_embeddings=True)
    fresh = http_engine_factory("fresh.db", export_dir=str(tmp_path), task_queue_enabled=False)
    out = fresh.import_memories(res["path"])
    assert out["embeddings_kept"] == 3 and out["embeddings_dropped"] == 0
    model = _lines(res["path"])[0]["embedding_model"]
    assert (fresh.stats()["stored_model"], fresh.stats()["stored_dim"]) == (model, 512)
    assert db_rows(fresh.settings.db_path, "SELECT COUNT(*) FROM memories WHERE embedding IS NULL") == [(0,)]
    # only the episode (exports carry no episode vectors) waits for one, and the answer says so
    assert out["without_vectors"] == 1 and "1 of the imported memories and episodes have no vector yet" in out["vector_note"]
    assert "vectors dropped" not in out["vector_note"]


def test_vectors_dropped_on_a_restore_say_why_and_what_embeds_the_rows(http_engine_factory, make_engine, tmp_path):
    src = http_engine_factory("src.db", export_dir=str(tmp_path))
    _fill(src)
    path = src.export_memories("a", "v.jsonl", include_embeddings=True)["path"]
    other = str(tmp_path / "other.jsonl")
    Path(other).write_text(Path(path).read_text().replace(_lines(path)[0]["embedding_model"], "some-other-model"))
    fresh = http_engine_factory("fresh.db", export_dir=str(tmp_path), task_queue_enabled=False)
    out = fresh.import_memories(other)
    assert (out["embeddings_kept"], out["embeddings_dropped"], out["without_vectors"]) == (0, 3, 4)
    note = out["vector_note"]
    assert "3 vectors dropped: the file's vectors come from some-other-model (512-d)" in note
    # the server names its model, or — once its background start (the calibration's probe) has recorded
    # it, which races with this import — the database's: both name fake-hash-512
    assert ("this server embeds with fake-hash-512" in note or "vectors belong to fake-hash-512" in note), note
    assert "`cpersona reembed`" in note
    assert fresh.stats()["stored_model"] != "some-other-model"
    keyword_only = make_engine("none.db", export_dir=str(tmp_path), embedding_mode="none")
    out = keyword_only.import_memories(path)
    assert out["embeddings_dropped"] == 3 and "no embedding model is configured here" in out["vector_note"]
    assert keyword_only.stats()["stored_model"] is None


# ---------------------------------------------------------------- import
def test_import_dry_run_then_real_then_again_adds_nothing(make_engine, tmp_path):
    src = make_engine("src.db", export_dir=str(tmp_path))
    _fill(src)
    path = src.export_memories("", "all.jsonl")["path"]
    dst = make_engine("dst.db", export_dir=str(tmp_path))
    before = _state(dst.settings.db_path)
    dry = dst.import_memories(path, dry_run=True)
    assert dry["dry_run"] is True and _state(dst.settings.db_path) == before
    real = dst.import_memories(path)
    keys = ("imported_memories", "skipped_memories", "imported_episodes", "skipped_episodes", "profile_updated")
    assert {k: dry[k] for k in keys} == {k: real[k] for k in keys} == {
        "imported_memories": 3, "skipped_memories": 0, "imported_episodes": 1, "skipped_episodes": 0,
        "profile_updated": True}
    again = dst.import_memories(path)
    assert (again["imported_memories"], again["skipped_memories"], again["imported_episodes"],
            again["skipped_episodes"], again["profile_updated"]) == (0, 3, 0, 1, False)


def test_import_into_another_agent_and_duplicates_inside_one_file(engine_none, tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    header = {"_type": "header", "version": "cpersona-export/1.0", "agent_id": "x", "memory_count": 3,
              "episode_count": 0, "profile_count": 0}
    rows = [{"_type": "memory", "agent_id": "x", "content": "same text", "msg_id": ""},
            {"_type": "memory", "agent_id": "x", "content": "same text", "msg_id": ""},
            {"_type": "memory", "agent_id": "x", "content": "other text", "msg_id": "m1"}]
    (folder / "d.jsonl").write_text("\n".join(json.dumps(x) for x in [header, *rows]))
    dry = engine_none.import_memories("d.jsonl", "target", dry_run=True)
    real = engine_none.import_memories("d.jsonl", "target")
    assert (dry["imported_memories"], dry["skipped_memories"]) == (real["imported_memories"],
                                                                   real["skipped_memories"]) == (2, 1)
    assert db_rows(engine_none.settings.db_path, "SELECT DISTINCT agent_id FROM memories") == [("target",)]


def _write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


HEADER = json.dumps({"_type": "header", "version": "cpersona-export/1.0", "agent_id": "a", "memory_count": 2,
                     "episode_count": 0, "profile_count": 0})
ROW = json.dumps({"_type": "memory", "agent_id": "a", "content": "a memory from a file"})
BAD_FILES = {
    "truncated": (f"{HEADER}\n{ROW}\n{ROW[:25]}".encode(), "line 3: not valid JSON"),
    "counts": (f"{HEADER}\n{ROW}\n".encode(), "announces 2 memory lines"),
    "latin-1": (f"{HEADER}\n{ROW}\n".encode().replace(b"a memory", "é memory".encode("latin-1")),
                "line 2: not UTF-8"),
    "nested": (f"{HEADER}\n{ROW}\n".encode() + b"[" * 10_000 + b"]" * 10_000 + b"\n", "line 3: JSON nested deeper"),
    "version": (HEADER.replace("1.0", "9.9").encode() + b"\n", "not one this cpersona reads"),
    "types": (f'{HEADER}\n{ROW}\n{{"_type": "memory", "agent_id": "a", "content": 5}}\n'.encode(),
              "line 3: memory.content must be a string"),
    "nul": (f'{HEADER}\n{ROW}\n{{"_type": "memory", "agent_id": "a", "content": "a\\u0000b"}}\n'.encode(),
            "line 3: memory.content: must not contain NUL"),
    "second header": (f"{HEADER}\n{ROW}\n{HEADER}\n{ROW}\n".encode(), "second header"),
    "empty": (b"\n\n", "empty"),
    "unknown": (b'{"hello": "world"}\n', "unrecognised format"),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_files_are_refused_with_the_line_and_change_nothing(engine_none, tmp_path, kind):
    _fill(engine_none)
    data, needle = BAD_FILES[kind]
    _write(tmp_path / "exports", "bad.jsonl", data)
    before = _state(engine_none.settings.db_path)
    for dry in (True, False):
        res = engine_none.import_memories("bad.jsonl", dry_run=dry)
        assert res["ok"] is False and needle in res["error"] and "nothing was imported" in res["error"], res
        assert res["imported_memories"] == 0
    assert _state(engine_none.settings.db_path) == before


def test_a_10gb_file_is_refused_before_it_is_read(make_engine, tmp_path):
    eng = make_engine(max_import_bytes=1_000_000)
    big = tmp_path / "exports" / "huge.jsonl"
    big.parent.mkdir()
    with open(big, "wb") as f:  # sparse: 10 GB announced, nothing allocated
        f.truncate(10 * 1024**3)
    before = _state(eng.settings.db_path)
    res = eng.import_memories("huge.jsonl")
    assert res["ok"] is False and "10,737,418,240 bytes" in res["error"] and "CPERSONA_MAX_IMPORT_BYTES" in res["error"]
    assert _state(eng.settings.db_path) == before


def test_missing_file_and_folder_are_clear(engine_none, tmp_path):
    (tmp_path / "exports" / "d").mkdir(parents=True)
    assert "does not exist" in engine_none.import_memories("nope.jsonl")["error"]
    assert "not a regular file" in engine_none.import_memories("d")["error"]
    with pytest.raises(InvalidArgument, match="is a folder"):
        engine_none.export_memories("", "d")


def test_knowledge_graph_plain_jsonl_and_csv(engine_none, tmp_path):
    folder = tmp_path / "exports"
    graph = [{"type": "entity", "name": "John_Smith", "entityType": "person",
              "observations": ["Speaks fluent Spanish", "Works at Acme"]},
             {"type": "relation", "from": "John_Smith", "to": "Acme", "relationType": "works_at"}]
    _write(folder, "memory.jsonl", "\n".join(json.dumps(x) for x in graph).encode())
    assert "target_agent_id" in engine_none.import_memories("memory.jsonl")["error"]  # whose memories?
    res = engine_none.import_memories("memory.jsonl", "kg")
    assert res["format"] == "mcp-memory-graph" and res["imported_memories"] == 3
    rows = db_rows(engine_none.settings.db_path, "SELECT content, metadata FROM memories WHERE agent_id = 'kg' ORDER BY id")
    assert rows[0][0] == "John_Smith (person): Speaks fluent Spanish"
    assert rows[2][0] == "John_Smith works_at Acme" and json.loads(rows[2][1])["relation"]["to"] == "Acme"
    assert engine_none.import_memories("memory.jsonl", "kg")["imported_memories"] == 0
    plain = [{"content": "tea over coffee", "agent_id": "p", "tags": ["food"], "timestamp": "2026-01-02T03:04:05Z"},
             {"content": "likes rain", "agent_id": "p"}]
    _write(folder, "plain.jsonl", "\n".join(json.dumps(x) for x in plain).encode())
    assert engine_none.import_memories("plain.jsonl")["imported_memories"] == 2
    meta, stamp = db_rows(engine_none.settings.db_path,
                          "SELECT metadata, timestamp FROM memories WHERE content = 'tea over coffee'")[0]
    assert json.loads(meta) == {"tags": ["food"]} and stamp == "2026-01-02T03:04:05Z"
    _write(folder, "rows.csv", b'content,agent_id,tags\n"hello, world",c,a;b\nsecond,c,\n')
    res = engine_none.import_memories("rows.csv")
    assert res["format"] == "csv" and res["imported_memories"] == 2
    assert json.loads(db_rows(engine_none.settings.db_path,
                              "SELECT metadata FROM memories WHERE content = 'hello, world'")[0][0]) == {"tags": ["a", "b"]}
    _write(folder, "bad.csv", b"text\nno content column\n")
    assert "content" in engine_none.import_memories("bad.csv")["error"]


def test_import_cleans_like_store_and_notes_it(make_engine, tmp_path):
    eng = make_engine(max_content_length=20, max_metadata_length=50)
    rows = [{"_type": "memory", "agent_id": "a", "content": "[Memory from x] " + "long " * 10},
            {"_type": "memory", "agent_id": "a", "content": "   "},
            {"_type": "memory", "agent_id": "a", "content": "big meta", "metadata": {"k": "v" * 100}},
            {"_type": "profile", "agent_id": "a", "user_id": "", "content": ""}]
    _write(tmp_path / "exports", "c.jsonl", "\n".join(json.dumps(x) for x in rows).encode())
    res = eng.import_memories("c.jsonl")
    assert (res["imported_memories"], res["skipped_memories"]) == (1, 2)
    assert any("cut to 20" in n for n in res["errors"]) and any("metadata" in n for n in res["errors"])
    assert any("existing one is kept" in n for n in res["errors"])
    assert db_rows(eng.settings.db_path, "SELECT content FROM memories") == [("long long long long ",)]


def _session_bulk(engine) -> BulkRepo:
    """The bulk repository class the engine's backend uses (PostgreSQL's overrides the inserts)."""
    with engine.db.read() as s:
        return s.bulk


def test_a_failure_while_writing_undoes_every_chunk(engine_none, tmp_path, monkeypatch):
    rows = [{"_type": "memory", "agent_id": "a", "content": f"row {i}"} for i in range(300)]
    _write(tmp_path / "exports", "f.jsonl", "\n".join(json.dumps(x) for x in rows).encode())
    _fill(engine_none)
    before = _state(engine_none.settings.db_path)
    repo = type(_session_bulk(engine_none))
    real = repo.insert_memory
    calls = {"n": 0}

    def failing(self, row, blob):
        calls["n"] += 1
        if calls["n"] == 250:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, row, blob)

    monkeypatch.setattr(bulkwrite, "CHUNK_SECONDS", 0.0)  # one row per transaction: many chunks committed
    monkeypatch.setattr(repo, "insert_memory", failing)
    res = engine_none.import_memories("f.jsonl")
    assert res["ok"] is False and "rolled back (249 rows removed)" in res["error"] and "disk is full" in res["error"]
    assert _state(engine_none.settings.db_path) == before
    assert db_rows(engine_none.settings.db_path, "SELECT COUNT(*) FROM cpersona_bulk_rows") == [(0,)]


def test_an_interrupted_import_of_a_dead_process_is_undone_at_start(make_engine, tmp_path):
    eng = make_engine("i.db")
    _fill(eng)
    before = _state(eng.settings.db_path)
    eng.close()
    store = store_of(tmp_path / "i.db")  # what a killed importer leaves: rows + journal, phase writing
    try:
        with store.write() as s:
            op = s.journal.begin("import", f"{os.uname().nodename}:999999999:dead", {})
            for i in range(5):
                ref = s.bulk.insert_memory(dict.fromkeys(_BULK_MEMORY, "") | {
                    "agent_id": "a", "content": f"half {i}", "source": "{}", "metadata": "{}", "locked": 0,
                    "recall_count": 0, "last_recalled_at": None}, None)
                s.journal.note(op, "insert", "memories", ref.id)
            profile_id, updated = s.bulk.profile("a", "")["id"], s.bulk.profile("a", "")["updated_at"]
            s.bulk.put_profile("a", "", "overwritten", None, "")
            s.journal.note(op, "profile", "profiles", profile_id,
                           {"content": "a likes ferries", "updated_at": updated, "project_id": ""})
    finally:
        store.close()
    assert _state(tmp_path / "i.db") != before
    make_engine("i.db")  # the start finds the journal of a process that is gone and undoes it
    assert wait_until(lambda: _state(tmp_path / "i.db") == before)
    assert db_rows(tmp_path / "i.db", "SELECT COUNT(*) FROM cpersona_bulk_ops") == [(0,)]


def test_import_while_paused_writes_nothing(engine_none, tmp_path):
    _write(tmp_path / "exports", "p.jsonl", json.dumps({"content": "x", "agent_id": "a"}).encode())
    engine_none.pause_persistence(60)
    res = engine_none.import_memories("p.jsonl")
    assert res["persisted"] is False and res["imported_memories"] == 0
    assert engine_none.import_memories("p.jsonl", dry_run=True)["imported_memories"] == 1  # a dry run still runs
    assert db_rows(engine_none.settings.db_path, "SELECT COUNT(*) FROM memories") == [(0,)]


# ----------------------------------------------------------------- merge
def test_merge_copy_move_and_dry_run(engine_none):
    _fill(engine_none, "a")
    _fill(engine_none, "b", 1)
    path = engine_none.settings.db_path
    dry = engine_none.merge_memories("a", "b", dry_run=True)
    assert (dry["merged_memories"], dry["merged_episodes"], dry["skipped_profile"]) == (3, 1, True)
    copy = engine_none.merge_memories("a", "b")
    assert {k: copy[k] for k in ("merged_memories", "merged_episodes", "profile_copied", "skipped_profile")} == \
        {"merged_memories": 3, "merged_episodes": 1, "profile_copied": False, "skipped_profile": True}
    assert engine_none.merge_memories("a", "b")["merged_memories"] == 0  # all present now
    assert "note" not in engine_none.merge_memories("a", "b")
    ghost = engine_none.merge_memories("ghost", "b")
    assert ghost["ok"] and ghost["merged_memories"] == 0 and "'ghost' has no memories" in ghost["note"]
    moved = engine_none.merge_memories("a", "c", strategy="prefer_source", mode="move")
    assert moved["left_at_source"] == {"memories": 0, "episodes": 0, "profiles": 0}
    assert moved["source_deleted"]["deleted_memories"] == 3
    assert db_rows(path, "SELECT COUNT(*) FROM memories WHERE agent_id = 'a'") == [(0,)]
    assert db_rows(path, "SELECT content FROM profiles WHERE agent_id = 'c'") == [("a likes ferries",)]
    locked = db_rows(path, "SELECT locked, msg_id, channel, project_id FROM memories WHERE agent_id = 'c' ORDER BY id")
    assert [r[1:] for r in locked] == [("a-0", "", ""), ("a-1", "#c", ""), ("a-2", "", "p")]


@pytest.mark.parametrize(("args", "argument"), [
    (("", "b"), "source_agent_id"), (("a\x00", "b"), "source_agent_id"), (("x" * 513, "b"), "source_agent_id"),
    (("a", ""), "target_agent_id"), (("a", "a"), "target_agent_id"), (("a", "b\x00"), "target_agent_id")])
def test_merge_argument_rules(engine_none, args, argument):
    with pytest.raises(InvalidArgument, match=f"^{argument}: "):
        engine_none.merge_memories(*args)
    with pytest.raises(InvalidArgument, match="strategy"):
        engine_none.merge_memories("a", "b", strategy="overwrite-everything")
    with pytest.raises(InvalidArgument, match="mode"):
        engine_none.merge_memories("a", "b", mode="teleport")


def test_migrate_channel_axis(engine_none):
    path = engine_none.settings.db_path
    for i, meta in enumerate([{"session_id": "12345:abc"}, {"session_id": "999:x"}, {"other": 1}, {}]):
        engine_none.store("a", f"bridge memory {i}", metadata=meta, channel="discord")
    db_write(path, "UPDATE memories SET metadata = 'not json' WHERE content = 'bridge memory 2'")
    report = engine_none.migrate_channel_axis()
    assert report["dry_run"] is True and report["recoverable_total"] == 2 and report["unrecoverable_total"] == 2
    assert report["invalid_metadata_total"] == 1 and report["migrated"] == 0
    assert {r["channel"] for r in report["recoverable_by_channel"]} == {"12345", "999"}
    done = engine_none.migrate_channel_axis("a", dry_run=False, globalize_unrecoverable=True)
    assert (done["migrated"], done["globalized"]) == (2, 2)
    assert db_rows(path, "SELECT channel FROM memories ORDER BY id") == [("12345",), ("999",), ("",), ("",)]
    engine_none.pause_persistence(60)
    paused = engine_none.migrate_channel_axis(dry_run=False)
    assert paused["dry_run"] is True and paused["repairs_skipped"] is True
