"""In-process ablation of the recall pipeline over a database kept by `retrieval.py --keep-db`.

Re-ranking ideas are tried here in seconds instead of minutes: the database (rows and the
bundled model's vectors) is copied and opened by the service layer in this process, every
query vector is computed once and cached in `benchmarks/results/qvec-<dataset>.npy`, and
each query is recalled through `Engine.recall` — the same code the MCP tool calls, without
the JSON-RPC round trip. Knobs are read from the environment (CPERSONA_*), so a variant is
an environment, e.g. `CPERSONA_CC_ALPHA=0.4`. The numbers of a kept idea are re-measured
over MCP with `retrieval.py` before they are reported.

Usage::

    python benchmarks/ablation.py --db /tmp/cpersona-bench-x/bench.db --dataset locomo [--out x.json]
        [--foreign longmemeval_oracle] [--max-queries N] [--calibration FILE | --calibrate [--save-calibration F]]

`--foreign DATASET`: also ask DATASET's questions of this database's agents (none of them
is answerable there) and report rows per question and the share answered empty.
`--calibration FILE`: a calibration sidecar to restore beside the copy (e.g. the one a
`retrieval.py --keep-db` run left, to ask in the state that run answered in); `--calibrate`:
calibrate the global threshold and every agent first, as the startup guard does on a store it
finds uncalibrated. Without either, the recall uses the uncalibrated (heuristic) gate.
The output JSON has the per-query rows `compare.py` reads.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpersona.config import Settings
from cpersona.service.engine import Engine
from cpersona.service.requests import RecallRequest

import common
import evalsets


def query_vectors(engine: Engine, texts: list[str], cache: Path) -> dict[str, np.ndarray]:
    """Vectors of `texts` from the bundled model, cached in `cache` (.npy + .json keys)."""
    keys = cache.with_suffix(".json")
    if cache.exists() and keys.exists() and json.loads(keys.read_text()) == texts:
        return dict(zip(texts, np.load(cache)))
    engine.gateway.embedder.wait_ready(300)  # type: ignore[union-attr]
    vecs = []
    for i in range(0, len(texts), 64):
        out = engine.gateway.embed_texts(texts[i: i + 64])
        assert out is not None, "embedding failed"
        vecs.extend(out)
    np.save(cache, np.asarray(vecs, dtype=np.float32))
    keys.write_text(json.dumps(texts, ensure_ascii=False))
    return dict(zip(texts, vecs))


def run_queries(engine: Engine, queries: list[dict], rows: dict[int, list[str]], limit: int) -> list[dict]:
    per_query = []
    for q in queries:
        started = time.perf_counter()
        trace: dict = {}
        msgs = engine.recall(RecallRequest(q["agent_id"], q["query"], limit), trace=trace)["messages"]
        ms = (time.perf_counter() - started) * 1000
        ranking = [rows.get(common.ref_rowid(m.get("ref", "")), []) for m in reversed(msgs)]
        scores = common.score_ranking(ranking, q) if q.get("relevant") else {}
        top = [{k: m.get("match_reason", {}).get(k) for k in ("cosine", "coverage", "cc", "lexical")}
               | {"hit": bool(set(rows.get(common.ref_rowid(m.get("ref", "")), [])) & set(q.get("relevant", [])))}
               for m in reversed(msgs)]
        per_query.append({"id": q["id"], "category": common.category_of(q), "rows": len(msgs), "ms": round(ms, 2),
                          "top": top, "background": trace.get("background"), "cc_alpha": trace.get("cc_alpha"),
                          **scores})
    return per_query


def calibrate_all(engine: Engine, agents: list[str]) -> None:
    """calibrate_threshold for the global threshold and each agent (kept in memory)."""
    engine.gateway.embedder.wait_ready(300)  # type: ignore[union-attr]
    for agent in ["", *agents]:
        res = engine.calibration.calibrate(agent, persist=False)
        fg = res.get("fused_gate") or {}
        print(f"  calibrated {agent or '(global)'}: vector {res.get('new_threshold')} fused {fg.get('threshold')} "
              f"ok={res.get('ok')}", file=sys.stderr)


def row_map(db: Path) -> dict[int, list[str]]:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {i: [m] for i, m in conn.execute("SELECT id, msg_id FROM memories")}
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", type=Path, required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--foreign", default=None)
    p.add_argument("--max-queries", type=int, default=None)
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--embedding", default="local")
    p.add_argument("--haystack-questions", type=int, default=20)
    p.add_argument("--calibration", type=Path, default=None, help="sidecar to restore beside the copy")
    p.add_argument("--calibrate", action="store_true", help="calibrate the global threshold and every agent first")
    p.add_argument("--save-calibration", type=Path, default=None, help="with --calibrate: keep the sidecar here")
    args = p.parse_args(argv)
    data = evalsets.load(args.dataset, args.data, args.haystack_questions, 400)
    queries = common.select_evenly(data.queries, args.max_queries)
    foreign: list[dict] = []
    if args.foreign:
        other = evalsets.load(args.foreign, args.data, args.haystack_questions, 400)
        agents = sorted({q["agent_id"] for q in queries})
        picked = common.select_evenly(other.queries, args.max_queries or len(queries))
        foreign = [{**q, "agent_id": agents[i % len(agents)], "relevant": []} for i, q in enumerate(picked)]
    work = Path(tempfile.mkdtemp(prefix="cpersona-ablation-"))
    try:
        db = work / "bench.db"
        shutil.copy(args.db, db)
        if args.calibration:
            shutil.copy(args.calibration, f"{db}.calibration.json")
        import os

        os.environ.update({"CPERSONA_DB_PATH": str(db), "CPERSONA_EMBEDDING_MODE": args.embedding,
                           "CPERSONA_TASK_QUEUE_ENABLED": "false"})
        engine = Engine(Settings.from_env())
        try:
            if args.embedding != "none":
                texts = sorted({q["query"] for q in queries + foreign})
                cached = query_vectors(engine, texts, common.RESULTS / f"qvec-{args.dataset}-{args.foreign}.npy")
                engine.gateway.embed_query = lambda text: cached.get(text)  # type: ignore[method-assign]
            if args.calibrate:
                calibrate_all(engine, sorted({q["agent_id"] for q in queries + foreign}))
                if args.save_calibration:
                    engine.calibration.persist()
                    shutil.copy(f"{db}.calibration.json", args.save_calibration)
            rows = row_map(db)
            started = time.perf_counter()
            per_query = run_queries(engine, queries, rows, args.limit)
            per_foreign = run_queries(engine, foreign, rows, args.limit)
            wall = time.perf_counter() - started
        finally:
            engine.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    o = common.aggregate(per_query)["overall"]
    out = {"dataset": args.dataset, "per_query": per_query, "per_foreign": per_foreign, "overall": o,
           "wall_s": round(wall, 1)}
    line = f"{args.dataset}: NDCG@10 {o['ndcg@10']:.4f} R@10 {o['recall@10']:.3f} rows/q {o['mean_rows']:.2f} " \
           f"empty {o['zero_row_queries']}/{o['queries']}"
    if foreign:
        n = len(per_foreign)
        rows_q = sum(r["rows"] for r in per_foreign) / n
        empty = sum(1 for r in per_foreign if r["rows"] == 0) / n
        out["foreign"] = {"dataset": args.foreign, "queries": n, "rows_per_q": rows_q, "empty_rate": empty}
        line += f" | foreign {args.foreign}: rows/q {rows_q:.2f} empty {empty:.1%}"
    print(line + f"  ({wall:.0f}s)")
    if args.out:
        args.out.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
