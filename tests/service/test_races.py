"""Concurrent changes of the same row leave a consistent state: two Engines on one file
(separate connections and locks, like two processes) racing in threads, and two MCP server
processes on one file driven by two clients at once. The ownership and lock checks are part
of the changing statement, so e.g. a locked row is never deleted and exactly one of two
deletes succeeds."""

from __future__ import annotations

import sqlite3
import sys
import threading
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

import anyio
import pytest

from conftest import MCP_SCENARIO_TIMEOUT, NO_UPDATE_CHECK, McpClient, db_rows

ROUNDS = 25


def race(*calls):
    """Run the calls at the same moment (a barrier releases them together); return their results."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)
    errors = []

    def run(i, fn):
        barrier.wait()
        try:
            results[i] = fn()
        except BaseException as err:  # noqa: BLE001 — collected and reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return results


def assert_consistent(path) -> None:
    """FTS postings match the rows; no task points at a missing row."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()
    assert db_rows(path, "SELECT COUNT(*) FROM pending_memory_tasks t WHERE task_type = 'embed' AND NOT EXISTS "
                         "(SELECT 1 FROM memories m WHERE m.id = json_extract(t.payload, '$.id'))") == [(0,)]


@pytest.fixture
def pair(make_engine):
    """Two Engines on the same file."""
    return make_engine("race.db"), make_engine("race.db")


def rows(eng, n, prefix):
    return [eng.store("kai", f"{prefix} row {i} about harbours")["id"] for i in range(n)]


def test_two_deletes_exactly_one_succeeds(pair):
    a, b = pair
    for mid in rows(a, ROUNDS, "delete"):
        ra, rb = race(partial(a.delete_memory, mid, "kai"), partial(b.delete_memory, mid))
        assert sorted([ra["ok"], rb["ok"]]) == [False, True], (ra, rb)
        loser = ra if not ra["ok"] else rb
        assert loser["error"] == f"memory {mid} not found"
    assert db_rows(a.db.path, "SELECT COUNT(*) FROM memories") == [(0,)]
    assert_consistent(a.db.path)


def test_lock_versus_delete_never_deletes_a_locked_row(pair):
    a, b = pair
    for mid in rows(a, ROUNDS, "lock"):
        lock, delete = race(partial(a.lock_memory, mid), partial(b.delete_memory, mid))
        assert lock["ok"] != delete["ok"], (lock, delete)  # exactly one wins
        left = db_rows(a.db.path, "SELECT locked FROM memories WHERE id = ?", (mid,))
        if delete["ok"]:
            assert left == [] and lock["error"] == f"memory {mid} not found"
        else:
            assert left == [(1,)] and "is locked" in delete["error"]
    assert_consistent(a.db.path)


def test_update_versus_delete(pair):
    a, b = pair
    for i, mid in enumerate(rows(a, ROUNDS, "update")):
        upd, dele = race(partial(a.update_memory, mid, f"rewritten {i} about lighthouses"),
                         partial(b.delete_memory, mid))
        assert dele["ok"] is True  # an update never blocks a delete
        assert upd["ok"] is True or upd["error"] == f"memory {mid} not found"
        assert db_rows(a.db.path, "SELECT COUNT(*) FROM memories WHERE id = ?", (mid,)) == [(0,)]
    assert db_rows(a.db.path, "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH '\"lighthouses\"'") == [(0,)]
    assert_consistent(a.db.path)


def test_update_versus_lock(pair):
    a, b = pair
    for i, mid in enumerate(rows(a, ROUNDS, "guard")):
        new = f"guarded {i} edited"
        upd, lock = race(partial(a.update_memory, mid, new), partial(b.lock_memory, mid))
        assert lock["ok"] is True
        (content, locked), = db_rows(a.db.path, "SELECT content, locked FROM memories WHERE id = ?", (mid,))
        assert locked == 1
        if upd["ok"]:
            assert content == new
        else:
            assert content == f"guard row {i} about harbours" and "is locked" in upd["error"]
    assert_consistent(a.db.path)


def test_two_updates_leave_one_of_them_everywhere(pair):
    a, b = pair
    for i, mid in enumerate(rows(a, ROUNDS, "twice")):
        ra, rb = race(partial(a.update_memory, mid, f"version alpha {i}"),
                      partial(b.update_memory, mid, f"version beta {i}"))
        assert ra["ok"] and rb["ok"]
        (content,), = db_rows(a.db.path, "SELECT content FROM memories WHERE id = ?", (mid,))
        assert content in (f"version alpha {i}", f"version beta {i}")
        other = "beta" if "alpha" in content else "alpha"
        assert db_rows(a.db.path, "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?",
                       (f'"version {other} {i}"',)) == [(0,)]
    assert_consistent(a.db.path)


