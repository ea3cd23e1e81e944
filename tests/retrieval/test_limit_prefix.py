"""A smaller `limit` gives the first rows of a larger one: the keyword channel's two indexes
are each cut at the channel depth, and a row listed by one index only must still get its
score in the other (retrievers.complete_scores) — else a row that the trigram index scores
like thirty others, and the word index ranks first, loses to the oldest of the thirty."""

from __future__ import annotations

import pytest

from quality_helpers import recall

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
