"""Concurrent load on ONE streamable-HTTP server on loopback: N clients × M mixed calls
(store / recall / list_memories), directly over HTTP and through `cpersona proxy`.

For each route (`http`: the official MCP client over streamable HTTP; `proxy`: the official
MCP client over stdio to one `cpersona proxy` process per client, each relaying to the server)
this

1. spawns `python -m cpersona` with CPERSONA_TRANSPORT=streamable-http, a bearer token and
   a fresh SQLite file (embedding: the deterministic fake /embed server, or none);
2. starts `--clients` (20) clients at once; each makes `--calls` (250) calls, in the fixed
   pattern store, store, recall, recall, list_memories over 5 agents shared by all clients
   (every stored text is unique, so every store must be `stored`);
3. counts errors (an SDK error result, `ok: false`, an exception, or a store not `stored`)
   and, after the server stopped, the rows in the file: lost writes = stores answered
   `stored` − rows found;
4. reports per-tool p50 / p95 / p99 of the client-side wall time, and calls/s.

Loopback only; the run is bounded (clients × calls) and stops by itself.

Several nodes on one PostgreSQL database (`--db-url URL --nodes 2`, route http): the
servers share a fresh schema; client i talks to node i mod nodes. `--kill-node-after S`
sends SIGKILL to the last node S seconds into the run: its clients fail over to the next
live node (the calls that were in flight or refused count as `failed_on_dead_node`, not as
errors), and afterwards every store that was answered `stored` must be in the database
(`lost_writes` counts the acknowledged texts that are missing, looked up one by one) and
every row must get its vector from the surviving node (no task stuck on the dead node's
lease): `unembedded_left` after waiting up to 120 s.

Usage::

    python benchmarks/http_load.py [--clients 20] [--calls 250] [--routes http,proxy]
        [--embedding http|none] [--out PATH] [--keep]
        [--db-url postgresql://… --nodes 2 [--kill-node-after 5]]
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
import httpx2

import common
import pg

TOKEN = "bench-load-token-0123456789abcdefghijklmnop"
AGENTS = 5
PATTERN = ("store", "store", "recall", "recall", "list_memories")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workdir: Path, route: str, embedding: str, embed_url: str, db_url: str = "",
                 node: int = 0) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    db = workdir / f"load-{route}.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_")}
    env.update(CPERSONA_DB_PATH=str(db), CPERSONA_TRANSPORT="streamable-http", CPERSONA_HTTP_PORT=str(port),
               CPERSONA_AUTH_TOKEN=TOKEN, CPERSONA_EMBEDDING_MODE=embedding, CPERSONA_UPDATE_CHECK="false")
    if embed_url:
        env["CPERSONA_EMBEDDING_URL"] = embed_url
    if db_url:
        env["CPERSONA_DB_URL"] = db_url
    errlog = (workdir / f"server-{route}-{node}.stderr").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "cpersona"], env=env, stderr=errlog, stdout=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}/mcp", db
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server did not start; see {workdir}/server-{route}.stderr")


async def open_session(stack, route: str, url: str):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if route == "http":
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120))
        read, write, *_ = await stack.enter_async_context(streamable_http_client(url, http_client=client))
    else:
        params = StdioServerParameters(command=sys.executable, args=["-m", "cpersona", "proxy"], env={
            "CPERSONA_REMOTE_URL": url, "CPERSONA_AUTH_TOKEN": TOKEN, "CPERSONA_UPDATE_CHECK": "false"})
        read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def arguments(tool: str, client: int, call: int) -> dict[str, Any]:
    agent = f"load-{(client + call) % AGENTS}"
    if tool == "store":
        text = f"client {client} call {call}: deploy note {client * 1000 + call}"
        return {"agent_id": agent, "message": {"content": text}}
    if tool == "recall":
        return {"agent_id": agent, "query": f"deploy note {client * 1000 + call - 2}", "limit": 5}
    return {"agent_id": agent, "limit": 20}


async def run_client(route: str, urls: list[str], client: int, calls: int, out: dict) -> None:
    """One client: `calls` calls to node client mod len(urls); when that node is killed
    (`out["dead"]`), the rest go to the next live node."""
    home = client % len(urls)
    state = {"call": 0}
    while state["call"] < calls:
        node = next(n for n in (home, *range(len(urls))) if n not in out["dead"])
        try:
            await _calls_on(route, urls[node], node, client, calls, state, out)
        except Exception as err:  # noqa: BLE001 — the transport of a killed node fails as a group
            if node not in out["dead"]:
                out["errors"].append(f"client {client} on node {node}: {type(err).__name__}: {err}")
                return
            out["failed_on_dead_node"] += 1
            state["retry"] = True  # the call in flight is sent again to the next node


async def _calls_on(route: str, url: str, node: int, client: int, calls: int, state: dict, out: dict) -> None:
    """The client's next calls on one node, until done or that node is dead."""
    import contextlib
    import json

    async with contextlib.AsyncExitStack() as stack:
        session = await open_session(stack, route, url)
        while state["call"] < calls:
            call, retried = state["call"], state.pop("retry", False)
            tool = PATTERN[call % len(PATTERN)]
            args = arguments(tool, client, call)
            started = time.perf_counter()
            try:
                result = await session.call_tool(tool, args)
                elapsed = (time.perf_counter() - started) * 1000
                text = result.content[0].text if result.content else ""
                payload = json.loads(text) if not result.is_error else {"ok": False, "error": text}
            except Exception as err:  # noqa: BLE001 — counted as an error of this call
                state["call"] += 1
                if node in out["dead"]:
                    out["failed_on_dead_node"] += 1
                    return  # fail over
                out["errors"].append(f"client {client} call {call} {tool}: {type(err).__name__}: {err}")
                continue
            state["call"] += 1
            out["ms"][tool].append(elapsed)
            if payload.get("ok") is False or "error" in payload:
                if node in out["dead"]:
                    out["failed_on_dead_node"] += 1
                    return
                out["errors"].append(f"client {client} call {call} {tool}: {payload.get('error')}")
            elif tool == "store":
                if payload.get("result") == "stored" or (retried and "duplicate" in json.dumps(payload)):
                    out["stored"] += 1  # a retried store the dead node had committed is a duplicate now
                    out["acked"].append(args["message"]["content"])
                else:
                    out["errors"].append(f"client {client} call {call} store: {payload.get('result')}")


