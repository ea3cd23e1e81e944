"""The recall's fetcher (`RecallFetch`, a retrieval.fetch.Fetcher): every thread one recall uses.

* The query's embedding runs on the query embedding pool, started before the keyword channels
  (or already by a transport that read the request: service/prefetch.py); the recall waits for
  it at most CPERSONA_EMBED_WAIT_SECS, once (`QueryVector`), then answers from keywords.
* On a SQLite file, side jobs run on other threads' read connections while the recall's own
  thread runs the trigram MATCH (SQLite and numpy release the GIL while they work): the vector
  retriever on the thread that embedded the query, right after the embedding
  (`ReadThreads.after`); the word index's half of the keyword channel on a read worker
  (`ReadThreads.beside`) — or, on a machine with two CPUs, queued behind the embedding too, or
  on the recall's own thread after the trigram MATCH when the model runs in its worker process
  (`word_lane`).
* The recall thread never waits for a job nobody has started (`SideJobs`): when it wants a job's
  result, a job still queued is taken back (`Future.cancel`) and run on the recall's own
  connection; while a job it wants runs elsewhere, it first runs the group's other jobs that
  are still queued, so no thread waits while work is left.

Who runs a part never changes its result: retrieval/fetch.py `gather` puts the same parts
together whichever thread ran them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Literal, TypeVar

import numpy as np

from cpersona.retrieval import retrievers
from cpersona.retrieval.fetch import Channels, Indexes, VectorHits, gather, vector_hits, word_half_query
from cpersona.retrieval.plan import Question, RecallPlan
from cpersona.storage import Database, Session
from cpersona.storage.scope import Scope
from cpersona.util.threads import CPUS

log = logging.getLogger("cpersona.service.recall")

T = TypeVar("T")

#: Starts fn(session) on another thread; the Future can be cancelled until a thread takes it.
Starter = Callable[[Callable[[Session], Any]], Future]
#: Where the word index's half of the keyword channel runs: "beside" (a read worker, beside the
#: trigram MATCH), "after_vector" (queued behind the query's embedding on its thread: with two
#: CPUs busy with the embedding and the trigram MATCH, a third thread only slows both down) or
#: "inline" (after the trigram MATCH on the recall's own thread: the embedding runs in a worker
#: process and its thread only waits).
Lane = Literal["beside", "after_vector", "inline"]


def word_lane(embedding: bool, worker_process: bool) -> Lane:
    """Where a recall runs the word half of its keyword channel: beside the trigram MATCH when
    CPUs are to spare or no query is embedded; on the recall's thread when the query is embedded
    in another process, whose waiting thread would otherwise only hold the word half back; else
    queued behind the embedding (measured: benchmarks/rounds/2026-12-03-moved-from-code.md)."""
    if not embedding or CPUS >= 3:
        return "beside"
    return "inline" if worker_process else "after_vector"


class _Job(Generic[T]):
    def __init__(self, future: Future, fn: Callable[[Session], T]) -> None:
        self.future = future
        self.fn = fn
        self.done: list[T] = []

    def take_back(self, session: Session) -> bool:
        """Run the job here if no thread has started it yet; whether it ran here."""
        if self.done or not self.future.cancel():
            return False
        self.done.append(self.fn(session))
        return True


class SideJobs:
    """The side jobs of one recall, whose own thread reads on `session`."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._jobs: list[_Job[Any]] = []

    def start(self, starter: Starter, fn: Callable[[Session], T]) -> Callable[[], T]:
        """Start fn(session) with `starter`; returns the function giving its result (on the
        recall's thread: taken back when not started yet, see the module doc)."""
        job: _Job[T] = _Job(starter(fn), fn)
        self._jobs.append(job)

        def result() -> T:
            if not job.done and not job.take_back(self.session):
                for other in self._jobs:  # help with what nobody has started while this one runs
                    if other is not job:
                        other.take_back(self.session)
                job.done.append(job.future.result())
            return job.done[0]

        return result


