"""Retrieval quality of cpersona over MCP stdio on a public evaluation set.

Spawns the real server (`python -m cpersona`) against a fresh SQLite file in a temp
folder, stores every memory of the set under its own agent_id (message.id = the set's
id, message.timestamp = created_at when present), recalls every query with its own
agent_id, and scores the ranking (the response REVERSED: the server lists worst → best):

* R@5, R@10, MRR@10, NDCG@10 (binary gains, graded when the query has `relevance`),
  overall and per category (JSQuAD has none: its `split` is used);
* mean rows returned per query, queries with zero rows;
* store/s and store / recall p50 / p95 / p99 (client-side wall time per call).

All calls are sequential (a measurement, not a load test). With `--embedding local` the
run waits until the bundled model answers before storing, and until every stored row has
a vector (read-only count of `embedding IS NULL` in the DB), then until the server's own
calibration has caught up with the store (`common.wait_calibration_settled`: no agent due
for one — the state of a server that has kept up with its memories) before recalling.
`--embedding http` uses CPERSONA_EMBEDDING_URL when set, else the deterministic fake
/embed server (plumbing check only — its vectors say nothing about quality).

Usage::

    python benchmarks/retrieval.py --dataset locomo [--embedding none|local|http]
        [--limit 10] [--max-queries N] [--data DIR] [--out PATH] [--keep-db]
        [--calibrate] [--no-gate] [--db-url postgresql://…]

`--calibrate` calls calibrate_threshold for every agent after storing instead of waiting for
the server to calibrate them by itself; `--no-gate` runs the server with
CPERSONA_GATE_ENABLED=false; `--db-url` stores into a fresh schema of that PostgreSQL server
(dropped afterwards) instead of a SQLite file — compare the two runs' JSON with
benchmarks/compare.py for the side-by-side NDCG@10. Also reported: how many queries whose answer text is stored
verbatim came back empty (must be none).

Data sets: locomo, jsquad (default: 2,000 of 8,862 queries, every k-th), longmemeval_oracle,
scale-<dir> (folder under <data>/scale, e.g. scale-sample-1000, or an existing path).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import evalsets
import pg

#: Default --max-queries per data set (others: all queries).
DEFAULT_MAX_QUERIES = {"jsquad": 2000}
LAT_KEYS = ("p50_ms", "p95_ms", "p99_ms", "max_ms")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True,
                   help="locomo | jsquad | longmemeval_oracle | longmemeval_haystack | tiny | scale-<dir>")
    p.add_argument("--foreign", default=None, metavar="DATASET",
                   help="also ask DATASET's questions (as many as evaluated, evenly spaced) of this set's agents: "
                        "unanswerable there; reports rows/question and the empty share")
    p.add_argument("--haystack-questions", type=int, default=40,
                   help="longmemeval_haystack: questions, one agent each (default 40)")
    p.add_argument("--haystack-turns", type=int, default=400,
                   help="longmemeval_haystack: turns per agent at least (default 400)")
    p.add_argument("--embedding", choices=("none", "local", "http"), default="none",
                   help="CPERSONA_EMBEDDING_MODE of the server (default none)")
    p.add_argument("--limit", type=int, default=10, help="recall limit, 1..100 (default 10)")
    p.add_argument("--max-queries", type=int, default=None,
                   help="evaluate this many queries, evenly spaced (default: all; jsquad 2000; 0 = all)")
    p.add_argument("--data", type=Path, default=common.DEFAULT_DATA,
                   help=f"data folder (default {common.DEFAULT_DATA})")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON output (default benchmarks/results/retrieval-<dataset>-<embedding>.json)")
    p.add_argument("--ready-timeout", type=float, default=180.0, help="seconds to wait for the embedding model")
    p.add_argument("--backfill-timeout", type=float, default=900.0, help="seconds to wait until every row has a vector")
    p.add_argument("--server-env", action="append", metavar="KEY=VALUE",
                   help="extra environment variable for the server (repeatable), e.g. OPENBLAS_NUM_THREADS=1")
    p.add_argument("--keep-db", action="store_true", help="keep the temp folder with the DB and server log")
    p.add_argument("--calibrate", action="store_true",
                   help="call calibrate_threshold for every agent after storing (needs embeddings): the default "
                        "setup of a deployed server, whose gate is calibrated from its corpus")
    p.add_argument("--no-gate", action="store_true",
                   help="run the server with CPERSONA_GATE_ENABLED=false (shows what the quality gate costs)")
    p.add_argument("--db-url", default="",
                   help="run on this PostgreSQL server (a fresh schema, dropped afterwards) instead of SQLite")
    args = p.parse_args(argv)
    if not 1 <= args.limit <= 100:
        p.error("--limit must be in 1..100")
    return args


def dataset_label(name: str) -> str:
    return name.replace("/", "_").strip("_") or "dataset"


async def run(args: argparse.Namespace, workdir: Path) -> dict:
    """The benchmark on a SQLite file in `workdir`, or on a fresh PostgreSQL schema."""
    if not args.db_url:
        return await run_on(args, workdir, workdir / "bench.db")
    with pg.fresh_schema(args.db_url, "retrieval") as url:
        return await run_on(args, workdir, url)


async def run_on(args: argparse.Namespace, workdir: Path, db: Path | str) -> dict:
    data = evalsets.load(args.dataset, args.data, args.haystack_questions, args.haystack_turns)
    folder = data.path
    cap = args.max_queries if args.max_queries is not None else DEFAULT_MAX_QUERIES.get(args.dataset)
    queries = common.select_evenly(data.queries, cap)
    unanswerable = [q for q in queries if not q["relevant"]]
    queries = [q for q in queries if q["relevant"]]
    if args.foreign:
        other = evalsets.load(args.foreign, args.data, args.haystack_questions, args.haystack_turns)
        unanswerable += evalsets.foreign(other.queries, sorted({q["agent_id"] for q in queries}), len(queries))
    sampling = (f"all {len(queries)} queries" if len(queries) == len(data.queries) else
                f"{len(queries)} of {len(data.queries)} queries, evenly spaced "
                f"(index i*{len(data.queries)}//{len(queries)})")
    common.log(f"{args.dataset}: {len(data.memories)} memories, {sampling}; "
               f"embedding={args.embedding}; folder {folder}")

    url = ""
    fake = None
    if args.embedding == "http":
        url = os.environ.get("CPERSONA_EMBEDDING_URL", "")
        if not url:
            from cpersona.devtools.fake_embed import FakeEmbedServer

            fake = FakeEmbedServer(dim=512).start()
            url = fake.url
            common.log(f"no CPERSONA_EMBEDDING_URL: using the fake /embed server {url} (NOT a quality measurement)")

    result: dict = {"benchmark": "retrieval", "backend": "postgresql" if pg.is_url(db) else "sqlite",
                    "dataset": args.dataset, "data_path": str(folder),
                    "embedding": args.embedding, "embedding_url": url or None, "fake_embedder": fake is not None,
                    "limit": args.limit, "memories": len(data.memories), "queries_total": len(data.queries),
                    "queries_evaluated": len(queries), "query_sampling": sampling}
    try:
        server_env = common.parse_server_env(args.server_env)
        if pg.is_url(db):
            server_env["CPERSONA_DB_URL"] = str(db)
        if args.no_gate:
            server_env["CPERSONA_GATE_ENABLED"] = "false"
        result["gate"] = "off" if args.no_gate else "on"
        async with common.McpServer(workdir / "bench.db", args.embedding, url, errlog=workdir / "server.stderr.log",
                                    env=server_env) as server:
            result["server"] = {"pid": server.pid, "initialize_ms": round(server.init_ms, 1), "env": server.knobs()}
            if args.embedding != "none":
                waited = await common.wait_embedding_ready(server, args.ready_timeout)
                result["embedding_ready_wait_s"] = round(waited, 2)
                common.log(f"embedding backend ready after {waited:.1f}s")

            store = await common.store_corpus(server, data.memories)
            result["store"] = store.as_json()
            common.log(f"stored {len(data.memories)} in {store.wall_s:.1f}s ({dict(store.counts)})")

            if args.embedding != "none":
                waited, left = await common.wait_all_embedded(db, args.backfill_timeout)
                result["backfill_wait_s"] = round(waited, 2)
                result["rows_without_vector"] = left
                if left:
                    common.log(f"WARNING: {left} rows still without a vector after {waited:.0f}s")
            null, total = common.count_unembedded(db)
            result["db_rows"] = {"memories": total, "embedding_null": null}
            if args.calibrate:
                result["calibration"] = await calibrate_agents(server, sorted({m["agent_id"] for m in data.memories}))
            elif args.embedding != "none":  # the state of a server that has kept up with its store
                waited = await common.wait_calibration_settled(server, sorted({m["agent_id"] for m in data.memories}),
                                                               args.backfill_timeout)
                result["calibration_wait_s"] = round(waited, 1)
                common.log(f"the server's own calibration settled after {waited:.1f}s")

            await common.warm_up(server, queries[0]["agent_id"] if queries else common.PROBE_AGENT)
            rec = await common.recall_queries(server, queries, args.limit, store.rows)
            unans = await common.recall_queries(server, unanswerable, args.limit, store.rows, "unanswerable")
            result["server"].update(server.memory())
            result["server"]["stderr"] = server.stderr_summary()
    finally:
        if fake is not None:
            fake.stop()

    stored = answer_stored(data)
    for row in rec.per_query:
        row["answer_stored"] = stored.get(row["id"])
    scores = common.aggregate(rec.per_query)
    result.update({
        "metrics": scores,
        "recall": {**common.latency_summary(rec.ms), "responses_with_advisory": rec.advisories,
                   "error_responses": rec.errors, "unmapped_rows": rec.unmapped_rows},
        "baseline_floor": common.BASELINE_FLOOR.get(args.dataset),
        "db_file_mb": pg.store_size_mb(db),
        "per_query": rec.per_query,
        "unanswerable": {**evalsets.unanswerable_summary(unans.per_query), "foreign": args.foreign,
                         "per_query": [{"id": r["id"], "rows": r["rows"]} for r in unans.per_query]},
        "empty_with_stored_answer": [r["id"] for r in rec.per_query if r["rows"] == 0 and r["answer_stored"]],
        "queries_with_stored_answer": sum(1 for r in rec.per_query if r["answer_stored"]),
    })
    return result


async def calibrate_agents(server, agents: list[str]) -> dict:
    """calibrate_threshold for every agent (MCP); a summary of what it measured."""
    import time as _time

    started = _time.perf_counter()
    per_agent = {}
    for agent in agents:
        payload, ms = await server.call("calibrate_threshold", {"agent_id": agent})
        fused = payload.get("fused_gate") or {}
        per_agent[agent] = {
            "ok": payload.get("ok"), "error": payload.get("error"), "ms": round(ms, 1),
            "vector_threshold": payload.get("new_threshold"), "proxy_source": payload.get("proxy_source"),
            "youden_j": payload.get("youden_j"),
            "fused_gate": fused.get("threshold"), "fused_gate_note": payload.get("fused_gate_note"),
            "fused_gate_error": payload.get("fused_gate_error"), "sidecar_persisted": payload.get("sidecar_persisted"),
        }
    wall = _time.perf_counter() - started
    ok = sum(1 for a in per_agent.values() if a["ok"])
    common.log(f"calibrated {ok}/{len(agents)} agents in {wall:.1f}s")
    return {"agents": len(agents), "ok": ok, "wall_s": round(wall, 1), "per_agent": per_agent}


def answer_stored(data) -> dict[str, bool]:
    """query id → whether one of its answer strings (≥ 3 chars) occurs verbatim in a memory
    of the query's agent (case-insensitive). Such a query must never come back empty."""
    texts: dict[str, list[str]] = {}
    for mem in data.memories:
        texts.setdefault(mem["agent_id"], []).append(mem["text"].lower())
    out = {}
    for q in data.queries:
        answers = q.get("answers") if isinstance(q.get("answers"), list) else [q.get("answer")]
        answers = [str(a).strip().lower() for a in answers if a is not None and len(str(a).strip()) >= 3]
        out[q["id"]] = any(a in t for a in answers for t in texts.get(q["agent_id"], []))
    return out


