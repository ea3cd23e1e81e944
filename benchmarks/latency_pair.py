"""Is build B's recall faster than build A's? Both servers run at once, each query goes to both.

On a shared machine the same build's recall p50 moves by ±2 ms from one run to the next
(other tenants of the host, its CPU frequency), more than most changes are worth. Here two
servers (`python -m cpersona` over MCP stdio) serve copies of one stored corpus side by side,
and every query is sent to A and to B back to back, in alternating order, so both meet the
same moment of the machine; the answer is the per-query difference B − A (median, and mean ±
standard error), plus each side's p50 and whether both returned the same rows.

The corpus is the SCALE database `latency.py --db-cache DIR --embedding local` stored (build it
with that command first). A build is chosen by its server environment, e.g. the code of a git
worktree: `--a-env PYTHONPATH=/path/to/worktree` (PYTHONPATH wins over the installed package).

Usage::

    python benchmarks/latency_pair.py --db-cache DIR [--size 10000] [--max-queries 300] [--passes 2]
        [--a-env KEY=VALUE ...] [--b-env KEY=VALUE ...] [--out PATH]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from mcp_server import McpServer


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db-cache", type=Path, required=True, help="folder holding scale-<N>-<embedding>.db")
    p.add_argument("--size", type=int, default=10_000, help="corpus size (default 10000)")
    p.add_argument("--embedding", default="local", choices=("local", "none"), help="the cached corpus's embeddings")
    p.add_argument("--max-queries", type=int, default=300, help="queries per pass, evenly spaced (default 300)")
    p.add_argument("--passes", type=int, default=2, help="passes over the queries (default 2)")
    p.add_argument("--a-env", action="append", help="KEY=VALUE for server A (repeatable)")
    p.add_argument("--b-env", action="append", help="KEY=VALUE for server B (repeatable)")
    p.add_argument("--data", type=Path, default=common.DEFAULT_DATA, help="data folder (default ../shared/data)")
    p.add_argument("--keep-db", action="store_true", help="keep the temp folder")
    p.add_argument("--out", type=Path, default=common.RESULTS / "latency-pair.json")
    return p.parse_args(argv)


def paired(a: list[float], b: list[float]) -> dict[str, float]:
    """p50 of each side and the per-query difference B − A: median, mean, standard error (ms)."""
    d = [y - x for x, y in zip(a, b)]
    se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else 0.0
    return {"a_p50": round(statistics.median(a), 2), "b_p50": round(statistics.median(b), 2),
            "diff_median": round(statistics.median(d), 2), "diff_mean": round(statistics.mean(d), 2),
            "diff_se": round(se, 2)}


async def run(args: argparse.Namespace, workdir: Path) -> dict:
    cached = args.db_cache / f"scale-{args.size}-{args.embedding}.db"
    if not cached.exists():
        raise SystemExit(f"{cached} is missing: build it with latency.py --sizes {args.size} --db-cache "
                         f"{args.db_cache} --embedding {args.embedding}")
    folder = workdir / f"scale-{args.size}"
    common.generate_scale(args.data, args.size, folder)  # the queries (the rows are the cached database's)
    queries = common.select_evenly(common.load_dataset(folder, f"scale-{args.size}").queries, args.max_queries)
    envs = {"A": common.parse_server_env(args.a_env), "B": common.parse_server_env(args.b_env)}
    dbs = {}
    for side in envs:
        (workdir / side).mkdir()
        dbs[side] = workdir / side / "bench.db"
        shutil.copy(cached, dbs[side])
    async with McpServer(dbs["A"], args.embedding, env=envs["A"]) as a, \
            McpServer(dbs["B"], args.embedding, env=envs["B"]) as b:
        for server in (a, b):
            await common.wait_calibration_settled(server, queries[0]["agent_id"])
            await common.warm_up(server, queries[0]["agent_id"])
        passes, differ = [], 0
        for n in range(args.passes):
            times: dict[str, list[float]] = {"A": [], "B": []}
            for i, q in enumerate(queries):
                call = {"agent_id": q["agent_id"], "query": q["query"], "limit": 10}
                order = (("A", a), ("B", b)) if (i + n) % 2 == 0 else (("B", b), ("A", a))
                rows = {}
                for side, server in order:
                    payload, ms = await server.call("recall", call)
                    times[side].append(ms)
                    rows[side] = [m.get("id") for m in payload.get("messages", [])]
                differ += rows["A"] != rows["B"]
            passes.append({"pass": n, **paired(times["A"], times["B"])})
            common.log(f"pass {n}: {passes[-1]}")
    return {"benchmark": "latency_pair", "size": args.size, "embedding": args.embedding,
            "queries": len(queries), "a_env": envs["A"], "b_env": envs["B"], "passes": passes,
            "answers_differing": differ}


def report(result: dict) -> None:
    print(f"\n== paired recall latency, {result['size']:,} rows, MCP stdio, both servers at once; "
          f"B − A per query (ms)")
    print(f"A: {result['a_env'] or '(default)'}\nB: {result['b_env'] or '(default)'}")
    print(f"{'pass':>4}  {'A p50':>6}  {'B p50':>6}  {'B−A median':>10}  {'B−A mean ± s.e.':>16}")
    for p in result["passes"]:
        print(f"{p['pass']:>4}  {p['a_p50']:>6.2f}  {p['b_p50']:>6.2f}  {p['diff_median']:>+10.2f}  "
              f"{p['diff_mean']:>+8.2f} ± {p['diff_se']:.2f}")
    print(f"queries whose rows differ between A and B: {result['answers_differing']}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    common.run_benchmark("cpersona-pair-", args, run, report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