class ReadThreads:
    """Threads that run a recall's side jobs, each on its own read connection."""

    def __init__(self, db: Database, pool: ThreadPoolExecutor) -> None:
        self.db = db
        self.pool = pool

    def beside(self, fn: Callable[[Session], Any]) -> Future:
        """fn(session) on a read worker, at once."""
        return self.pool.submit(self._in_reader, fn)

    def after(self, pending: Future, fn: Callable[[Session], Any]) -> Future:
        """fn(session) run by the thread that embeds the query, as soon as it has embedded it
        (on that thread's read connection: no hand-off to another thread); by a read worker
        when the vector was already there. The returned Future can be cancelled until then."""
        job: Future = Future()
        caller = threading.get_ident()

        def start() -> None:
            if job.set_running_or_notify_cancel():
                try:
                    job.set_result(self._in_reader(fn))
                except BaseException as err:  # noqa: BLE001 — handed to the waiting recall
                    job.set_exception(err)

        def embedded(_vector: Future) -> None:
            if threading.get_ident() == caller:  # already embedded (a cached vector): not on the recall's thread
                self.pool.submit(start)
            else:
                start()

        pending.add_done_callback(embedded)
        return job

    def _in_reader(self, fn: Callable[[Session], Any]) -> Any:
        """fn(session) on the calling (worker) thread's own read connection."""
        with self.db.read() as s:
            return fn(s)


class QueryVector:
    """The query vector of one recall: the embedding running for it (None: no query vector),
    waited for at most `wait_s` seconds, once. `late` says why the recall went on without it
    (given when the backend was known not to answer; set when the wait ran out)."""

    def __init__(self, pending: Future | None, wait_s: float, mode: str, late: str | None = None) -> None:
        self.pending = pending
        self._wait_s = wait_s
        self._mode = mode
        self._late: list[str] = [late] if late else []

    @property
    def late(self) -> str | None:
        return self._late[0] if self._late else None

    def result(self) -> np.ndarray | None:
        """The vector (None without one). A backend busy or stalled (a worker stopped
        mid-batch) costs the recall `wait_s`, not the watchdog's deadline; later calls return
        None at once (the embed finishes in the background and fills the query cache)."""
        if self._late or self.pending is None:
            return None
        try:
            return self.pending.result(timeout=self._wait_s)
        except FutureTimeout:
            self._late.append(f"mode={self._mode} / no query vector within {self._wait_s:g} s "
                              "(CPERSONA_EMBED_WAIT_SECS)")
            log.info("recall went on without its query vector: %s", self._late[0])
            return None


@dataclass
class RecallFetch:
    """The fetcher of one recall (retrieval.fetch.Fetcher) on the recall's read `session`.

    `indexes` are the resident indexes known at the start (None: the dimension is not known
    before this embedding — an HTTP backend's first answer — and `load_indexes` loads them once
    the vector is there); `counts` counts the gate's pool; `threads` runs the side jobs (None: no
    second read connection, everything runs on `session`, one part after the other); `lane` is
    where the word half runs."""

    session: Session
    vector: QueryVector
    indexes: Indexes | None
    load_indexes: Callable[[], Indexes | None]
    counts: Callable[[Scope], int]
    threads: ReadThreads | None
    lane: Lane

    def pool(self, scope: Scope) -> int:
        return self.counts(scope)

    def channels(self, plan: RecallPlan, question: Question) -> Channels:
        """The channels of `question`, the side jobs started first (module doc)."""
        words = vectors = None
        if self.threads is not None:
            jobs = SideJobs(self.session)
            if self.session.search.fts_enabled and not question.blank and self.lane != "inline":
                start = self._after_vector() if self.lane == "after_vector" else None
                words = jobs.start(start or self.threads.beside,
                                   partial(retrievers.word_channel, query=word_half_query(plan, question)))
            if not question.blank and self.indexes is not None:  # waits for the query vector
                vectors = jobs.start(self._after_vector() or self.threads.beside,
                                     partial(self._vectors, plan, question))
        return gather(self.session, plan, question, words,
                      vectors or partial(self._vectors, plan, question, self.session))

    def _after_vector(self) -> Starter | None:
        """The starter of jobs queued behind the query's embedding (None without one)."""
        pending, threads = self.vector.pending, self.threads
        if pending is None or threads is None:
            return None
        return lambda fn: threads.after(pending, fn)

    def _vectors(self, plan: RecallPlan, question: Question, session: Session) -> VectorHits | None:
        """The vector channel on `session`; waits for the query vector (and loads the resident
        indexes when they were not known before it)."""
        qvec = self.vector.result()
        if qvec is not None and self.indexes is None:
            self.indexes = self.load_indexes()
        if qvec is None or self.indexes is None:
            return None
        return vector_hits(session, plan, question, qvec, self.indexes)