def test_delete_agent_data_versus_edits_and_stores(pair):
    a, b = pair
    ids = rows(a, ROUNDS, "wipe")
    for mid in ids[::2]:
        a.lock_memory(mid)
    calls = [lambda: a.delete_agent_data("kai")]
    calls += [lambda m=m: b.unlock_memory(m) for m in ids[:5]]
    calls += [lambda m=m: b.update_memory(m, f"late edit {m}") for m in ids[5:10]]
    calls += [lambda i=i: b.store("kai", f"late store {i}") for i in range(5)]
    results = race(*calls)
    wiped = results[0]
    assert wiped["ok"] is True and wiped["deleted_memories"] >= 1
    survivors = db_rows(a.db.path, "SELECT content FROM memories WHERE agent_id = 'kai'")
    # whatever ran after the wipe can only be a late store; nothing from before survives (locked rows included)
    assert all(c.startswith("late store") for (c,) in survivors), survivors
    assert wiped["deleted_memories"] + len(survivors) == ROUNDS + sum(1 for r in results[11:] if r["result"] == "stored")
    assert_consistent(a.db.path)


# ----------------------------------------------------------- two MCP clients
def run_two_clients(scenario, db_path: Path):
    """Two `python -m cpersona` processes on one file, each with its own official client."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "cpersona"], cwd=str(db_path.parent),
                                   env={"CPERSONA_DB_PATH": str(db_path), "CPERSONA_EMBEDDING_MODE": "none",
                                        **NO_UPDATE_CHECK})

    async def main():
        with anyio.fail_after(MCP_SCENARIO_TIMEOUT):
            async with AsyncExitStack() as stack:
                clients = []
                for _ in range(2):
                    read, write = await stack.enter_async_context(stdio_client(params))
                    session = await stack.enter_async_context(ClientSession(read, write))
                    clients.append(McpClient(session, await session.initialize()))
                return await scenario(*clients)

    return anyio.run(main)


async def both(first, second):
    """Run two awaitables concurrently; return their results in order."""
    out = [None, None]

    async def put(i, aw):
        out[i] = await aw

    async with anyio.create_task_group() as tg:
        tg.start_soon(put, 0, first)
        tg.start_soon(put, 1, second)
    return out


def test_two_mcp_clients_race_on_the_same_rows(tmp_path):
    path = tmp_path / "shared.db"
    n = 8

    async def scenario(a, b):
        ids = [(await a.ok("store", {"agent_id": "kai", "message": {"content": f"shared row {i}"}}))["id"]
               for i in range(3 * n)]
        out = {"delete": [], "lock": [], "update": []}
        for mid in ids[:n]:
            out["delete"].append(await both(a.ok("delete_memory", {"memory_id": mid}),
                                            b.ok("delete_memory", {"memory_id": mid, "agent_id": "kai"})))
        for mid in ids[n:2 * n]:
            out["lock"].append(await both(a.ok("lock_memory", {"memory_id": mid}), b.ok("delete_memory", {"memory_id": mid})))
        for mid in ids[2 * n:]:
            out["update"].append(await both(a.ok("update_memory", {"memory_id": mid, "content": f"from a {mid}"}),
                                            b.ok("update_memory", {"memory_id": mid, "content": f"from b {mid}"})))
        return ids, out

    ids, out = run_two_clients(scenario, path)
    for ra, rb in out["delete"]:
        assert sorted([ra["ok"], rb["ok"]]) == [False, True], (ra, rb)
    for mid, (lock, delete) in zip(ids[n:2 * n], out["lock"]):
        assert lock["ok"] != delete["ok"], (lock, delete)
        left = db_rows(path, "SELECT locked FROM memories WHERE id = ?", (mid,))
        assert left == ([] if delete["ok"] else [(1,)])
    for mid, (ra, rb) in zip(ids[2 * n:], out["update"]):
        assert ra["ok"] and rb["ok"]
        assert db_rows(path, "SELECT content FROM memories WHERE id = ?", (mid,))[0][0] in (f"from a {mid}", f"from b {mid}")
    assert db_rows(path, "SELECT COUNT(*) FROM memories WHERE id <= ?", (ids[n - 1],)) == [(0,)]
    assert_consistent(path)
