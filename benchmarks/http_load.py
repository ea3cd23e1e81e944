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

Usage::

    python benchmarks/http_load.py [--clients 20] [--calls 250] [--routes http,proxy]
        [--embedding http|none] [--out PATH] [--keep]
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

TOKEN = "bench-load-token-0123456789abcdefghijklmnop"
AGENTS = 5
PATTERN = ("store", "store", "recall", "recall", "list_memories")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workdir: Path, route: str, embedding: str, embed_url: str) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    db = workdir / f"load-{route}.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_")}
    env.update(CPERSONA_DB_PATH=str(db), CPERSONA_TRANSPORT="streamable-http", CPERSONA_HTTP_PORT=str(port),
               CPERSONA_AUTH_TOKEN=TOKEN, CPERSONA_EMBEDDING_MODE=embedding, CPERSONA_UPDATE_CHECK="false")
    if embed_url:
        env["CPERSONA_EMBEDDING_URL"] = embed_url
    errlog = (workdir / f"server-{route}.stderr").open("w")
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


async def run_client(route: str, url: str, client: int, calls: int, out: dict) -> None:
    import contextlib
    import json

    async with contextlib.AsyncExitStack() as stack:
        try:
            session = await open_session(stack, route, url)
        except Exception as err:  # noqa: BLE001 — a client that cannot connect is counted, not fatal
            out["errors"].append(f"client {client} connect: {type(err).__name__}: {err}")
            return
        for call in range(calls):
            tool = PATTERN[call % len(PATTERN)]
            started = time.perf_counter()
            try:
                result = await session.call_tool(tool, arguments(tool, client, call))
                elapsed = (time.perf_counter() - started) * 1000
                text = result.content[0].text if result.content else ""
                payload = json.loads(text) if not result.is_error else {"ok": False, "error": text}
            except Exception as err:  # noqa: BLE001 — counted as an error of this call
                out["errors"].append(f"client {client} call {call} {tool}: {type(err).__name__}: {err}")
                continue
            out["ms"][tool].append(elapsed)
            if payload.get("ok") is False or "error" in payload:
                out["errors"].append(f"client {client} call {call} {tool}: {payload.get('error')}")
            elif tool == "store":
                if payload.get("result") == "stored":
                    out["stored"] += 1
                else:
                    out["errors"].append(f"client {client} call {call} store: {payload.get('result')}")


async def run_route(route: str, args: argparse.Namespace, workdir: Path, embed_url: str) -> dict[str, Any]:
    proc, url, db = start_server(workdir, route, args.embedding, embed_url)
    out: dict[str, Any] = {"ms": defaultdict(list), "errors": [], "stored": 0}
    common.log(f"{route}: {args.clients} clients × {args.calls} calls against {url}")
    started = time.perf_counter()
    try:
        async with anyio.create_task_group() as tg:
            for client in range(args.clients):
                tg.start_soon(run_client, route, url, client, args.calls, out)
    finally:
        wall = time.perf_counter() - started
        proc.terminate()
        proc.wait(timeout=30)
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    finally:
        conn.close()
    total = sum(len(v) for v in out["ms"].values())
    return {
        "route": route, "clients": args.clients, "calls_per_client": args.calls, "calls": total,
        "wall_s": round(wall, 2), "calls_per_s": round(total / wall, 1), "errors": len(out["errors"]),
        "error_samples": out["errors"][:10], "stores_stored": out["stored"], "rows_in_file": rows,
        "lost_writes": out["stored"] - rows,
        "latency": {tool: common.latency_summary(ms) for tool, ms in sorted(out["ms"].items())},
    }


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
    args = parser.parse_args(argv)
    args.routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    machine = common.machine_info()
    results = common.run_in_workdir("cpersona-http-load-", args.keep, main_async, args)
    rows = []
    for res in results:
        for tool, lat in res["latency"].items():
            rows.append([res["route"], tool, lat.get("n", 0),
                         *(common.ms(lat.get(key)) for key in ("p50_ms", "p95_ms", "p99_ms"))])
    common.print_table(["route", "tool", "calls", "p50 ms", "p95 ms", "p99 ms"], rows)
    print()
    common.print_table(["route", "calls", "calls/s", "errors", "stored", "rows", "lost writes"],
                       [[r["route"], r["calls"], f"{r['calls_per_s']:.1f}", r["errors"], r["stores_stored"],
                         r["rows_in_file"], r["lost_writes"]] for r in results])
    note = common.busy_machine_note(machine.get("loadavg_start"))
    if note:
        print(note)
    machine["loadavg_end"] = common.loadavg()
    common.write_json(args.out, {"machine": machine, "embedding": args.embedding, "results": results})
    return 0 if all(r["errors"] == 0 and r["lost_writes"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
