"""Named failures over the real MCP path: a busy database answers a retryable
`error_kind: "busy"`, a file-size limit is named once (no traceback per call) and the server
recovers when the limit is lifted, a database on an SQLite without the trigram tokenizer
serves stores and recalls with an advisory, and edge timestamps are answered normally."""

from __future__ import annotations

import resource
import sqlite3
import sys

import pytest

from conftest import RawStdio, clean_env, db_rows, new_engine, run_mcp

STORE = {"agent_id": "kai", "message": {"content": "stored while another process holds the lock"}}


def test_a_busy_database_answers_a_retryable_busy_error(tmp_path):
    path = tmp_path / "busy.db"
    new_engine(path).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    async def scenario(client):
        first = await client.ok("store", {"agent_id": "kai", "message": {"content": "before the lock"}})
        holder.execute("BEGIN IMMEDIATE")  # another process in a long write
        try:
            busy = [await client.call("store", STORE) for _ in range(3)]
            recalled = await client.ok("recall", {"agent_id": "kai", "query": "before the lock"})
        finally:
            holder.execute("ROLLBACK")
        after = await client.ok("store", STORE)
        return first, busy, recalled, after

    run = run_mcp(scenario, path, {"CPERSONA_BUSY_TIMEOUT_MS": "200"})
    first, busy, recalled, after = run.result
    holder.close()
    assert first["result"] == "stored" and after["result"] == "stored"
    for reply in busy:
        body = reply.data
        assert body["ok"] is False and body["error_kind"] == "busy" and body["retryable"] is True, body
        assert body["retry_after_ms"] == 1000 and "internal error" not in body["error"]
    assert [m["content"] for m in recalled["messages"]] == ["before the lock"]
    assert run.stderr.count("is busy") == 1 and "Traceback" not in run.stderr


#: Bytes the server may write to any file (its database, the -wal beside it): the soft limit,
#: which the test lifts again while the server runs.
FILE_LIMIT = 600_000
LIMITED = [sys.executable, "-c", "import resource, runpy, sys; "
           f"resource.setrlimit(resource.RLIMIT_FSIZE, ({FILE_LIMIT}, resource.getrlimit(resource.RLIMIT_FSIZE)[1])); "
           "sys.argv = ['cpersona']; runpy.run_module('cpersona', run_name='__main__')"]


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs Linux prlimit")
def test_a_file_size_limit_is_named_once_and_lifting_it_heals_the_server(tmp_path):
    path = tmp_path / "limited.db"
    client = RawStdio(clean_env(CPERSONA_DB_PATH=str(path), CPERSONA_EMBEDDING_MODE="none"), tmp_path, LIMITED)
    try:
        client.initialize()
        answers = []
        for i in range(400):
            body = client.tool("store", {"agent_id": "kai", "message": {"content": f"row {i} " + "p" * 8000}})
            answers.append(body)
            if body.get("ok") is False and len([a for a in answers if a.get("ok") is False]) >= 10:
                break
        failed = [a for a in answers if a.get("ok") is False]
        stored = len(answers) - len(failed)
        assert len(failed) == 10 and stored > 0, answers[-1]
        assert {a["error_kind"] for a in failed} <= {"disk_full", "io_error"}
        assert all("internal error" not in a["error"] for a in failed)
        recalled = client.tool("recall", {"agent_id": "kai", "query": "row 0"})
        assert recalled["messages"], recalled
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.prlimit(client.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))  # the space is back
        healed = client.tool("store", {"agent_id": "kai", "message": {"content": "stored after the limit was lifted"}})
        assert healed["result"] == "stored", healed
    finally:
        assert client.close() == 0
    log = client.log()
    assert "Traceback" not in log
    assert sum(log.count(text) for text in ("cannot grow", "could not be read or written")) <= 2  # one per kind
    assert db_rows(path, "SELECT COUNT(*) FROM memories")[0][0] == stored + 1


def test_a_file_without_the_tokenizer_serves_over_mcp_and_says_so(tmp_path):
    path = tmp_path / "moved.db"
    eng = new_engine(path)
    eng.store("kai", "written where trigram existed")
    eng.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = replace(sql, '''trigram''', '''no_trigram_here''') "
                 "WHERE name LIKE '%_fts'")
    conn.commit()
    conn.close()

    async def scenario(client):
        stored = await client.ok("store", {"agent_id": "kai", "message": {"content": "written here without it"}})
        found = await client.ok("recall", {"agent_id": "kai", "query": "without it"})
        return stored, found

    run = run_mcp(scenario, path)
    stored, found = run.result
    assert stored["result"] == "stored"
    assert [m["content"] for m in found["messages"]] == ["written here without it"]
    assert "full-text index unavailable" in found["advisory"]["reason"]
    assert run.stderr.count("full-text search is unavailable") == 1


EDGES = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00Z"]


def test_edge_timestamps_with_offsets_are_answered_over_mcp(tmp_path):
    async def scenario(client):
        stores = [await client.ok("store", {"agent_id": "kai", "message": {"content": f"edge {t}", "timestamp": t}})
                  for t in EDGES]
        episode = await client.ok("archive_episode", {"agent_id": "kai", "summary": "edge session",
                                                      "history": [{"timestamp": t} for t in EDGES]})
        merged = await client.ok("recall_with_context", {
            "agent_id": "kai", "query": "edge",
            "external_context": [{"role": "user", "content": f"said at {t}", "timestamp": t} for t in EDGES]})
        return stores, episode, merged

    stores, episode, merged = run_mcp(scenario, tmp_path / "edge.db").result
    assert [s["result"] for s in stores] == ["stored"] * 3 and episode["ok"] is True
    said = [m["content"] for m in merged["messages"] if m["content"].startswith("said at")]
    assert said == [f"said at {t}" for t in (EDGES[0], EDGES[2], EDGES[1])]  # chronological