async def run_route(route: str, args: argparse.Namespace, workdir: Path, embed_url: str) -> dict[str, Any]:
    if not args.db_url:
        return await run_nodes(route, args, workdir, embed_url, "")
    with pg.fresh_schema(args.db_url, f"load{route}") as url:
        return await run_nodes(route, args, workdir, embed_url, url)


async def _kill_later(procs: list[subprocess.Popen], after: float, out: dict) -> None:
    await anyio.sleep(after)
    out["dead"].add(len(procs) - 1)
    procs[-1].kill()  # SIGKILL: no shutdown of any kind
    out["killed_at_s"] = round(time.perf_counter() - out["started"], 2)
    common.log(f"node {len(procs) - 1} killed (SIGKILL) after {out['killed_at_s']} s")


async def run_nodes(route: str, args: argparse.Namespace, workdir: Path, embed_url: str,
                    db_url: str) -> dict[str, Any]:
    nodes = [start_server(workdir, route, args.embedding, embed_url, db_url, i) for i in range(args.nodes)]
    procs, urls, db = [n[0] for n in nodes], [n[1] for n in nodes], nodes[0][2]
    out: dict[str, Any] = {"ms": defaultdict(list), "errors": [], "stored": 0, "acked": [], "dead": set(),
                           "failed_on_dead_node": 0, "started": time.perf_counter()}
    common.log(f"{route}: {args.clients} clients × {args.calls} calls against {len(urls)} node(s) {urls}")
    try:
        async with anyio.create_task_group() as tg:
            if args.kill_node_after is not None:
                tg.start_soon(_kill_later, procs, args.kill_node_after, out)
            for client in range(args.clients):
                tg.start_soon(run_client, route, urls, client, args.calls, out)
        wall = time.perf_counter() - out["started"]
        left, waited = await _wait_embedded(db_url, args.embedding)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
    rows, missing = _stored(db_url or db, out["acked"])
    total = sum(len(v) for v in out["ms"].values())
    return {
        "route": route, "backend": "postgresql" if db_url else "sqlite", "nodes": len(urls),
        "clients": args.clients, "calls_per_client": args.calls, "calls": total,
        "wall_s": round(wall, 2), "calls_per_s": round(total / wall, 1), "errors": len(out["errors"]),
        "error_samples": out["errors"][:10], "stores_stored": out["stored"], "rows_in_file": rows,
        "lost_writes": missing, "killed_node_at_s": out.get("killed_at_s"),
        "failed_on_dead_node": out["failed_on_dead_node"], "unembedded_left": left, "embed_wait_s": waited,
        "latency": {tool: common.latency_summary(ms) for tool, ms in sorted(out["ms"].items())},
    }


