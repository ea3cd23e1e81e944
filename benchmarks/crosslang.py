"""Cross-language recall on a small bilingual store, in-process with the bundled model.

The store (benchmarks/bilingual_corpus.json) is a payments team's 62 dated facts, English
and Japanese mixed, written one after another as a new user writes them, then five session
summaries archived (every fact lies before the episode boundary). Questions are asked
in the language of their answer (`same_en`, `same_ja`) and in the other one
(`cross_en_ja`: an English question whose answer is a Japanese row, `cross_ja_en` the
reverse); unanswerable questions are answered by no row. Every question goes through
`Engine.recall` (the code behind the MCP tool) at the default settings, uncalibrated unless
`--calibrate` (no calibration starts by itself, so two runs answer alike); knobs are read
from CPERSONA_* environment variables, so a variant is an environment.

Usage::

    python benchmarks/crosslang.py [--out results.json] [--embedding local] [--show] [--calibrate]

Prints per category: questions, NDCG@10, hit@1 (the best row answers), hit@10 and empty
answers; for the unanswerable questions rows per question and the empty share. `--show`
prints every question with its first rows and the recall trace's cc weight. The output
JSON has per-query rows in the shape `compare.py` reads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpersona.config import Settings
from cpersona.service.engine import Engine
from cpersona.service.requests import RecallRequest

import common

CORPUS = Path(__file__).resolve().parent / "bilingual_corpus.json"
AGENT = "dev"


def load() -> tuple[dict, list[dict]]:
    """(the corpus, its questions); unanswerable questions have category `unanswerable` and no relevant rows."""
    raw = json.loads(CORPUS.read_text(encoding="utf-8"))
    questions = [{"id": f"q{i}", "query": q["query"], "relevant": [f"m{j}" for j in q["relevant"]],
                  "category": q["category"]} for i, q in enumerate(raw["questions"])]
    questions += [{"id": f"u{i}", "query": q, "relevant": [], "category": "unanswerable"}
                  for i, q in enumerate(raw["unanswerable"])]
    return raw, questions


def run(embedding: str, show: bool, calibrate: bool) -> list[dict]:
    corpus, questions = load()
    with tempfile.TemporaryDirectory(prefix="cpersona-crosslang-") as work:
        os.environ.update({"CPERSONA_DB_PATH": str(Path(work) / "mem.db"), "CPERSONA_EMBEDDING_MODE": embedding,
                           "CPERSONA_TASK_QUEUE_ENABLED": "false", "CPERSONA_CALIBRATE_ON_MODEL_CHANGE": "false"})
        engine = Engine(Settings.from_env())
        try:
            if engine.gateway.embedder is not None:
                engine.gateway.embedder.wait_ready(300)
            ids = {}
            for i, (text, stamp) in enumerate(zip(corpus["memories"], corpus["timestamps"])):
                out = engine.store(AGENT, text, **({"timestamp": stamp} if stamp else {}))
                assert out.get("result") == "stored", out
                ids[out["id"]] = [f"m{i}"]
            for episode in corpus["episodes"]:
                assert engine.archive_episode(AGENT, episode["summary"], keywords=episode["keywords"])["ok"]
            if calibrate:
                assert engine.calibrate_threshold(AGENT).get("ok"), "calibration failed"
            per_query = []
            for q in questions:
                trace: dict = {}
                msgs = engine.recall(RecallRequest(AGENT, q["query"], 10), trace=trace)["messages"]
                ranking = [ids.get(common.ref_rowid(m.get("ref", "")), []) for m in reversed(msgs)]
                scores = common.score_ranking(ranking, q) if q["relevant"] else {}
                row = {"id": q["id"], "category": q["category"], "rows": len(msgs), "cc_alpha": trace.get("cc_alpha"),
                       **scores}
                per_query.append(row)
                if show:
                    first = [m["content"][:50] for m in reversed(msgs)][:3]
                    print(f"[{q['category']}] {q['query']} α={trace.get('cc_alpha')} "
                          f"hit={scores.get('first_hit')} rows={len(msgs)} {first}")
        finally:
            engine.close()
    return per_query


def summary(per_query: list[dict]) -> list[list]:
    table = []
    for cat in dict.fromkeys(r["category"] for r in per_query):
        rows = [r for r in per_query if r["category"] == cat]
        n = len(rows)
        if cat == "unanswerable":
            table.append([cat, n, "", "", "", f"{sum(r['rows'] == 0 for r in rows)}/{n}",
                          f"{sum(r['rows'] for r in rows) / n:.2f}"])
            continue
        table.append([cat, n, f"{sum(r['ndcg@10'] for r in rows) / n:.3f}",
                      f"{sum(r['first_hit'] == 1 for r in rows)}/{n}",
                      f"{sum(bool(r['first_hit']) and r['first_hit'] <= 10 for r in rows)}/{n}",
                      f"{sum(r['rows'] == 0 for r in rows)}/{n}", ""])
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedding", default="local", help="CPERSONA_EMBEDDING_MODE of the run (default: bundled model)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--show", action="store_true", help="print every question's first rows")
    p.add_argument("--calibrate", action="store_true", help="calibrate_threshold the agent before asking")
    args = p.parse_args(argv)
    per_query = run(args.embedding, args.show, args.calibrate)
    common.print_table(["category", "questions", "NDCG@10", "hit@1", "hit@10", "empty", "rows/q"], summary(per_query))
    if args.out:
        answerable = [r for r in per_query if r["category"] != "unanswerable"]
        args.out.write_text(json.dumps({"dataset": "bilingual", "per_query": per_query,
                                        "overall": common.aggregate(answerable)["overall"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
