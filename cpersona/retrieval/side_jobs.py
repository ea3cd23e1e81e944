"""A recall's side jobs: retrievers that run on another thread's read connection while the
recall's own thread runs the trigram MATCH (SQLite and numpy release the GIL while they work).

Each job is started by a *starter* the recall service offers (`RecallContext.parallel`: a
read worker at once; `RecallContext.after_embedding`: the thread that embeds the query, as
soon as it has the vector). The recall thread never waits for a job nobody has started: when
it wants a job's result, a job still queued is taken back (`Future.cancel`) and run on the
recall's own connection; while a job it wants runs elsewhere, it first runs the group's other
jobs that are still queued, so no thread waits while work is left. Who runs a job never
changes its result: each is a function of the stored rows and the query alone.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from cpersona.storage import Session

T = TypeVar("T")

#: Starts fn(session) on another thread; the Future can be cancelled until a thread takes it.
Starter = Callable[[Callable[[Session], Any]], Future]


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
