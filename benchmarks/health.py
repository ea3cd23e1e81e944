"""How long `cpersona checkup` takes on a clean store, and whether recall keeps answering
while `checkup --fix` runs beside the server.

1. Builds a clean store of `--rows` memories (default 100,000), rows/100 episodes and one
   profile per agent, through the storage layer's own repositories (the statements the
   server writes with; FTS follows by trigger), with 512-d vectors of the deterministic fake
   embedder recorded as its model. Storing 100k rows over MCP would take many minutes and
   measure `store`, not the checkup.
2. Starts the real server (`python -m cpersona`, http mode against the fake /embed server
   in this process) on the file and measures recall (sequential MCP calls) for a baseline.
3. Runs `python -m cpersona checkup --json` (report-only), then `checkup --fix --json`, each
   as its own process WHILE the recall loop goes on, and records the checkup's wall time,
   the report's own `elapsed_ms` and status, and recall p50/p95/max and failures during it.

Prints a table and writes JSON (default `benchmarks/results/health.json`).

Usage::

    python benchmarks/health.py [--rows 100000] [--db PATH] [--out PATH] [--keep]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
from cpersona.devtools.fake_embed import FakeEmbedServer, fake_vector
from cpersona.storage.codec import to_blob
from cpersona.storage.db import Database
from cpersona.storage.meta import VectorState
from cpersona.storage.records import EpisodeDraft, MemoryDraft

import common

DIM = 512
AGENTS = 10
BATCH = 5000
_VOCABULARY = ("deploy cluster backup invoice budget garden tomato recipe oven kernel patch release rollback ticket "
               "alert latency cache index query shard replica quota token login audit ledger payroll sprint review "
               "design schema migration vector search memory profile episode session channel project agent user "
               "network firewall router switch printer laptop phone battery screen keyboard mouse camera")
WORDS = _VOCABULARY.split()
SOURCE = json.dumps({"type": "User", "id": "u1", "name": "Ann"})


def text_of(i: int, rng: random.Random) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(12))
    return f"note {i}: {words} (ref ERR_{i % 997}_{i})"


def build(path: Path, rows: int) -> float:
    """Write the clean store; returns seconds taken."""
    started = time.perf_counter()
    rng = random.Random(7)
    db = Database(str(path))
    try:
        with db.write() as s:
            s.meta.put_vector_state(VectorState(f"fake-hash-{DIM}", DIM, None))
        for start in range(0, rows, BATCH):
            with db.write() as s:
                for i in range(start, min(rows, start + BATCH)):
                    text = text_of(i, rng)
                    stamp = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00+00:00"
                    draft = MemoryDraft(f"agent-{i % AGENTS}", "", "", f"msg-{i}", text, SOURCE, stamp,
                                        json.dumps({"n": i}))
                    s.memories.insert(draft, to_blob(fake_vector(text, DIM)))
            common.log(f"built {min(rows, start + BATCH):,} / {rows:,} rows")
        with db.write() as s:
            for i in range(max(1, rows // 100)):
                summary = f"session {i}: " + " ".join(rng.choice(WORDS) for _ in range(20))
                day = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
                draft = EpisodeDraft(f"agent-{i % AGENTS}", "", "", summary, "", f"{day}T09:00:00+00:00",
                                     f"{day}T10:00:00+00:00", False)
                s.episodes.insert(draft, to_blob(fake_vector(summary, DIM)))
            for a in range(AGENTS):
                s.profiles.upsert(f"agent-{a}", f"Profile of agent {a}.")
    finally:
        db.close()
    return time.perf_counter() - started


def checkup(path: Path, url: str, *flags: str) -> dict:
    """Run `python -m cpersona checkup --json FLAGS` on `path`; wall time + the report."""
    env = {"CPERSONA_DB_PATH": str(path), "CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": url,
           "PATH": "/usr/bin:/bin"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cpersona", "checkup", "--json", *flags], env=env,
                          capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"error": proc.stderr[-2000:]}
    return {"flags": " ".join(flags) or "(report only)", "exit": proc.returncode, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "elapsed_ms": report.get("elapsed_ms"), "status": report.get("status"),
            "severity_summary": report.get("severity_summary"),
            "issues": [(i["type"], i["severity"]) for i in report.get("issues", [])],
            "error": report.get("error")}


async def recall_while(server: common.McpServer, busy) -> tuple[list[float], int]:
    """Recall in a loop until `busy()` is False; (latencies ms, failures)."""
    rng = random.Random(11)
    latencies, failures = [], 0
    while busy():
        query = " ".join(rng.choice(WORDS) for _ in range(3))
        try:
            out, elapsed = await server.call("recall", {"agent_id": f"agent-{rng.randrange(AGENTS)}", "query": query})
            latencies.append(elapsed)
            failures += int(out.get("ok") is False or "error" in out)
        except common.ToolError:
            failures += 1
    return latencies, failures


async def phase(server: common.McpServer, label: str, work) -> dict:
    """Recall latency while `work()` (blocking, run in a thread) runs; None = a 10 s window."""
    done = {"flag": False, "result": None}

    async def runner() -> None:
        if work is None:
            await anyio.sleep(10)
        else:
            done["result"] = await anyio.to_thread.run_sync(work)
        done["flag"] = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner)
        latencies, failures = await recall_while(server, lambda: not done["flag"])
    summary = common.latency_summary(latencies)
    return {"phase": label, "recalls": len(latencies), "failures": failures, "recall_p50_ms": summary.get("p50_ms"),
            "recall_p95_ms": summary.get("p95_ms"), "recall_max_ms": summary.get("max_ms"),
            "checkup": done["result"]}


async def run(args, workdir: Path) -> dict:
    path = args.db or workdir / "health.db"
    built = 0.0
    if not path.exists():
        built = build(path, args.rows)
        common.log(f"built {args.rows:,} rows in {built:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
    fake = FakeEmbedServer().start()
    try:
        async with common.McpServer(path, "http", fake.url) as server:
            await common.warm_up(server, "agent-0")
            phases = [await phase(server, "baseline (no checkup)", None)]
            phases.append(await phase(server, "during checkup", lambda: checkup(path, fake.url)))
            phases.append(await phase(server, "during checkup --fix", lambda: checkup(path, fake.url, "--fix")))
            stderr = server.stderr_summary()
    finally:
        fake.stop()
    return {"rows": args.rows, "build_s": round(built, 1), "db_mb": round(path.stat().st_size / 1e6, 1),
            "phases": phases, "server_stderr": stderr}


def report(result: dict) -> None:
    rows = []
    for p in result["phases"]:
        c = p["checkup"] or {}
        rows.append((p["phase"], c.get("wall_s", "-"), c.get("cpu_s", "-"), c.get("elapsed_ms", "-"),
                     c.get("status", "-"), c.get("exit", "-"), p["recalls"], p["failures"],
                     common.ms(p["recall_p50_ms"]), common.ms(p["recall_p95_ms"]), common.ms(p["recall_max_ms"])))
    print(f"\ncheckup on {result['rows']:,} memories ({result['db_mb']} MB file)")
    common.print_table(("phase", "checkup wall s", "cpu s", "report ms", "status", "exit", "recalls", "failed",
                        "recall p50", "p95", "max"), rows)
    for p in result["phases"]:
        if p["checkup"]:
            print(f"{p['phase']}: issues {p['checkup']['issues']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="memories in the store (default 100,000)")
    parser.add_argument("--out", type=Path, default=common.REPO / "benchmarks" / "results" / "health.json")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (DB + server stderr)")
    parser.add_argument("--db", type=Path, help="store to use; built there first when absent (kept: building "
                        "100k rows takes minutes)")
    args = parser.parse_args()
    machine = common.machine_info()
    result = common.run_in_workdir("cpersona-health-", args.keep, run, args)
    report(result)
    note = common.busy_machine_note(machine["loadavg_start"])
    if note:
        print(note)
    common.write_json(args.out, {"machine": {**machine, "loadavg_end": common.loadavg()}, **result})


if __name__ == "__main__":
    main()
