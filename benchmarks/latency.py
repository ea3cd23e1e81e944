"""Store and recall latency of cpersona over MCP stdio as the store fills up.

For each size (1k and 10k rows; 100k with `--with-100k`) this

1. generates the synthetic SCALE corpus (`../shared/data/scale/make_scale.py N --out <tmp>`),
2. spawns the real server (`python -m cpersona`, CPERSONA_EMBEDDING_MODE=http) against the
   deterministic fake /embed server (`cpersona.devtools.fake_embed`, dim 512, in this
   process) and a fresh SQLite file,
3. stores the corpus with sequential MCP calls (store/s, per-call p50/p95),
4. waits until the server's startup calibration has finished (a database copied from
   `--db-cache` has no calibration file, so the server recalibrates every agent in the
   background first: ~15 s at 10k rows with the bundled model, during which recalls share
   the CPU with it),
5. recalls up to `--max-queries` (default 500) queries, evenly spaced, and reports recall
   p50 / p95 / p99 (client-side wall ms per call), the server's peak RSS (VmHWM of the
   server process) and R@10 / NDCG@10 as a sanity check (fake vectors: not a quality claim).

Targets printed next to the results: recall p50 ≤ 10 ms at 10k rows, ≤ 40 ms at 100k,
store ≥ 300/s. Writes JSON (default `benchmarks/results/latency.json`).

Usage::

    python benchmarks/latency.py [--with-100k] [--sizes 1000,10000] [--max-queries 500]
        [--data DIR] [--out PATH] [--keep] [--db-url postgresql://…] [--fill mcp|import]
        [--embedding http|local|none] [--db-cache DIR]

`--embedding local` runs the bundled model instead of the fake server; `--db-cache DIR`
stores each SQLite corpus once (`DIR/scale-<N>-<embedding>.db`) and later runs copy it, so
recall can be compared across commits without storing 100k rows again (a database stored with
the fake server can be turned into a `local` one with `cpersona reembed --all`).

`--fill import` loads the corpus with `cpersona import` (one bulk import of a JSONL file, the
server's queue then embeds every row) instead of one MCP store per row: for recall latency at
sizes where sequential stores would take an hour; store/s then reports the import's rows/s.

With `--db-url` every size runs twice in the same window — on a fresh SQLite file, then on a
fresh schema of that PostgreSQL server (dropped afterwards) — and the cross-node visibility
delay is measured: two server nodes (in-process Engines with their own pools and change
feeds) on one database, ms from a store acknowledged on node A until node B's recall ranks
the row first by vector.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import pg

DIM = 512
#: (size → recall p50 ms target); store target applies to every size.
RECALL_P50_TARGET_MS = {10_000: 10.0, 100_000: 40.0}
STORE_TARGET_PER_S = 300.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000", help="comma-separated corpus sizes (default 1000,10000)")
    p.add_argument("--with-100k", action="store_true", help="also run 100,000 rows (store alone takes minutes)")
    p.add_argument("--max-queries", type=int, default=500, help="recalls per size, evenly spaced (default 500)")
    p.add_argument("--data", type=Path, default=common.DEFAULT_DATA,
                   help=f"data folder (default {common.DEFAULT_DATA})")
    p.add_argument("--out", type=Path, default=common.RESULTS / "latency.json", help="JSON output")
    p.add_argument("--embedding", choices=("http", "local", "none"), default="http",
                   help="http = fake /embed server (default); local = the bundled model; "
                        "none = keyword-only, to isolate the embedding cost")
    p.add_argument("--db-cache", type=Path, default=None,
                   help="folder of stored SQLite corpora: one stored by an earlier run with the same size and "
                        "embedding is copied from here instead of storing again (store columns then show '-'); "
                        "a new one is saved here after its store phase")
    p.add_argument("--server-env", action="append", metavar="KEY=VALUE",
                   help="extra environment variable for the server (repeatable), e.g. OPENBLAS_NUM_THREADS=1")
    p.add_argument("--keep", action="store_true", help="keep the temp folder (corpora, DBs, server logs)")
    p.add_argument("--db-url", default="", help="also run every size on this PostgreSQL server (fresh schema)")
    p.add_argument("--fill", choices=("mcp", "import"), default="mcp",
                   help="mcp = one store call per row (default); import = one bulk `cpersona import`")
    args = p.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.with_100k and 100_000 not in args.size_list:
        args.size_list.append(100_000)
    return args


def fake_embed_cost_ms(texts: list[str]) -> float:
    """Mean ms the fake /embed server spends hashing one text (included in every store and
    recall of this benchmark, on top of the HTTP round trip)."""
    from cpersona.devtools.fake_embed import fake_vector

    started = time.perf_counter()
    for t in texts:
        fake_vector(t, DIM)
    return (time.perf_counter() - started) * 1000 / max(1, len(texts))


async def run_size(n: int, args: argparse.Namespace, url: str, workdir: Path) -> list[dict]:
    """The size on SQLite, then (with --db-url) on PostgreSQL, back to back."""
    folder = workdir / f"scale-{n}"
    gen_s = common.generate_scale(args.data, n, folder)
    data = common.load_dataset(folder, f"scale-{n}")
    queries = common.select_evenly(data.queries, args.max_queries)
    common.log(f"scale {n}: {len(data.memories)} memories, {len(queries)} of {len(data.queries)} queries "
               f"(generated in {gen_s:.1f}s)")
    base = {"size": n, "memories": len(data.memories), "queries_total": len(data.queries),
            "queries_evaluated": len(queries), "generate_s": round(gen_s, 2)}
    rows = [await run_backend({**base, "backend": "sqlite"}, data, queries, args, url, workdir,
                              workdir / f"bench-{n}.db")]
    if args.db_url:
        with pg.fresh_schema(args.db_url, f"latency{n}") as schema_url:
            rows.append(await run_backend({**base, "backend": "postgresql"}, data, queries, args, url, workdir,
                                          schema_url))
    return rows


async def run_backend(row: dict, data, queries: list[dict], args: argparse.Namespace, url: str, workdir: Path,
                      db: Path | str) -> dict:
    """Store the corpus and recall the queries through one server on `db` (file or URL)."""
    n, backend = row["size"], row["backend"]
    env = common.parse_server_env(args.server_env)
    if pg.is_url(db):
        env["CPERSONA_DB_URL"] = str(db)
    cached = args.db_cache / f"scale-{n}-{args.embedding}.db" if args.db_cache and not pg.is_url(db) else None
    reuse = cached is not None and cached.exists()
    if reuse:
        shutil.copy(cached, db)
    elif args.fill == "import":
        imported = import_corpus(data.memories, workdir / f"corpus-{n}.jsonl", db)
    async with common.McpServer(workdir / f"bench-{n}.db", args.embedding, url,
                                errlog=workdir / f"server-{n}-{backend}.stderr.log", env=env) as server:
        row["server_pid"] = server.pid
        row["initialize_ms"] = round(server.init_ms, 1)
        if args.embedding != "none":
            row["embedding_ready_wait_s"] = round(await common.wait_embedding_ready(server, 120), 2)
        if reuse:
            rows, row["store"] = common.stored_rows(db), None
        else:
            store = imported if args.fill == "import" else \
                await common.store_corpus(server, data.memories, label=f"store {n} {backend}")
            rows, row["store"] = store.rows, {**store.as_json(), "fill": args.fill}
        if args.embedding != "none":
            _waited, left = await common.wait_all_embedded(db, 900 if args.fill == "mcp" else 1800)
            row["rows_without_vector"] = left
            row["embed_backfill_s"] = round(_waited, 1)
            row["calibration_wait_s"] = round(await common.wait_calibration_settled(server, queries[0]["agent_id"]), 1)
        await common.warm_up(server, queries[0]["agent_id"])
        cpu_before = common.proc_cpu_s(server.pid)
        rec = await common.recall_queries(server, queries, 10, rows, label=f"recall {n} {backend}")
        cpu_after = common.proc_cpu_s(server.pid)
        if cpu_before is not None and cpu_after is not None:  # CPU the server spent per recall (all threads)
            row["server_cpu_ms_per_recall"] = round((cpu_after - cpu_before) * 1000 / max(1, len(queries)), 2)
        row.update(server.memory())
        row["server_stderr"] = server.stderr_summary()
        row["env"] = server.knobs()
    scores = common.aggregate(rec.per_query)
    row["recall"] = {**common.latency_summary(rec.ms), "responses_with_advisory": rec.advisories,
                     "error_responses": rec.errors, "unmapped_rows": rec.unmapped_rows}
    row["metrics"] = scores
    row["db_file_mb"] = pg.store_size_mb(db)
    if cached is not None and not reuse:
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(db, cached)
    if args.embedding == "http":
        row["fake_embed_ms_per_text"] = round(fake_embed_cost_ms([q["query"] for q in queries[:200]]), 3)
    row["targets"] = targets(row)
    return row


def import_corpus(memories: list[dict], path: Path, db: Path | str) -> common.StoreReport:
    """Load the corpus with one `cpersona import` (rows keep their data-set id as msg_id);
    the report maps row ids to data-set ids like the per-call fill, timed as a whole."""
    import json
    import os

    with path.open("w", encoding="utf-8") as out:
        for mem in memories:
            out.write(json.dumps({"content": mem["text"], "agent_id": mem["agent_id"], "msg_id": mem["id"],
                                  **({"timestamp": mem["created_at"]} if mem.get("created_at") else {})}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_")}
    env.update(CPERSONA_UPDATE_CHECK="false", CPERSONA_EMBEDDING_MODE="none",
               **({"CPERSONA_DB_URL": str(db)} if pg.is_url(db) else {"CPERSONA_DB_PATH": str(db)}))
    report = common.StoreReport()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cpersona", "import", str(path), "--json"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    report.wall_s = time.perf_counter() - started
    for row_id, msg_id in common.row_ids(db):
        report.rows[row_id].append(msg_id)
    report.counts["stored"] = len(report.rows)
    report.ms = [report.wall_s * 1000 / max(1, len(report.rows))] * len(report.rows)  # mean ms per row
    return report


def targets(row: dict) -> dict:
    """Each applicable target with the measured value and pass/miss."""
    out = {}
    if row["store"] is not None:
        out["store_per_s"] = {"target": f">= {STORE_TARGET_PER_S:g}", "value": row["store"]["stores_per_s"],
                              "ok": (row["store"]["stores_per_s"] or 0) >= STORE_TARGET_PER_S}
    p50_target = RECALL_P50_TARGET_MS.get(row["size"])
    if p50_target is not None:
        out["recall_p50_ms"] = {"target": f"<= {p50_target:g}", "value": row["recall"]["p50_ms"],
                                "ok": row["recall"]["p50_ms"] <= p50_target}
    return out


async def run(args: argparse.Namespace, workdir: Path) -> list[dict]:
    from cpersona.devtools.fake_embed import FakeEmbedServer

    rows = []
    if args.embedding != "http":
        for n in args.size_list:
            rows.extend(await run_size(n, args, "", workdir))
        return rows
    with FakeEmbedServer(dim=DIM) as fake:
        for n in args.size_list:
            rows.extend(await run_size(n, args, fake.url, workdir))
        if args.db_url:
            with pg.fresh_schema(args.db_url, "visibility") as schema_url:
                feed, delays = pg.visibility_delays(schema_url, fake.url)
            rows.append({"visibility_ms": common.latency_summary(delays), "feed_ms": common.latency_summary(feed),
                         "visibility_samples": len(delays)})
    return rows


def report(rows: list[dict], embedding: str, load_start: list[float] | None) -> None:
    how = {"http": f"fake /embed (dim {DIM})", "local": "the bundled model"}.get(embedding, "none (keyword only)")
    print(f"\n== latency: MCP stdio, sequential calls, embedding = {how}; times are client-side ms per call")
    table = []
    visibility = [r for r in rows if "visibility_ms" in r]
    rows = [r for r in rows if "size" in r]
    for r in rows:
        st, rc, o = r["store"], r["recall"], r["metrics"]["overall"]
        stored = ("-", "-", "-") if st is None else \
            (f"{st['stores_per_s']:.0f}", common.ms(st["per_call"]["p50_ms"]), common.ms(st["per_call"]["p95_ms"]))
        table.append((f"{r['size']:,}", r["backend"], *stored, rc["n"], common.ms(rc["p50_ms"]),
                      common.ms(rc["p95_ms"]), common.ms(rc["p99_ms"]), f"{r['peak_rss_mb']:.1f}",
                      f"{r['db_file_mb']:.1f}", o["recall@10"], o["ndcg@10"], f"{o['mean_rows']:.1f}"))
    common.print_table(("rows", "backend", "store/s", "store p50", "store p95", "recalls", "recall p50", "p95", "p99",
                        "peak RSS MB", "DB MB", "R@10", "NDCG@10", "rows/q"), table)
    print("\ntargets")
    checks = []
    for r in rows:
        for name, t in r["targets"].items():
            checks.append((f"{r['size']:,} {r['backend']}", name, t["target"], f"{t['value']:.1f}",
                           "PASS" if t["ok"] else "MISS"))
    common.print_table(("rows", "metric", "target", "measured", ""), checks)
    floors = [(f"{r['size']:,}", common.BASELINE_FLOOR[f"scale-{r['size']}"]) for r in rows
              if f"scale-{r['size']}" in common.BASELINE_FLOOR]
    for size, f in floors:
        print(f"(fts5 floor at {size} rows, README, 1000 q, in-process: R@10 {f['recall@10']}, "
              f"NDCG@10 {f['ndcg@10']}, p50 {f['p50_ms']} ms / p95 {f['p95_ms']} ms)")
    for r in rows:
        notes = []
        if r.get("rows_without_vector"):
            notes.append(f"{r['rows_without_vector']} rows without a vector")
        advisories = r["recall"]["responses_with_advisory"] if embedding != "none" else 0  # none: always a hint
        if advisories or r["recall"]["error_responses"]:
            notes.append(f"advisories {r['recall']['responses_with_advisory']}, "
                         f"errors {r['recall']['error_responses']}")
        if r["server_stderr"]["flagged"]:
            notes.append(f"server stderr flagged lines: {r['server_stderr']['first'][:3]}")
        if r.get("server_cpu_ms_per_recall") is not None:
            notes.append(f"server CPU {r['server_cpu_ms_per_recall']} ms per recall (all threads + embedding worker)")
        if "fake_embed_ms_per_text" in r:
            notes.append(f"fake /embed hashing {r['fake_embed_ms_per_text']} ms/text is included in every call")
        if notes:
            print(f"  {r['size']:,}: " + "; ".join(notes))
    for v in visibility:
        ms, feed = v["visibility_ms"], v["feed_ms"]
        print(f"\ncross-node visibility, n={v['visibility_samples']} stores acknowledged on node A: node B's change "
              f"feed has the row after p50 {common.ms(feed['p50_ms'])} / p95 {common.ms(feed['p95_ms'])} / max "
              f"{common.ms(feed['max_ms'])} ms; its recall ranks it first by vector after p50 "
              f"{common.ms(ms['p50_ms'])} / p95 {common.ms(ms['p95_ms'])} / max {common.ms(ms['max_ms'])} ms "
              "(that recall included)")
    busy = common.busy_machine_note(load_start)
    if busy:
        print("  " + busy)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    machine = common.machine_info()
    rows = common.run_in_workdir("cpersona-latency-", args.keep, run, args)
    report(rows, args.embedding, machine["loadavg_start"])
    common.write_json(args.out, {
        "benchmark": "latency",
        "embedding": f"http (fake /embed, dim {DIM})" if args.embedding == "http" else args.embedding,
        "max_queries": args.max_queries,
        "targets": {"recall_p50_ms": RECALL_P50_TARGET_MS, "store_per_s": STORE_TARGET_PER_S},
        "total_wall_s": round(time.perf_counter() - started, 1),
        "machine": {**machine, "loadavg_end": common.loadavg()}, "sizes": rows,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