def report(result: dict) -> None:
    m = result["metrics"]
    print(f"\n== retrieval: {result['dataset']}  backend={result.get('backend', 'sqlite')}  "
          f"embedding={result['embedding']}"
          f"{' (fake /embed)' if result['fake_embedder'] else ''}  limit={result['limit']}")
    print(f"memories {result['memories']}; {result['query_sampling']}; gate {result.get('gate', 'on')}"
          f"{'; calibrated' if result.get('calibration') else ''}")
    rows = [(name, s["queries"], s["recall@5"], s["recall@10"], s["mrr@10"], s["ndcg@10"], f"{s['mean_rows']:.2f}",
             s["zero_row_queries"]) for name, s in m["categories"].items()]
    o = m["overall"]
    rows.append(("OVERALL", o["queries"], o["recall@5"], o["recall@10"], o["mrr@10"], o["ndcg@10"],
                 f"{o['mean_rows']:.2f}", o["zero_row_queries"]))
    base = result.get("baseline_floor")
    if base:
        rows.append((f"fts5 floor (README, {base['queries']} q)", "", "", base["recall@10"], "", base["ndcg@10"],
                     "", ""))
    common.print_table(("category", "queries", "R@5", "R@10", "MRR@10", "NDCG@10", "rows/q", "zero-row q"), rows)
    un = result.get("unanswerable") or {}
    if un.get("queries"):
        print(f"unanswerable questions ({un['queries']}{', foreign: ' + un['foreign'] if un.get('foreign') else ''}): "
              f"rows/q {un['rows_per_query']:.2f}, empty {un['empty_rate']:.1%}")

    st, rc = result["store"], result["recall"]
    print()
    common.print_table(
        ("calls", "n", "per second", "p50 ms", "p95 ms", "p99 ms", "max ms"),
        [("store", st["calls"], f"{st['stores_per_s']:.1f}", *(common.ms(st["per_call"][k]) for k in LAT_KEYS)),
         ("recall", rc["n"], f"{1000 / rc['mean_ms']:.1f}", *(common.ms(rc[k]) for k in LAT_KEYS))],
    )
    if base:
        print(f"(fts5 floor latency, in-process: p50 {base['p50_ms']} ms / p95 {base['p95_ms']} ms)")
    srv = result["server"]
    notes = [f"store results {st['results']}", f"distinct rows {st['distinct_rows']}",
             f"server peak RSS {srv.get('peak_rss_mb')} MB", f"DB {result['db_file_mb']} MB",
             f"rows without vector {result['db_rows']['embedding_null']}/{result['db_rows']['memories']}",
             f"queries whose answer text is stored: {result['queries_with_stored_answer']}, of them empty: "
             f"{len(result['empty_with_stored_answer'])} {result['empty_with_stored_answer'][:5]}"]
    cal = result.get("calibration")
    if cal:
        gates = [a["fused_gate"] for a in cal["per_agent"].values() if a["fused_gate"] is not None]
        thresholds = [a["vector_threshold"] for a in cal["per_agent"].values() if a["vector_threshold"] is not None]
        notes.append(f"calibrated {cal['ok']}/{cal['agents']} agents in {cal['wall_s']} s; vector thresholds "
                     f"{min(thresholds, default='-')}..{max(thresholds, default='-')}; fused gates "
                     f"{gates or 'none (heuristic kept)'}")
    if "embedding_ready_wait_s" in result:
        notes.append(f"model ready wait {result['embedding_ready_wait_s']} s, "
                     f"backfill wait {result.get('backfill_wait_s')} s")
    advisories = rc["responses_with_advisory"] if result["embedding"] != "none" else 0  # mode none: always a hint
    if advisories or rc["error_responses"] or rc["unmapped_rows"]:
        notes.append(f"recall advisories {rc['responses_with_advisory']}, errors {rc['error_responses']}, "
                     f"unmapped rows {rc['unmapped_rows']}")
    if srv["stderr"]["flagged"]:
        notes.append(f"server stderr: {srv['stderr']['flagged']} warning/error lines, "
                     f"first: {srv['stderr']['first'][:3]}")
    busy = common.busy_machine_note(result["machine"]["loadavg_start"])
    if busy:
        notes.append(busy)
    for note in notes:
        print("  " + note)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    suffix = "-pg" if args.db_url else ""
    out = args.out or common.RESULTS / f"retrieval-{dataset_label(args.dataset)}-{args.embedding}{suffix}.json"
    common.run_benchmark("cpersona-bench-", args, run, report, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
