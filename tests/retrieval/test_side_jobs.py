"""Recall's side jobs (the word index's MATCH, the vector retriever) on worker threads give
the answer the recall thread alone gives, and a job no worker picks up is run by the recall."""

from __future__ import annotations

from concurrent.futures import Future

from cpersona.config import Settings
from cpersona.retrieval.pipeline import RecallRequest
from cpersona.service.engine import Engine
from cpersona.storage.db import Database

ROWS = ["the deploy failed twice on friday", "lunch at noon with the team", "deploys go out on thursdays",
        "the staging database listens on port 5433", "we failed the audit once"]
QUERIES = ["deploy failed", "which port is staging on?", "lunch", "kubernetes"]


def answers(eng: Engine) -> list[list[dict]]:
    return [eng.recall(RecallRequest("a", q))["messages"] for q in QUERIES]  # the advisory changes after the first


def test_side_jobs_answer_as_the_recall_thread_alone(tmp_path, monkeypatch):
    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "x.db"), embedding_mode="none"))
    try:
        for text in ROWS:
            eng.store("a", text)
        assert eng.db.parallel_reads
        offered: list = []
        submit = eng._read_pool.submit
        monkeypatch.setattr(eng._read_pool, "submit", lambda fn, *a: offered.append(fn) or submit(fn, *a))
        beside = answers(eng)
        assert len(offered) == len(QUERIES)  # one word-index job per recall (no vectors here)
        monkeypatch.setattr(Database, "parallel_reads", property(lambda self: False))
        assert answers(eng) == beside
    finally:
        eng.close()


def test_a_job_no_worker_starts_is_run_by_the_recall(tmp_path, monkeypatch):
    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "x.db"), embedding_mode="none"))
    try:
        for text in ROWS:
            eng.store("a", text)
        want = answers(eng)
        never_started: list[Future] = []
        monkeypatch.setattr(eng._read_pool, "submit", lambda fn, *a: never_started.append(Future()) or never_started[-1])
        assert answers(eng) == want
        assert never_started and all(f.cancelled() for f in never_started)
    finally:
        eng.close()
