"""A smaller `limit` gives the first rows of a larger one: the keyword channel's two indexes
are each cut at the channel depth, and a row listed by one index only must still get its
score in the other (retrievers.complete_scores) — else a row that the trigram index scores
like thirty others, and the word index ranks first, loses to the oldest of the thirty."""

from __future__ import annotations

import pytest

from quality_helpers import make, recall

#: Storage semantics: runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends

ROWS = [f"Service number {i} runs on host node-{i} and is owned by team {i % 5}." for i in range(30)]


@pytest.mark.parametrize("query, best", [
    ("which host runs service number 7", "Service number 7 "),
    ("service 7", "Service number 7 "),
    ("team 3", "Service number 3 "),
])
def test_every_limit_answers_with_the_best_row_first(make_engine, query, best):
    eng = make_engine(embedding_mode="none")  # default fusion (cc)
    for text in ROWS:
        assert eng.store("p", text)["result"] == "stored"
    answers = {limit: [m["content"] for m in recall(eng, query, "p", limit=limit)["messages"]][::-1]
               for limit in (1, 2, 3, 5, 10)}
    for limit, rows in answers.items():
        assert rows and rows[0].startswith(best), (limit, rows)


NOTES = [
    *ROWS,
    "Deploys go out on Tuesdays at 14:00 after the change review.",
    "The billing-api listens on port 8443 in staging and 443 in production.",
    "We audited xz-utils for CVE-2024-3094; the build images were not affected.",
    "Standup is at 09:30 Lisbon time, except on Fridays.",
    "Logs go to Loki with 14 days of retention.",
    "Redis runs with maxmemory-policy allkeys-lru since the eviction incident.",
]


@pytest.mark.parametrize("mode", ["none", "hash"])
def test_a_smaller_limit_is_a_prefix_of_the_default_answer(tmp_path, mode):
    """recall(limit=k) = the first k rows of recall(limit=10), empty only when that is empty:
    the answer bar, the neighbour turns and the retrievers run at least 10 deep whatever the limit."""
    eng = make(tmp_path / "x.db", embedder="hash" if mode == "hash" else None,
               embedding_mode="http" if mode == "hash" else "none")
    try:
        for i, text in enumerate(NOTES):
            assert eng.store("p", text, timestamp=f"2025-03-01T{i % 24:02d}:{i % 60:02d}:00Z")["result"] == "stored"
        for query in ("which day do we deploy", "what port does the billing api use", "CVE-2024-3095",
                      "how long do we keep logs", "what time is standup", "team 3 host", "redis eviction",
                      "what is the wifi password of the office"):
            full = [m["content"] for m in recall(eng, query, "p", limit=10)["messages"]][::-1]
            for k in (1, 2, 3, 5):
                rows = [m["content"] for m in recall(eng, query, "p", limit=k)["messages"]][::-1]
                assert rows == full[:k], (query, k)
    finally:
        eng.close()
