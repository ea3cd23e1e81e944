"""Evaluation sets derived from the public data, and the hand-written tiny corpus.

* `longmemeval_haystack(data_root, questions, turns)` — the long-haystack case of
  personal-assistant memory: for each of `questions` LongMemEval oracle questions (evenly
  spaced), one agent holding that question's evidence sessions mixed with unrelated sessions
  of other questions (chosen deterministically, a different rotation per agent) until it
  holds at least `turns` turns. Most of what the agent holds is unrelated to the question,
  and the unrelated sessions are of the same kind (long chats with an assistant), which is
  what makes the set hard for a fixed vector weight.
* `tiny()` — a 14-memory store of a small software team (benchmarks/tiny_corpus.json) with
  answerable questions and questions whose answer is stored nowhere ("Do we use
  Kubernetes?"): the case of a new user whose store is still small.
* `foreign(queries, agents, n)` — `n` questions of another data set asked of this set's
  agents (round robin): none of them has an answer there.

A query with an empty `relevant` list is unanswerable: `retrieval.py` reports rows per
question and the share answered with no row for those, NDCG@10 for the others.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent


def longmemeval_haystack(data_root: Path, questions: int = 40, turns: int = 400) -> common.Dataset:
    folder = common.resolve_dataset("longmemeval_oracle", data_root)
    base = common.load_dataset(folder, "longmemeval_oracle")
    sessions: dict[str, list[dict]] = defaultdict(list)
    for mem in base.memories:
        sessions[mem["session"]].append(mem)
    order = sorted(sessions)
    memories, queries = [], []
    for n, q in enumerate(common.select_evenly(base.queries, questions)):
        agent = f"lmeh-{q['id']}"
        own = [s for s in q.get("relevant_sessions", []) if s in sessions]
        chosen = list(own)
        held = sum(len(sessions[s]) for s in chosen)
        start = (n * 7919) % len(order)  # a different, deterministic rotation per agent
        for k in range(len(order)):
            if held >= turns:
                break
            s = order[(start + k) % len(order)]
            if s not in chosen:
                chosen.append(s)
                held += len(sessions[s])
        for s in sorted(chosen, key=lambda s: (sessions[s][0].get("created_at") or "", s)):
            memories += [{**m, "agent_id": agent} for m in sessions[s]]
        queries.append({**q, "agent_id": agent})
    return common.Dataset("longmemeval_haystack", folder, memories, queries)


def tiny() -> common.Dataset:
    raw = json.loads((HERE / "tiny_corpus.json").read_text(encoding="utf-8"))
    memories = [{"id": f"t{i}", "text": text, "agent_id": "tiny", "created_at": None}
                for i, text in enumerate(raw["memories"])]
    queries = [{"id": f"a{i}", "query": q, "relevant": [f"t{j}" for j in rel], "category": "answerable",
                "agent_id": "tiny"} for i, (q, rel) in enumerate(raw["answerable"])]
    queries += [{"id": f"u{i}", "query": q, "relevant": [], "category": "unanswerable", "agent_id": "tiny"}
                for i, q in enumerate(raw["unanswerable"])]
    return common.Dataset("tiny", HERE, memories, queries)


def foreign(queries: list[dict], agents: list[str], n: int) -> list[dict]:
    picked = common.select_evenly(queries, n)
    return [{**q, "id": f"foreign:{q['id']}", "agent_id": agents[i % len(agents)], "relevant": [],
             "category": "foreign"} for i, q in enumerate(picked)]


def load(name: str, data_root: Path, questions: int, turns: int) -> common.Dataset:
    """A named set: the derived ones above, else a folder of `data_root` (common.resolve_dataset)."""
    if name == "longmemeval_haystack":
        return longmemeval_haystack(data_root, questions, turns)
    if name == "tiny":
        return tiny()
    return common.load_dataset(common.resolve_dataset(name, data_root), name)


def unanswerable_summary(per_query: list[dict]) -> dict:
    """Rows per question and the empty share over unanswerable questions."""
    if not per_query:
        return {"queries": 0}
    return {"queries": len(per_query), "rows_per_query": sum(r["rows"] for r in per_query) / len(per_query),
            "empty_rate": sum(1 for r in per_query if r["rows"] == 0) / len(per_query)}
