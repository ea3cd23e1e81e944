"""Recall's side jobs (the word index's MATCH, the vector retriever) on worker threads or
queued behind the query's embedding give the answer the recall thread alone gives, and a job
no worker picks up is run by the recall."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from cpersona.config import Settings
from cpersona.service.engine import Engine
from cpersona.service.fetcher import ReadThreads, SideJobs
from cpersona.service.requests import RecallRequest
from cpersona.storage.db import Database

from conftest import wait_until

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
        submit = eng.recalls.read_pool.submit
        monkeypatch.setattr(eng.recalls.read_pool, "submit", lambda fn, *a: offered.append(fn) or submit(fn, *a))
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
        monkeypatch.setattr(eng.recalls.read_pool, "submit", lambda fn, *a: never_started.append(Future()) or never_started[-1])
        assert answers(eng) == want
        assert never_started and all(f.cancelled() for f in never_started)
    finally:
        eng.close()


def test_halves_queued_behind_the_embedding_answer_as_the_recall_thread_alone(engine_http, monkeypatch):
    """With a query vector on a two-CPU machine the word index's MATCH and the vector
    retriever run on the embedding's thread after it (or on the recall's, taken back)."""
    from cpersona.service import fetcher

    eng = engine_http
    for text in ROWS:
        eng.store("a", text)
    assert wait_until(lambda: not eng.queue.pending())
    monkeypatch.setattr(fetcher, "CPUS", 2)
    chained: list = []
    after = ReadThreads.after
    monkeypatch.setattr(ReadThreads, "after", lambda self, pending, fn: chained.append(fn) or after(self, pending, fn))
    eng.gateway.cache.clear()
    beside = answers(eng)
    assert len(chained) == 2 * len(QUERIES)  # the word half and the vector retriever of each recall
    monkeypatch.setattr(Database, "parallel_reads", property(lambda self: False))
    eng.gateway.cache.clear()
    assert answers(eng) == beside


def test_with_the_model_in_a_worker_process_the_word_half_runs_inline(engine_http, monkeypatch):
    """On two CPUs with the query embedded in another process, only the vector retriever is
    queued behind the embedding; the word half runs on the recall's thread. Same answers."""
    from cpersona.service import fetcher

    eng = engine_http
    for text in ROWS:
        eng.store("a", text)
    assert wait_until(lambda: not eng.queue.pending())
    monkeypatch.setattr(fetcher, "CPUS", 2)
    eng.gateway.cache.clear()
    alone = answers(eng)
    monkeypatch.setattr(type(eng.gateway.embedder), "worker_pid", 4242, raising=False)
    chained: list = []
    after = ReadThreads.after
    monkeypatch.setattr(ReadThreads, "after", lambda self, pending, fn: chained.append(fn) or after(self, pending, fn))
    eng.gateway.cache.clear()
    assert answers(eng) == alone
    assert len(chained) == len(QUERIES)  # the vector retriever of each recall, nothing else


def test_a_job_after_a_vector_already_there_runs_on_a_worker(engine_http):
    """A cached query vector is there before the job is offered: the job runs on a read
    worker, never on the recall's own thread while it offers it."""
    done: Future = Future()
    done.set_result(None)
    ran = ReadThreads(engine_http.db, engine_http.recalls.read_pool).after(done, lambda _session: threading.get_ident())
    assert ran.result(timeout=10) != threading.get_ident()


def test_the_recall_runs_unstarted_jobs_while_a_started_one_runs_elsewhere():
    """SideJobs: a queued job is taken back; while the wanted job runs elsewhere, the group's
    queued jobs run on the recall's thread first."""
    session = object()
    queued: Future = Future()
    running: Future = Future()
    running.set_running_or_notify_cancel()
    calls: list[str] = []
    jobs = SideJobs(session)  # type: ignore[arg-type]
    wanted = jobs.start(lambda fn: running, lambda s: calls.append("wanted here") or "unused")
    other = jobs.start(lambda fn: queued, lambda s: calls.append("other") or ("other", s))
    threading.Timer(0.2, lambda: running.set_result("wanted elsewhere")).start()
    assert wanted() == "wanted elsewhere"
    assert calls == ["other"] and queued.cancelled()
    assert other() == ("other", session)
    assert calls == ["other"]  # run once