async def _wait_embedded(db_url: str, embedding: str, timeout: float = 120.0) -> tuple[int | None, float]:
    """(rows still without a vector, seconds waited) on PostgreSQL with embeddings; the
    surviving nodes' queues must embed every row, those the dead node had claimed included."""
    if not db_url or embedding == "none":
        return None, 0.0
    started = time.perf_counter()
    while (left := pg.count_unembedded(db_url)[0]) and time.perf_counter() - started < timeout:
        await anyio.sleep(0.5)
    return left, round(time.perf_counter() - started, 1)


def _stored(db: Path | str, acked: list[str]) -> tuple[int, int]:
    """(memories in the store, acknowledged texts missing from it)."""
    if pg.is_url(db):
        import psycopg

        with psycopg.connect(str(db), autocommit=True) as conn:
            rows = conn.execute("SELECT count(*) FROM memories").fetchone()
            found = conn.execute("SELECT count(DISTINCT content) FROM memories WHERE content = ANY(%s)",
                                 (acked,)).fetchone()
        return (rows[0] if rows else 0), len(set(acked)) - (found[0] if found else 0)
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
        found = sum(conn.execute("SELECT 1 FROM memories WHERE content = ?", (t,)).fetchone() is not None
                    for t in set(acked))
    finally:
        conn.close()
    return rows, len(set(acked)) - found


async def main_async(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    from cpersona.devtools.fake_embed import FakeEmbedServer

    fake = FakeEmbedServer().start() if args.embedding == "http" else None
    try:
        return [await run_route(route, args, workdir, fake.url if fake else "") for route in args.routes]
    finally:
        if fake is not None:
            fake.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--calls", type=int, default=250)
    parser.add_argument("--routes", default="http,proxy", help="comma-separated: http, proxy")
    parser.add_argument("--embedding", choices=("http", "none"), default="http")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "http_load.json")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--db-url", default="", help="serve from a fresh schema of this PostgreSQL server")
    parser.add_argument("--nodes", type=int, default=1, help="server nodes on the one database (PostgreSQL)")
    parser.add_argument("--kill-node-after", type=float, default=None, metavar="S",
                        help="SIGKILL the last node S seconds into the run (needs --nodes >= 2)")
    args = parser.parse_args(argv)
    args.routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    if args.nodes > 1 and not args.db_url:
        parser.error("--nodes > 1 needs --db-url (several nodes share one PostgreSQL database)")
    if args.kill_node_after is not None and args.nodes < 2:
        parser.error("--kill-node-after needs --nodes >= 2")
    machine = common.machine_info()
    results = common.run_in_workdir("cpersona-http-load-", args.keep, main_async, args)
    rows = []
    for res in results:
        for tool, lat in res["latency"].items():
            rows.append([res["route"], tool, lat.get("n", 0),
                         *(common.ms(lat.get(key)) for key in ("p50_ms", "p95_ms", "p99_ms"))])
    common.print_table(["route", "tool", "calls", "p50 ms", "p95 ms", "p99 ms"], rows)
    print()
    common.print_table(["route", "backend", "nodes", "calls", "calls/s", "errors", "stored", "rows", "lost writes",
                        "node killed at s", "failed on dead node", "unembedded left"],
                       [[r["route"], r["backend"], r["nodes"], r["calls"], f"{r['calls_per_s']:.1f}", r["errors"],
                         r["stores_stored"], r["rows_in_file"], r["lost_writes"], r["killed_node_at_s"] or "-",
                         r["failed_on_dead_node"], "-" if r["unembedded_left"] is None else r["unembedded_left"]]
                        for r in results])
    note = common.busy_machine_note(machine.get("loadavg_start"))
    if note:
        print(note)
    machine["loadavg_end"] = common.loadavg()
    common.write_json(args.out, {"machine": machine, "embedding": args.embedding, "results": results})
    return 0 if all(r["errors"] == 0 and r["lost_writes"] == 0 and not r["unembedded_left"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
