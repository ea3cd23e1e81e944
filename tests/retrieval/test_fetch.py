"""The pipeline reads through the fetcher it is given: calibration's `SerialFetch` (one
connection, a given vector) ranks exactly as the recall service's fetcher (side jobs on other
threads, the embedding on the query pool), and the answer is the one `Engine.recall` writes."""

from __future__ import annotations

import pytest
from cpersona.retrieval import pipeline
from cpersona.retrieval.fetch import Indexes, SerialFetch
from cpersona.retrieval.plan import RecallPlan
from cpersona.service.requests import RecallRequest

from quality_helpers import make

ROWS = [
    ("we deployed the billing service on monday", "2026-01-05T09:00:00+00:00"),
    ("the billing deploy failed because the disk was full", "2026-01-05T09:02:00+00:00"),
    ("the audit of the staging cluster passed", "2026-01-07T10:00:00+00:00"),
    ("lunch with the platform team on friday", "2026-01-09T12:00:00+00:00"),
    ("the staging database listens on port 5433", "2026-01-09T12:05:00+00:00"),
    ("we renewed the TLS certificate of the gateway", "2026-01-12T08:00:00+00:00"),
]
QUERIES = ["billing deploy failed", "which came first, the billing deploy or the staging audit?",
           "what did we do last session?", "port of the staging database", ""]


@pytest.fixture
def eng(tmp_path):
    e = make(tmp_path / "f.db")
    for text, ts in ROWS:
        assert e.store("a", text, timestamp=ts)["result"] == "stored"
    assert e.archive_episode("a", "session about the billing deploy and its failure", keywords="billing")["ok"]
    yield e
    e.close()


@pytest.mark.parametrize("query", QUERIES)
def test_a_serial_fetch_answers_as_the_recall_services_fetcher(eng, query):
    req = RecallRequest("a", query, 5)
    trace: dict = {}
    served = [m.get("ref") for m in eng.recall(req, trace=trace)["messages"]]
    qvec = eng.gateway.embed_query(query) if query else None
    plan = RecallPlan.of(eng.settings, eng.calibration.gate_for("a"))
    with eng.db.read() as s:
        answer = pipeline.recall(SerialFetch(s, qvec, Indexes.of(eng.steps.indexes())), plan, req.question())
    assert [c.ref for c in reversed(answer.rows)] == served
    assert answer.trace["channels"] == trace["channels"]
    assert answer.trace.get("alternatives") == trace.get("alternatives") == (2 if " or " in query else None)
