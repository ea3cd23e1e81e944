"""Export and import speed over MCP stdio, and how long an import holds up recall.

For each size (10k and 100k rows by default) this

1. generates the synthetic SCALE corpus (`../shared/data/scale/make_scale.py N --out <tmp>`)
   and writes it as a `cpersona-export/1.0` file (header + one memory line per row);
2. spawns the real server (`python -m cpersona`, keyword-only by default so the numbers are
   the portability path's, not the embedding's) on a fresh SQLite file;
3. calls `import_memories` on the file while a second task recalls the corpus's queries
   back to back on the same MCP session: reports import rows/s and every recall's
   client-side latency DURING the import;
4. recalls the same queries after the import (baseline p50 / p95 / max on the full store),
   and the EXCESS of each recall during the import over the same query afterwards — the
   time the import itself cost that recall (max = the longest stall; target ≤ 100 ms);
5. calls `export_memories` (all agents) and reports export rows/s and the file size;
6. imports the exported file again (every row a duplicate: the re-import cost).
Rows/s count the rows of the file (the SCALE corpus repeats some texts per agent: those are
skipped as duplicates, as a user's would be).

Writes JSON (default `benchmarks/results/portability.json`).

Usage::

    python benchmarks/portability.py [--sizes 10000,100000] [--recall-queries 200]
        [--embedding none|http] [--data DIR] [--out PATH] [--keep]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

#: Longest acceptable recall latency while an import runs (ms).
STALL_TARGET_MS = 100.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes (default 10000,100000)")
    p.add_argument("--recall-queries", type=int, default=200, help="distinct queries cycled by the recall task")
    p.add_argument("--embedding", choices=("none", "http"), default="none",
                   help="none = keyword only (default); http = fake /embed server (the queue embeds meanwhile)")
    p.add_argument("--data", type=Path, default=common.DEFAULT_DATA,
                   help=f"data folder (default {common.DEFAULT_DATA})")
    p.add_argument("--out", type=Path, default=common.RESULTS / "portability.json", help="JSON output")
    p.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = p.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",") if s.strip()]
    return args


def write_export(folder: Path, target: Path) -> tuple[int, list[dict]]:
    """The corpus as a cpersona-export/1.0 file; returns (rows, queries)."""
    memories = common.read_jsonl(folder / "memories.jsonl")
    queries = common.read_jsonl(folder / "queries.jsonl")
    header = {"_type": "header", "version": "cpersona-export/1.0", "agent_id": "", "exported_at": "",
              "memory_count": len(memories), "episode_count": 0, "has_profile": False, "profile_count": 0}
    with target.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for m in memories:
            out.write(json.dumps({"_type": "memory", "agent_id": m["agent_id"], "msg_id": m["id"],
                                  "content": m["text"], "timestamp": m["created_at"], "metadata": {"kind": m["kind"]},
                                  "created_at": m["created_at"].replace("T", " ")[:19]}, ensure_ascii=False) + "\n")
    return len(memories), queries


async def recall_loop(server: common.McpServer, queries: list[dict], stop, samples: list[tuple[int, float]]) -> None:
    """Recall back to back until `stop` is set, recording (query index, wall ms) per call."""
    i = 0
    while not stop.is_set():
        q = queries[i % len(queries)]
        _, ms = await server.call("recall", {"agent_id": q["agent_id"], "query": q["query"], "limit": 10})
        samples.append((i % len(queries), ms))
        i += 1


def excess(during: list[tuple[int, float]], after: list[float]) -> dict[str, float]:
    """How much longer each recall took during the import than the same query on the full
    store afterwards (ms): the import's own cost to recall, with the query's cost removed."""
    extra = sorted(ms - after[q] for q, ms in during)
    return {"p50_ms": round(common.percentile(extra, 50), 1), "p95_ms": round(common.percentile(extra, 95), 1),
            "max_ms": round(extra[-1], 1)} if extra else {}


async def one_size(args: argparse.Namespace, workdir: Path, n: int, url: str) -> dict[str, Any]:
    import anyio

    folder = workdir / f"scale-{n}"
    subprocess.run([sys.executable, str(args.data / "scale" / "make_scale.py"), str(n), "--out", str(folder)],
                   check=True, capture_output=True)
    exchange = workdir / f"exchange-{n}"
    exchange.mkdir()
    rows, queries = write_export(folder, exchange / "corpus.jsonl")
    queries = common.select_evenly(queries, args.recall_queries)
    env = {"CPERSONA_EXPORT_DIR": str(exchange), "CPERSONA_MAX_IMPORT_BYTES": str(1 << 32)}
    result: dict[str, Any] = {"size": n, "file_mb": round((exchange / "corpus.jsonl").stat().st_size / 2**20, 1)}
    async with common.McpServer(workdir / f"p{n}.db", args.embedding, url, env=env, timeout_s=3600) as server:
        during: list[tuple[int, float]] = []
        stop = anyio.Event()
        imported: dict[str, Any] = {}

        async def run_import() -> None:
            res, ms = await server.call("import_memories", {"input_path": "corpus.jsonl"})
            imported.update(res=res, ms=ms)
            stop.set()

        common.log(f"size {n}: importing {rows} rows while recalling")
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_import)
            tg.start_soon(recall_loop, server, queries, stop, during)
        res = imported["res"]
        assert res.get("ok") and res["imported_memories"] + res["skipped_memories"] == rows, res
        result["imported"], result["duplicates_in_file"] = res["imported_memories"], res["skipped_memories"]
        common.log(f"size {n}: import {imported['ms'] / 1000:.1f} s, {len(during)} recalls meanwhile")
        wal = workdir / f"p{n}.db-wal"
        result["wal_mb_after_import"] = round(wal.stat().st_size / 2**20, 1) if wal.exists() else 0.0
        result["import_rows_per_s"] = round(rows / (imported["ms"] / 1000), 1)
        result["import_s"] = round(imported["ms"] / 1000, 2)
        result["recall_during_import"] = common.latency_summary([ms for _, ms in during])
        after: list[float] = []
        for q in queries:
            _, ms = await server.call("recall", {"agent_id": q["agent_id"], "query": q["query"], "limit": 10})
            after.append(ms)
        result["recall_after_import"] = common.latency_summary(after)
        result["recall_excess_during_import"] = excess(during, after)
        exp, ms = await server.call("export_memories", {"agent_id": "", "output_path": "again.jsonl"})
        assert exp.get("ok") and exp["memories"] == res["imported_memories"], exp
        result["export_rows_per_s"] = round(exp["memories"] / (ms / 1000), 1)
        result["export_s"] = round(ms / 1000, 2)
        again, ms = await server.call("import_memories", {"input_path": "again.jsonl"})
        assert again["imported_memories"] == 0, again
        result["reimport_rows_per_s"] = round(exp["memories"] / (ms / 1000), 1)
        result["server_memory_mb"] = server.memory()
        result["stderr"] = server.stderr_summary()
    return result


async def run(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    url = ""
    fake = None
    if args.embedding == "http":
        from cpersona.devtools.fake_embed import FakeEmbedServer

        fake = FakeEmbedServer().start()
        url = fake.url
    try:
        return [await one_size(args, workdir, n, url) for n in args.size_list]
    finally:
        if fake is not None:
            fake.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    info = common.machine_info()
    started = time.perf_counter()
    results = common.run_in_workdir("cpersona-portability-", args.keep, run, args)
    rows = []
    for r in results:
        d, a, x = r["recall_during_import"], r["recall_after_import"], r["recall_excess_during_import"]
        verdict = "PASS" if x.get("max_ms") is not None and x["max_ms"] <= STALL_TARGET_MS else "MISS"
        rows.append([f"{r['size']:,}", f"{r['import_rows_per_s']:,.0f}", f"{r['export_rows_per_s']:,.0f}",
                     f"{r['reimport_rows_per_s']:,.0f}", str(d["n"]), common.ms(d.get("p50_ms")),
                     common.ms(d.get("max_ms")), common.ms(a["p50_ms"]), common.ms(a["max_ms"]),
                     common.ms(x.get("p95_ms")), f"{common.ms(x.get('max_ms'))} {verdict}"])
    common.print_table(["rows", "import/s", "export/s", "re-import/s", "recalls", "during p50", "during max",
                        "after p50", "after max", "excess p95", f"excess max (≤{STALL_TARGET_MS:g})"], rows)
    note = common.busy_machine_note(info.get("loadavg_start"))
    if note:
        print(note)
    common.write_json(args.out, {"machine": info, "settings": {"embedding": args.embedding, "sizes": args.size_list,
                                                               "recall_queries": args.recall_queries},
                                 "seconds": round(time.perf_counter() - started, 1), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
