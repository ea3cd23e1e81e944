"""export / import never touch the server's own files, and an MCP export never replaces a
file that is not an earlier export — even when the export folder is the database's folder."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest
from cpersona.errors import InvalidArgument, StorageUnavailable
from cpersona.portable import exporter

from conftest import db_counts, in_thread, new_engine, run_mcp

OWN = ["shared.db", "shared.db-wal", "shared.db-shm", "shared.db-journal", "shared.db.calibration.json",
       "update-check.json"]


@pytest.fixture
def shared(tmp_path):
    """An engine whose export folder is the database's own folder."""
    eng = new_engine(tmp_path / "shared.db", export_dir=str(tmp_path))
    assert eng.store("a", "precious fact")["result"] == "stored"
    yield eng
    eng.close()


@pytest.mark.parametrize("name", OWN)
@pytest.mark.parametrize("confined", [True, False], ids=["mcp", "cli"])
def test_export_refuses_the_servers_own_files(shared, tmp_path, name, confined):
    target = name if confined else str(tmp_path / name)

    def seen() -> bytes | int | None:
        """The file's bytes; only its size for -shm, SQLite's shared-memory index, which any
        connection of the server (its background threads too) updates as it reads and writes."""
        path = tmp_path / name
        if not path.exists():
            return None
        return path.stat().st_size if name.endswith("-shm") else path.read_bytes()

    before = seen()
    with pytest.raises(InvalidArgument, match=r"^output_path: .*is this server's"):
        shared.export_memories("a", target, confined=confined)
    assert seen() == before
    assert shared.store("a", "still writable")["result"] == "stored"


def test_export_refuses_a_symlink_to_the_database(shared, tmp_path):
    (tmp_path / "innocent.jsonl").symlink_to(tmp_path / "shared.db")
    with pytest.raises(InvalidArgument, match="database file"):
        shared.export_memories("a", "innocent.jsonl")


@pytest.mark.parametrize("confined", [True, False], ids=["mcp", "cli"])
def test_import_refuses_the_live_database(shared, tmp_path, confined):
    shared.store("b", "another agent's secret")
    target = "shared.db" if confined else str(tmp_path / "shared.db")
    with pytest.raises(InvalidArgument, match=r"^input_path: .*this server's database file"):
        shared.import_memories(target, "a", confined=confined)
    assert db_counts(tmp_path / "shared.db")["memories"] == 2


def test_mcp_export_replaces_only_an_earlier_export(shared, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("the user's own notes\n", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="is not a cpersona export"):
        shared.export_memories("a", "notes.txt")
    assert notes.read_text(encoding="utf-8") == "the user's own notes\n"
    assert shared.export_memories("a", "a.jsonl")["ok"]
    assert shared.store("a", "a newer fact")["result"] == "stored"
    assert shared.export_memories("a", "a.jsonl")["memories"] == 2  # an earlier export is replaced
    assert shared.export_memories("a", str(notes), confined=False)["ok"]  # the CLI user named it


def test_over_mcp_the_database_survives_an_export_aimed_at_it(tmp_path):
    async def scenario(client):
        assert (await client.ok("store", {"agent_id": "a", "content": "precious fact"}))["ok"]
        refusals = [await client.ok("export_memories", {"agent_id": "a", "output_path": name})
                    for name in ("m.db", "m.db-wal", "m.db-shm")]
        stored = await client.ok("store", {"agent_id": "a", "content": "written after the attempts"})
        return refusals, stored

    run = run_mcp(scenario, tmp_path / "m.db", env={"CPERSONA_EXPORT_DIR": str(tmp_path)})
    refusals, stored = run.result
    assert all(r["ok"] is False and "this server's" in r["error"] for r in refusals), json.dumps(refusals)
    assert stored["result"] == "stored"
    assert db_counts(tmp_path / "m.db")["memories"] == 2


def _release(fifo):
    """Open the FIFO's other end so a reader or writer blocked on it returns."""
    def release():
        for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
            try:
                os.close(os.open(fifo, flags))
            except OSError:
                pass
    return release


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("confined", [True, False], ids=["mcp", "cli"])
@pytest.mark.parametrize("tool", ["import", "export"])
def test_a_fifo_is_refused_at_once_not_waited_on(shared, tmp_path, confined, tool):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    target = "pipe.jsonl" if confined else str(fifo)
    call = ((lambda: shared.import_memories(target, "a", confined=confined)) if tool == "import"
            else (lambda: shared.export_memories("a", target, confined=confined)))
    try:
        raised = in_thread(call, 10)
    except TimeoutError:
        _release(fifo)()
        pytest.fail("the call was still blocked on the FIFO after 10 s")
    argument = "input_path" if tool == "import" else "output_path"
    assert isinstance(raised, InvalidArgument), raised
    assert str(raised).startswith(f"{argument}: ") and "not a regular file" in str(raised)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # left as it was
    assert db_counts(tmp_path / "shared.db")["memories"] == 1


@pytest.mark.parametrize(("code", "kind"), [(errno.ENOSPC, "disk_full"), (errno.EFBIG, "disk_full"),
                                            (errno.EROFS, "read_only"), (errno.EIO, "io_error")])
def test_an_export_the_disk_cannot_take_is_named_and_leaves_the_earlier_file(shared, tmp_path, monkeypatch,
                                                                              code, kind):
    assert shared.export_memories("a", "a.jsonl")["ok"]
    earlier = (tmp_path / "a.jsonl").read_bytes()
    shared.store("a", "a second fact")
    written = []

    def line(self, obj):
        if written:
            raise OSError(code, os.strerror(code))
        written.append(obj)

    monkeypatch.setattr(exporter.AtomicFile, "line", line)
    with pytest.raises(StorageUnavailable) as raised:
        shared.export_memories("a", "a.jsonl")
    assert raised.value.kind == kind and raised.value.retry_after_ms is None
    assert str(raised.value).startswith("output_path: ") and os.strerror(code) in str(raised.value)
    assert (tmp_path / "a.jsonl").read_bytes() == earlier
    assert not [p.name for p in tmp_path.iterdir() if ".tmp." in p.name]
