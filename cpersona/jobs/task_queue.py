"""Crash-safe background task queue over `pending_memory_tasks`: it computes the vectors
of rows that were stored while the embedding backend could not answer (bundled model still
loading, /embed endpoint down).

Task types
    embed            payload {"table": "memories"|"episodes", "id": N}. Written in the SAME
                     transaction as the row by store / archive_episode / update_memory when no
                     vector could be made, so a crash can never leave a vector-less row without
                     its task. At start the worker also enqueues a task for every NULL-embedding
                     row that lacks one (files written by older versions, or in mode none).
    reembed          payload {}. At most one, queued when the server's start decides on a
                     model change: each pass re-embeds one batch of the rows that still hold
                     the previous model's vectors (`jobs.reembed.BackgroundReembed`) and the
                     task is deleted when none is left. Progress: get_queue_status → reembed.
    update_profile,  left by older versions of the original that summarised on the server;
    archive_episode  this server never summarises → marked failed with that explanation.
    anything else    marked failed ("unknown task type").

A task row is deleted in the same transaction as its effect (vector written), or marked
`status = 'failed'` with `last_error` and kept for inspection (get_queue_status lists the
latest ones; delete_agent_data removes them with the agent). Nothing is dropped silently.

Retry semantics (CPERSONA_TASK_RETRY_DELAY, CPERSONA_TASK_MAX_RETRIES)
  * Backend unavailable — model still loading, endpoint down, no backend configured — is a
    state of the process, not a fault of the task: embed tasks wait and NO retry is consumed.
    A failed batch is followed by a probe embedding of a fixed text; if the probe fails too
    the backend is down and the worker sleeps CPERSONA_TASK_RETRY_DELAY seconds before it
    tries again (new writes do not wake it early; `wake()` / resume_persistence do).
  * Task-specific failure — the backend answers the probe but fails on this task's text —
    consumes one retry; the task is not tried again for CPERSONA_TASK_RETRY_DELAY seconds while
    the other tasks proceed (no head-of-line blocking). After CPERSONA_TASK_MAX_RETRIES failed
    attempts it is marked failed with its last error.
  * Malformed payload / unsupported type: can never succeed → failed at once with the reason.
  * While persistence is paused the worker runs nothing; tasks wait (none is dropped).
  * Any unexpected error in a pass is logged with its traceback (a named storage condition —
    busy, disk full — is logged once by storage/ instead), kept in `last_error`, and the
    worker tries again after the retry delay: it never dies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from cpersona.config import Settings
from cpersona.errors import EmbeddingError, EmbeddingNotReady, StorageUnavailable
from cpersona.jobs.ports import Embeddings, IndexWriter
from cpersona.jobs.queued import Task, Work
from cpersona.jobs.reembed import BackgroundReembed
from cpersona.jobs.status import queue_status
from cpersona.policy.pause import Pause
from cpersona.storage import Database, Session
from cpersona.storage.codec import to_blob
from cpersona.storage.records import RowRef
from cpersona.storage.tasks import REEMBED

log = logging.getLogger(__name__)

BATCH = 32
#: Text embedded to tell "the backend is down" from "the backend refuses this text".
PROBE_TEXT = "cpersona queue probe"
#: Seconds between readiness polls while the bundled model loads.
LOADING_POLL = 0.2
#: Seconds an idle worker sleeps before looking again: tasks queued by ANOTHER process
#: sharing the file cannot wake this one (e.g. rows that process could not embed because
#: this process owns the recorded model).
IDLE_POLL = 30.0


class _Paused(Exception):
    """Persistence was paused during a pass: its write is abandoned (the task stays)."""


class TaskQueue:
    """Daemon worker. Thread-safe.

    Args:
        settings, db, pause: configuration, the database, the no-persist pause.
        embeddings: the embedding gateway.
        index: the resident index that receives vectors written by the queue.
        refresh: called before embedding, to notice another process's model switch.
        prepare: run once by the worker before anything else (the server decides on the
            database's model there and queues a re-embedding); returns False to be called
            again after LOADING_POLL (e.g. the model is still loading).

    `notify()` after a write that enqueued work; `wake()` to retry now (resume, tests).
    `status()` is the body of get_queue_status.
    """

    def __init__(self, settings: Settings, db: Database, pause: Pause, embeddings: Embeddings, index: IndexWriter,
                 refresh: Callable[[], None], clock: Callable[[], float] = time.time,
                 prepare: Callable[[], bool] = lambda: True) -> None:
        self.settings = settings
        self.db = db
        self.pause = pause
        self.embeddings = embeddings
        self.index = index
        self.refresh = refresh
        self.clock = clock
        self.prepare = prepare
        self.reembedder = BackgroundReembed(db, embeddings, index.add, self._write, BATCH, self.delay)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._backing_off = False
        self.state = "stopped"
        self.waiting_reason: str | None = None
        self.last_error = ""

    # ------------------------------------------------------------ lifecycle
    @property
    def enabled(self) -> bool:
        return bool(self.settings.task_queue_enabled)

    @property
    def delay(self) -> float:
        return float(self.settings.task_retry_delay)

    @property
    def max_retries(self) -> int:
        return int(self.settings.task_max_retries)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the worker (drains at once: crash recovery). Idempotent."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="cpersona-task-queue", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def notify(self) -> None:
        """New work was enqueued. Ignored while backing off from an unavailable backend
        (a write that could not embed does not make the backend come back)."""
        if not self._backing_off:
            self._wake.set()

    def wake(self) -> None:
        """Run a pass now, even while backing off."""
        self._wake.set()

    def _set(self, state: str, reason: str | None = None) -> None:
        self.state, self.waiting_reason = state, reason

    # ------------------------------------------------ writes (caller's transaction)
    def enqueue_embed(self, session: Session, table: str, ref: RowRef) -> bool:
        """Queue the embedding of one row inside the caller's write transaction (a no-op
        without an embedding backend). A failed task for the same row starts afresh."""
        if self.embeddings.embedder is None:
            return False
        session.tasks.enqueue_embed(table, ref.id, ref.agent_id, ref.project_id)
        return True

    def enqueue_missing(self) -> int:
        """Queue a task for every row without a vector that has none (files written by older
        versions or in mode none). Returns the number of tasks added."""
        if self.embeddings.embedder is None:
            return 0
        with self._write() as s:
            added = s.tasks.enqueue_missing()
        if added:
            log.info("task queue: enqueued %d rows stored without a vector", added)
        return added

    # --------------------------------------------------------------- worker
    def _run(self) -> None:
        self._set("starting")
        prepared = swept = False
        while not self._stop.is_set():
            if self.pause.active():
                self._set("paused", "persistence is paused (pause_persistence); tasks wait")
                left = self.pause.status().get("ttl_remaining_seconds") or 0
                self._sleep(min(self.delay, left + 0.05))
                continue
            if not prepared:
                prepared = self._guarded(self.prepare, "deciding on the database's embedding model", True)
                if not prepared:
                    emb = self.embeddings.embedder
                    self._sleep(LOADING_POLL if emb is not None and not emb.ready() else self.delay)
                    continue
            if not swept:
                swept = self._guarded(self._sweep, "enqueueing rows without vectors", True)
            try:
                wait = self.run_once()
            except _Paused:
                wait = 0  # the loop head sees the pause
            except Exception as err:  # noqa: BLE001 — reported by _failed; the worker never dies
                if self._stop.is_set():
                    break
                self._failed("task queue pass failed", err)
                self._set("error", self.last_error)
                wait = self.delay
            if wait == 0:
                continue
            self._sleep(IDLE_POLL if wait is None else wait)
        self._set("stopped")

    def _sweep(self) -> bool:
        self.enqueue_missing()
        return True

    def _guarded(self, run: Callable[[], bool], what: str, on_error: bool) -> bool:
        """`run()`; False when paused meanwhile (run again later); `on_error` after a
        failure, which is logged and kept in `last_error`."""
        try:
            return run()
        except _Paused:
            return False
        except Exception as err:  # noqa: BLE001 — reported by _failed; the worker never dies
            if not self._stop.is_set():
                self._failed(f"task queue: {what} failed", err)
            return on_error

    def _failed(self, what: str, err: Exception) -> None:
        """Record a failed pass; log it with its traceback unless storage/ names it (once)."""
        if not isinstance(err, StorageUnavailable):
            log.exception(what)
        self.last_error = f"{type(err).__name__}: {err}"

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """A write transaction of the worker; raises _Paused (nothing written) when
        persistence was paused after the pass began — checked under the write lock."""
        with self.db.write() as s:
            if self.pause.active():
                raise _Paused()
            yield s

    def _sleep(self, seconds: float | None) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def run_once(self) -> float | None:
        """One pass over the due tasks (FIFO, up to BATCH). Returns how long to wait before
        the next pass: 0 = go on now, None = until woken, else seconds."""
        has_backend = self.embeddings.embedder is not None
        now = self.clock()
        # claimed in a write on a shared database (another node skips these tasks); one
        # process serves a SQLite file, where reading the due tasks takes no write lock
        with self._write() if self.db.shared_by_nodes else self.db.read() as s:
            rows = s.tasks.claim(now, has_backend, BATCH)
            nxt = None if rows else s.tasks.next_due(has_backend)
        if not rows:
            waiting = not has_backend and self.pending() > 0
            self._set("waiting_for_backend" if waiting else "idle",
                      "no embedding backend configured (CPERSONA_EMBEDDING_MODE=none)" if waiting else None)
            return None if nxt is None else max(0.01, nxt - now)
        self._set("working")
        tasks = [Task(r) for r in rows]
        for t in tasks:
            if t.error:
                self._fail(t, t.error)
        for t in tasks:
            if t.type == REEMBED and not t.error and (wait := self.reembedder.step(t)) is not None:
                self._set("waiting_for_backend", self.reembedder.waiting)
                self._release(tasks)
                return wait
        embeds = [t for t in tasks if not t.error and t.type != REEMBED]
        if embeds:
            wait = self._embed(embeds)
            if wait is not None:
                self._release(embeds)
                return wait
        return 0

    def _release(self, tasks: list[Task]) -> None:
        """Give back the claims of tasks this pass could not run (another node may run them)."""
        with self.db.write() as s:
            s.tasks.release([t.id for t in tasks])

    def _load(self, tasks: list[Task]) -> Work:
        """(task, row) for rows still waiting for a vector; tasks of rows that are gone or
        already embedded are completed (deleted) right away."""
        live: Work = []
        done: list[tuple[Task, tuple | None]] = []
        with self.db.read() as s:
            for t in tasks:
                row = s.vectors.pending_row(t.table, t.row_id)
                if row is not None and row[5]:
                    live.append((t, row))
                else:
                    done.append((t, row))
        if done:
            with self._write() as s:
                for t, _ in done:
                    s.tasks.delete(t.id)
        return live

    def _embed(self, tasks: list[Task]) -> float | None:
        """Embed a batch; None = handled (go on), else seconds to wait (backend unavailable)."""
        work = self._load(tasks)
        if not work:
            return None
        embedder = self.embeddings.embedder
        if embedder is None or not embedder.ready():
            failed = getattr(embedder, "load_error", None)  # a bundled model that failed for good
            self._set("waiting_for_backend", f"embedding model failed: {failed}" if failed else
                      "embedding model is loading")
            return LOADING_POLL
        self.refresh()  # another process may have switched models: embed_batch checks
        try:
            vectors = self.embeddings.embed_batch([row[0] for _, row in work])
        except EmbeddingNotReady as err:
            self._set("waiting_for_backend", str(err))
            return LOADING_POLL
        except EmbeddingError as err:
            return self._after_batch_failure(work, err)
        self._backing_off = False
        if self._complete(work, vectors):
            return None
        # every row refused: another process switched models between the check and the write
        self._set("waiting_for_backend", "the database records another embedding model; tasks left to its process")
        return self.delay

    def _after_batch_failure(self, work: Work, err: EmbeddingError) -> float | None:
        try:
            self.embeddings.embed_batch([PROBE_TEXT])
        except EmbeddingError as probe_err:
            # the backend itself is unavailable: wait, consume no retry
            self._backing_off = True
            self.last_error = str(probe_err)
            self._set("waiting_for_backend", f"embedding backend unavailable: {probe_err}")
            log.info("task queue: embedding backend unavailable (%s); retrying in %.3g s", probe_err, self.delay)
            return self.delay
        self._backing_off = False
        for task, row in work:  # the backend answers: find the texts it refuses, one by one
            try:
                vec = self.embeddings.embed_batch([row[0]])
            except EmbeddingError as one_err:
                self._retry_or_fail(task, f"{type(one_err).__name__}: {one_err}")
            else:
                self._complete([(task, row)], vec)
        return None

    def _complete(self, work: Work, vectors: np.ndarray) -> bool:
        """Write each vector and delete its task in ONE transaction — only if the task still
        exists (a vanished task cancels the write), the row's text is unchanged and the
        database still records this process's model. False when that last check refused
        the batch (the caller backs off instead of spinning)."""
        with self._write() as s:
            # one batch, one model: a single check covers every vector of it
            if work and self.embeddings.vector_for_write(s, vectors[0]) is None:
                return False  # another process switched models meanwhile: keep the tasks
            for (task, row), vec in zip(work, vectors):
                if s.tasks.is_pending(task.id):
                    self._write_vector(s, task, row, vec)
        return True

    def _write_vector(self, s: Session, task: Task, row: tuple, vec: np.ndarray) -> None:
        if s.vectors.set_if_text(task.table, task.row_id, row[0], to_blob(vec), only_if_missing=True):
            s.tasks.delete(task.id)
            ref = RowRef(task.row_id, *row[1:5])
            s.after(lambda: self.index.add(task.table, ref, vec))
        elif s.vectors.has_vector(task.table, task.row_id) is not False:
            s.tasks.delete(task.id)  # the row is gone or got its vector elsewhere
        # else: the text changed meanwhile — keep the task; the next pass embeds the new text

    def _retry_or_fail(self, task: Task, error: str) -> None:
        with self._write() as s:
            s.tasks.retry_later(task.id, error, self.clock() + self.delay, self.max_retries)
        self.last_error = error
        log.warning("task %d (%s) failed: %s", task.id, task.type, error)

    def _fail(self, task: Task, error: str) -> None:
        with self._write() as s:
            s.tasks.fail(task.id, error)
        self.last_error = error
        log.warning("task %d (%s) marked failed: %s", task.id, task.type, error)

    # ---------------------------------------------------------------- status
    def pending(self) -> int:
        """Tasks still to run (status pending)."""
        with self.db.read() as s:
            return s.tasks.count_pending()

    def status(self) -> dict[str, Any]:
        """Body of get_queue_status (see `jobs.status.queue_status`)."""
        return queue_status(self)
