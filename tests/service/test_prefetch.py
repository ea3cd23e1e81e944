"""A recall's query embedding started by the transport before the recall runs (service/prefetch.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from cpersona.policy.validate import MAX_QUERY_CHARS
from cpersona.service.prefetch import MAX_CHARS, MAX_PENDING, QueryPrefetch
from cpersona.service.requests import RecallRequest

from conftest import wait_until


def _done(value: object) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_queue_hands_each_embedding_out_once_and_holds_at_most_max_pending():
    q = QueryPrefetch(max_pending=2)
    assert q.start("a", _done) and q.start("b", _done)
    assert not q.start("a", _done)  # already held: no second embedding of the same text
    assert not q.start("c", _done)  # full: a request read now starts nothing
    assert len(q) == 2 and q.take("c") is None
    assert q.take("b").result() == "b" and q.take("b") is None
    assert q.start("c", _done)  # room again


def test_only_one_prefetch_runs_at_a_time():
    q = QueryPrefetch(max_pending=3)
    running: Future = Future()
    assert q.start("a", lambda _t: running)
    assert not q.start("b", _done)  # "a" still runs: a refused request's embedding must not queue more
    running.set_result("a")
    assert q.start("b", _done)


def test_an_embedding_no_recall_takes_is_dropped_after_the_ttl_and_cancelled_if_not_started():
    clock = _Clock()
    q = QueryPrefetch(max_pending=2, ttl_s=1.0, clock=clock)
    waiting: Future = Future()  # not started: queued behind a busy model
    assert q.start("a", lambda _t: waiting)
    clock.now += 1.1  # "a" has waited 1.1 s
    assert q.start("b", _done)  # "a" expired, and was cancelled
    assert q.take("a") is None and waiting.cancelled()
    assert q.take("b").result() == "b"


def test_a_failed_embedding_is_not_handed_out():
    failed: Future = Future()
    failed.set_exception(RuntimeError("worker died"))
    q = QueryPrefetch()
    assert q.start("none", lambda _t: _done(None))  # embed_query answers None when the backend failed
    assert q.start("raised", lambda _t: failed)
    assert q.take("none") is None and q.take("raised") is None and len(q) == 0
    running: Future = Future()
    assert q.start("running", lambda _t: running)
    assert q.take("running") is running  # still running: its outcome is the backend's answer now


def test_queue_passes_on_what_submit_raises():
    q = QueryPrefetch()

    def closed(_text: str) -> Future:
        raise RuntimeError("cannot schedule new futures after shutdown")

    with pytest.raises(RuntimeError):
        q.start("a", closed)
    assert len(q) == 0


def test_recall_takes_the_prefetched_embedding_instead_of_embedding_again(http_engine_factory, fake_embed):
    eng = http_engine_factory(embedding_cache_size=0)  # no cache: a second embedding would reach the server
    eng.store("kai", "the deploy runs on thursday evenings")
    assert eng.gateway.wait_for_backend(10)
    before = fake_embed.requests
    assert eng.prefetch_query_vector("when is the deploy?")
    rows = eng.recall(RecallRequest("kai", "when is the deploy?", 5))["messages"]
    assert fake_embed.requests - before == 1
    assert len(eng.recalls.prefetch) == 0
    assert rows and "thursday" in rows[-1]["content"]


def test_prefetched_recall_answers_the_same_rows_and_scores(http_engine_factory):
    eng = http_engine_factory()
    for text in ("the deploy runs on thursday evenings", "lunch is at noon", "deploys need two reviews"):
        eng.store("kai", text)
    plain = eng.recall(RecallRequest("kai", "deploy day", 5))
    eng.gateway.cache.clear()
    eng.prefetch_query_vector("deploy day")
    assert eng.recall(RecallRequest("kai", "deploy day", 5)) == plain


@pytest.mark.parametrize("query", [None, 42, ["deploy"], "", "   ", "\u200b\u200b", "x" * (MAX_QUERY_CHARS + 1),
                                   "long " * (MAX_CHARS // 5 + 1)])
def test_a_query_the_recall_would_not_embed_starts_nothing(engine_http, fake_embed, query):
    assert engine_http.gateway.wait_for_backend(10)
    before = fake_embed.requests
    assert not engine_http.prefetch_query_vector(query)
    assert fake_embed.requests == before and len(engine_http.recalls.prefetch) == 0


def test_nothing_is_started_without_a_backend_or_after_close(engine_none, http_engine_factory):
    assert not engine_none.prefetch_query_vector("deploy")
    eng = http_engine_factory()
    eng.close()
    assert not eng.prefetch_query_vector("deploy")


def test_a_query_nul_is_read_as_the_recall_reads_it(http_engine_factory, fake_embed):
    eng = http_engine_factory(embedding_cache_size=0)
    eng.store("kai", "alpha beta")
    assert eng.gateway.wait_for_backend(10)
    before = fake_embed.requests
    eng.prefetch_query_vector("alpha\x00beta")  # the recall reads NUL as a space: same key
    eng.recall(RecallRequest("kai", "alpha\x00beta", 5))
    assert fake_embed.requests - before == 1


def test_concurrent_prefetches_and_recalls_each_embed_once(http_engine_factory, fake_embed):
    eng = http_engine_factory(embedding_cache_size=0)
    eng.store("kai", "alpha beta gamma")
    assert eng.gateway.wait_for_backend(10)
    before = fake_embed.texts.copy()
    queries = [f"question number {i}" for i in range(12)]

    def one(q: str) -> None:
        eng.prefetch_query_vector(q)
        eng.recall(RecallRequest("kai", q, 3))

    threads = [threading.Thread(target=one, args=(q,)) for q in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # Counted per text: another test's engine may still embed its own rows on the shared server.
    assert {q: fake_embed.texts[q] - before[q] for q in queries} == dict.fromkeys(queries, 1)
    assert len(eng.recalls.prefetch) == 0


def test_a_flood_of_queries_no_recall_takes_starts_a_bounded_number_of_embeddings(http_engine_factory, fake_embed):
    eng = http_engine_factory(embedding_cache_size=0)
    eng.store("kai", "coffee in the morning")
    assert eng.gateway.wait_for_backend(10)
    before = fake_embed.requests
    started = sum(eng.prefetch_query_vector(f"refused request {i}") for i in range(500))
    assert started <= MAX_PENDING
    rows = eng.recall(RecallRequest("kai", "coffee", 3))
    assert rows["messages"] and "advisory" not in rows
    assert fake_embed.requests - before <= MAX_PENDING + 1


def test_a_prefetch_that_failed_is_not_what_a_later_recall_answers_from(http_engine_factory, fake_embed):
    eng = http_engine_factory(embedding_cache_size=0)
    eng.store("kai", "the deploy runs on thursday evenings")
    assert eng.gateway.wait_for_backend(10)
    fake_embed.fail = True
    assert eng.prefetch_query_vector("when is the deploy?")
    assert wait_until(lambda: all(f.done() for _, f in eng.recalls.prefetch._pending.values()))
    fake_embed.fail = False
    eng.gateway.embed_query("something else")  # the backend answers again
    out = eng.recall(RecallRequest("kai", "when is the deploy?", 5), verbose=True)
    assert "advisory" not in out and "thursday" in out["messages"][-1]["content"]
    assert "vector" in out["messages"][-1]["match_reason"]["retrievers"]  # answered with its vector
