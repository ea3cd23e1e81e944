"""Speed work must not change a ranking: the same corpus and the same query give the same
rows, in the same order, with the same scores.

`rank_pin.json` holds the answers of a fixed corpus (two agents, English, Japanese,
identifiers, many equal-bm25 rows, episodes) to fixed queries, recorded through the core API
(`Engine.recall`, library shape: every score unrounded) before the recall path was
optimised; this test recalls them again and compares. Keyword-only and with the
deterministic hashing embedder. Scores from SQLite's bm25 must match exactly; cosines
(a BLAS product, whose last bits may differ between CPU kernels) to 1e-9.

Regenerate (only for a deliberate ranking change, and say so in the commit):
`python tests/retrieval/test_rank_pin.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpersona.service.requests import RecallRequest

from quality_helpers import make

PIN = Path(__file__).with_name("rank_pin.json")
SERVICES = ["billing", "auth", "search", "export", "ingest", "gateway"]
VERBS = ["failed", "recovered", "restarted", "deployed"]
JA = ["設定ファイルの場所を変更した", "エラーが発生したので再起動した", "検索の速度を改善した", "バックアップを毎晩取る"]
QUERIES = [
    "billing deploy failed", "auth restarted", "why did search fail", "export ERR_TIMEOUT_1750",
    "gateway v2 config", "ingest worker 17", "設定ファイル", "再起動したエラー", "バックアップ 速度",
    "kubernetes cluster", "billing auth search export", "ERR_TIMEOUT", "note 42", "deployed recovered",
    "weekly summary of incidents", "what changed in the gateway", "src/app.py:42", "Tomato basil",
    "ingest OR export", "\"billing failed\"",
]


def corpus() -> list[tuple[str, str, str]]:
    """(agent, content, timestamp) rows: templated notes of equal length (bm25 ties),
    identifiers, numbers, Japanese; agent b shares the vocabulary, with fewer rows (its
    best matches are often not among the table's best: the scope filter after the MATCH)."""
    rows = []
    for i in range(240):
        svc, verb = SERVICES[i % len(SERVICES)], VERBS[(i // 6) % len(VERBS)]
        text = f"{svc} {verb} note {i % 50}"  # equal texts across i differ only by the number
        if i % 7 == 0:
            text += f" ERR_TIMEOUT_{1700 + i}"
        if i % 11 == 0:
            text += " in src/app.py:42 of gateway v2 config"
        if i % 5 == 0:
            text = f"{JA[i % len(JA)]} {svc} {i}"
        rows.append(("a", text, f"2025-03-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"))
    for i in range(80):
        rows.append(("b", f"{SERVICES[i % 6]} {VERBS[i % 4]} other agent {i}", f"2025-04-{1 + i % 28:02d}T08:00:00Z"))
    return rows


def build(db: Path, vectors: bool):
    eng = make(db, embedder="hash" if vectors else None, embedding_mode="http" if vectors else "none")
    for agent, text, ts in corpus():
        assert eng.store(agent, text, timestamp=ts)["result"] == "stored"
    for i, svc in enumerate(SERVICES[:3]):
        assert eng.archive_episode("a", f"session {i}: {svc} incident review and follow-up", keywords=svc)["ok"]
    return eng


def answers(eng) -> list[dict[str, Any]]:
    out = []
    for agent, query, limit in [("a", q, n) for q in QUERIES for n in (3, 10, 25)] + [("b", q, 10) for q in QUERIES]:
        msgs = eng.recall(RecallRequest(agent, query, limit))["messages"]
        out.append({"agent": agent, "query": query, "limit": limit, "rows": [
            {"ref": m.get("ref"), "content": m["content"], "reason": m.get("match_reason")} for m in msgs]})
    return out


def record(tmp: Path) -> dict[str, Any]:
    recorded = {}
    for mode in ("none", "hash"):
        eng = build(tmp / f"{mode}.db", vectors=mode == "hash")
        try:
            recorded[mode] = answers(eng)
        finally:
            eng.close()
    return recorded


def _same(got: Any, want: Any, key: str = "") -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k], k) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(_same(g, w, key) for g, w in zip(got, want))
    if isinstance(want, float) and key in ("cosine", "cc", "score") and isinstance(got, float):
        return abs(got - want) <= 1e-9
    return got == want


@pytest.mark.parametrize("mode", ["none", "hash"])
def test_rankings_are_unchanged(tmp_path, mode):
    want = json.loads(PIN.read_text(encoding="utf-8"))[mode]
    eng = build(tmp_path / "x.db", vectors=mode == "hash")
    try:
        got = answers(eng)
    finally:
        eng.close()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert [r["ref"] for r in g["rows"]] == [r["ref"] for r in w["rows"]], (w["query"], w["limit"])
        assert _same(g, w), (w["query"], w["limit"])


def test_the_pinned_answers_exercise_ties_and_both_agents():
    """The pin is worth something only if it holds equal-bm25 rows and several channels."""
    pinned = json.loads(PIN.read_text(encoding="utf-8"))
    bm25_ties = 0
    retrievers: set[str] = set()
    for ans in pinned["none"] + pinned["hash"]:
        lex = [r["reason"].get("lexical") for r in ans["rows"] if r["reason"]]
        bm25_ties += len(lex) - len(set(lex))
        for r in ans["rows"]:
            retrievers.update((r["reason"] or {}).get("retrievers", []))
    assert bm25_ties > 20
    assert {"keyword", "episodes", "vector"} <= retrievers


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        PIN.write_text(json.dumps(record(Path(folder)), ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {PIN}")
