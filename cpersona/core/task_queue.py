"""Crash-safe background task queue over `pending_memory_tasks` (spec operations.md §7,
storage.md §2) — used for real work: computing the vectors of rows that were stored while
the embedding backend could not answer (bundled model still loading, /embed endpoint down).

Task types
    embed            payload {"table": "memories"|"episodes", "id": N}. Written in the SAME
                     transaction as the row by store / archive_episode / update_memory when no
                     vector could be made, so a crash can never leave a vector-less row without
                     its task. At start the worker also enqueues a task for every NULL-embedding
                     row that lacks one (files written by older versions, or in mode none).
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
  * Any unexpected error in a pass is logged with its traceback, kept in `last_error`, and
    the worker tries again after the retry delay: it never dies.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from cpersona.core.embedding.base import EmbeddingError, EmbeddingNotReady
from cpersona.core.vectors import to_blob

if TYPE_CHECKING:
    from cpersona.core.engine import Engine

log = logging.getLogger(__name__)

EMBED = "embed"
BATCH = 32
#: Text embedded to tell "the backend is down" from "the backend refuses this text".
PROBE_TEXT = "cpersona queue probe"
#: Seconds between readiness polls while the bundled model loads.
LOADING_POLL = 0.2
#: Seconds an idle worker sleeps before looking again: tasks queued by ANOTHER process
#: sharing the file cannot wake this one (e.g. rows that process could not embed because
#: this process owns the recorded model).
IDLE_POLL = 30.0
#: table → (text column, SELECT of the row for embedding).
_TABLES = {
    "memories": ("content", "SELECT content, agent_id, project_id, channel, created_at, embedding IS NULL "
                            "FROM memories WHERE id = ?"),
    "episodes": ("summary", "SELECT summary, agent_id, project_id, channel, created_at, embedding IS NULL "
                            "FROM episodes WHERE id = ?"),
}
_LEGACY = {
    "update_profile": "queued by an older cpersona that built profiles on the server; this server never "
    "summarises — compute the profile yourself and call update_profile",
    "archive_episode": "queued by an older cpersona that summarised episodes on the server; this server never "
    "summarises — call archive_episode with your summary",
}


def embed_payload(table: str, row_id: int) -> str:
    """Canonical payload text of an embed task (equal to SQLite's json_object output, so
    the unique index `idx_pending_tasks_embed` sees one task per row)."""
    return json.dumps({"table": table, "id": row_id}, separators=(",", ":"))


class _Task:
    __slots__ = ("id", "type", "agent_id", "payload", "retries", "table", "row_id", "error")

    def __init__(self, row: tuple) -> None:
        self.id, self.type, self.agent_id, self.payload, self.retries = row
        self.table: str | None = None
        self.row_id: int | None = None
        self.error: str | None = None
        if self.type in _LEGACY:
            self.error = f"task type {self.type!r} {_LEGACY[self.type]}"
        elif self.type != EMBED:
            self.error = f"unknown task type {self.type!r}"
        else:
            self._parse_embed()

    def _parse_embed(self) -> None:
        try:
            data = json.loads(self.payload)
        except (TypeError, ValueError) as err:
            self.error = f"malformed payload (not JSON: {err})"
            return
        if not isinstance(data, dict) or data.get("table") not in _TABLES:
            self.error = 'malformed payload (expected {"table": "memories"|"episodes", "id": N})'
            return
        row_id = data.get("id")
        if isinstance(row_id, bool) or not isinstance(row_id, int) or row_id < 1:
            self.error = "malformed payload (id must be a positive integer)"
            return
        self.table, self.row_id = data["table"], row_id


class _Paused(Exception):
    """Persistence was paused during a pass: its write is abandoned (the task stays)."""


class TaskQueue:
    """Daemon worker owned by an Engine. Thread-safe.

    `notify()` after a write that enqueued work; `wake()` to retry now (resume, tests).
    `status()` is the body of get_queue_status.
    """

    def __init__(self, engine: "Engine", clock=time.time) -> None:
        self.engine = engine
        self.clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._backing_off = False
        self.state = "stopped"
        self.waiting_reason: str | None = None
        self.last_error = ""
        self.completed = 0

    # ------------------------------------------------------------ lifecycle
    @property
    def enabled(self) -> bool:
        return bool(self.engine.settings.task_queue_enabled)

    @property
    def delay(self) -> float:
        return float(self.engine.settings.task_retry_delay)

    @property
    def max_retries(self) -> int:
        return int(self.engine.settings.task_max_retries)

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
    def enqueue_embed(self, conn: sqlite3.Connection, table: str, row_id: int, agent_id: str, project_id: str) -> bool:
        """Enqueue the embedding of one row inside the caller's write transaction (a no-op
        without an embedding backend). A failed task for the same row starts afresh."""
        if self.engine.embedder is None:
            return False
        conn.execute(
            "INSERT INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
            "VALUES (?, ?, ?, ?, datetime('now')) "
            "ON CONFLICT(payload) WHERE task_type = 'embed' DO UPDATE SET status = 'pending', retries = 0, "
            "last_error = NULL, not_before = 0, updated_at = datetime('now')",
            (EMBED, agent_id, project_id, embed_payload(table, row_id)),
        )
        return True

    @staticmethod
    def drop_embed(conn: sqlite3.Connection, table: str, row_id: int) -> int:
        """Remove the embed task of a row that got its vector or was deleted."""
        return conn.execute(
            "DELETE FROM pending_memory_tasks WHERE task_type = ? AND payload = ?", (EMBED, embed_payload(table, row_id))
        ).rowcount

    def enqueue_missing(self) -> int:
        """Enqueue a task for every NULL-embedding row that has none (crash safety for files
        written by older versions or in mode none). Returns the number of tasks added."""
        if self.engine.embedder is None:
            return 0
        added = 0
        with self._write() as (conn, after):
            for table in _TABLES:
                added += conn.execute(
                    "INSERT OR IGNORE INTO pending_memory_tasks(task_type, agent_id, project_id, payload, updated_at) "
                    f"SELECT ?, agent_id, project_id, json_object('table', ?, 'id', id), datetime('now') FROM {table} "
                    "WHERE embedding IS NULL ORDER BY id",
                    (EMBED, table),
                ).rowcount
        if added:
            log.info("task queue: enqueued %d rows stored without a vector", added)
        return added

    # --------------------------------------------------------------- worker
    def _run(self) -> None:
        self._set("starting")
        swept = False
        while not self._stop.is_set():
            if self.engine.pause.active():
                self._set("paused", "persistence is paused (pause_persistence); tasks wait")
                left = self.engine.pause.status().get("ttl_remaining_seconds") or 0
                self._sleep(min(self.delay, left + 0.05))
                continue
            if not swept:
                swept = True
                try:
                    self.enqueue_missing()
                except _Paused:
                    swept = False  # paused meanwhile: sweep once the pause ends
                    continue
                except Exception as err:  # noqa: BLE001 — logged and kept; the drain still runs
                    if self._stop.is_set():
                        break
                    log.exception("task queue: enqueueing rows without vectors failed")
                    self.last_error = f"{type(err).__name__}: {err}"
            try:
                wait = self.run_once()
            except _Paused:
                wait = 0  # the loop head sees the pause
            except Exception as err:  # noqa: BLE001 — the worker must survive; the error is logged and kept
                if self._stop.is_set():
                    break
                log.exception("task queue pass failed")
                self.last_error = f"{type(err).__name__}: {err}"
                self._set("error", self.last_error)
                wait = self.delay
            if wait == 0:
                continue
            self._sleep(IDLE_POLL if wait is None else wait)
        self._set("stopped")

    @contextmanager
    def _write(self):
        """A write transaction of the worker, yielding (connection, after-commit list — see
        `Engine.write`); raises _Paused (nothing written) when persistence
        was paused after the pass began — checked under the write lock."""
        with self.engine.write() as (conn, after):
            if self.engine.pause.active():
                raise _Paused()
            yield conn, after

    def _sleep(self, seconds: float | None) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def run_once(self) -> float | None:
        """One pass over the due tasks (FIFO, up to BATCH). Returns how long to wait before
        the next pass: 0 = go on now, None = until woken, else seconds."""
        embedder = self.engine.embedder
        now = self.clock()
        with self.engine.db.read() as conn:
            rows = conn.execute(
                "SELECT id, task_type, agent_id, payload, retries FROM pending_memory_tasks "
                "WHERE status = 'pending' AND not_before <= ? AND (? OR task_type <> ?) ORDER BY id LIMIT ?",
                (now, embedder is not None, EMBED, BATCH),
            ).fetchall()
            if not rows:
                nxt = conn.execute(
                    "SELECT MIN(not_before) FROM pending_memory_tasks WHERE status = 'pending' AND (? OR task_type <> ?)",
                    (embedder is not None, EMBED),
                ).fetchone()[0]
        if not rows:
            waiting = embedder is None and self._count_pending() > 0
            self._set("waiting_for_backend" if waiting else "idle",
                      "no embedding backend configured (CPERSONA_EMBEDDING_MODE=none)" if waiting else None)
            return None if nxt is None else max(0.01, nxt - now)
        self._set("working")
        tasks = [_Task(r) for r in rows]
        bad = [t for t in tasks if t.error]
        for t in bad:
            self._fail(t, t.error)
        embeds = [t for t in tasks if not t.error]
        if embeds:
            wait = self._embed(embeds)
            if wait is not None:
                return wait
        return 0

    def _count_pending(self) -> int:
        with self.engine.db.read() as conn:
            return conn.execute("SELECT COUNT(*) FROM pending_memory_tasks WHERE status = 'pending'").fetchone()[0]

    def _load(self, tasks: list[_Task]) -> list[tuple[_Task, tuple]]:
        """(task, row) for rows still waiting for a vector; tasks of rows that are gone or
        already embedded are completed (deleted) right away."""
        live, done = [], []
        with self.engine.db.read() as conn:
            for t in tasks:
                row = conn.execute(_TABLES[t.table][1], (t.row_id,)).fetchone()
                (live if row is not None and row[5] else done).append((t, row))
        if done:
            with self._write() as (conn, after):
                for t, _ in done:
                    conn.execute("DELETE FROM pending_memory_tasks WHERE id = ?", (t.id,))
        return live

    def _embed(self, tasks: list[_Task]) -> float | None:
        """Embed a batch; None = handled (go on), else seconds to wait (backend unavailable)."""
        work = self._load(tasks)
        if not work:
            return None
        embedder = self.engine.embedder
        if not embedder.ready():
            self._set("waiting_for_backend", "embedding model is loading")
            return LOADING_POLL
        self.engine.refresh_if_changed()  # another process may have switched models: embed_batch checks
        texts = [row[0] for _, row in work]
        try:
            vectors = self.engine.embed_batch(texts)
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

    def _after_batch_failure(self, work: list[tuple[_Task, tuple]], err: EmbeddingError) -> float | None:
        try:
            self.engine.embed_batch([PROBE_TEXT])
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
                vec = self.engine.embed_batch([row[0]])
            except EmbeddingError as one_err:
                self._retry_or_fail(task, f"{type(one_err).__name__}: {one_err}")
            else:
                self._complete([(task, row)], vec)
        return None

    def _complete(self, work: list[tuple[_Task, tuple]], vectors) -> bool:
        """Write each vector and delete its task in ONE transaction — only if the task still
        exists (a vanished task cancels the write), the row's text is unchanged and the
        database still records this process's model. False when that last check refused
        the batch (the caller backs off instead of spinning)."""
        written = []
        with self._write() as (conn, after):
            # one batch, one model: a single check covers every vector of it
            if work and self.engine.vector_for_write(conn, vectors[0]) is None:
                return False  # another process switched models meanwhile: keep the tasks
            for (task, row), vec in zip(work, vectors):
                if conn.execute("SELECT 1 FROM pending_memory_tasks WHERE id = ? AND status = 'pending'",
                                (task.id,)).fetchone() is None:
                    continue
                column = _TABLES[task.table][0]
                cur = conn.execute(
                    f"UPDATE {task.table} SET embedding = ? WHERE id = ? AND {column} = ? AND embedding IS NULL",
                    (to_blob(vec), task.row_id, row[0]),
                )
                if cur.rowcount:
                    conn.execute("DELETE FROM pending_memory_tasks WHERE id = ?", (task.id,))
                    written.append((task, row, vec))
                    continue
                still = conn.execute(f"SELECT embedding IS NULL FROM {task.table} WHERE id = ?", (task.row_id,)).fetchone()
                if still is None or not still[0]:
                    conn.execute("DELETE FROM pending_memory_tasks WHERE id = ?", (task.id,))
                # else: the text changed meanwhile — keep the task; the next pass embeds the new text
            for task, row, vec in written:
                after.append(lambda t=task, r=row, v=vec: self.engine.index_add(t.table, t.row_id, *r[1:5], v))
        self.completed += len(written)
        return True

    def _retry_or_fail(self, task: _Task, error: str) -> None:
        with self._write() as (conn, after):
            conn.execute(
                "UPDATE pending_memory_tasks SET retries = retries + 1, last_error = ?, updated_at = datetime('now'), "
                "not_before = ?, status = CASE WHEN retries + 1 >= ? THEN 'failed' ELSE 'pending' END "
                "WHERE id = ? AND status = 'pending'",
                (error, self.clock() + self.delay, self.max_retries, task.id),
            )
        self.last_error = error
        log.warning("task %d (%s) failed: %s", task.id, task.type, error)

    def _fail(self, task: _Task, error: str) -> None:
        with self._write() as (conn, after):
            conn.execute(
                "UPDATE pending_memory_tasks SET status = 'failed', last_error = ?, updated_at = datetime('now') "
                "WHERE id = ? AND status = 'pending'",
                (error, task.id),
            )
        self.last_error = error
        log.warning("task %d (%s) marked failed: %s", task.id, task.type, error)

    # ---------------------------------------------------------------- status
    def pending(self) -> int:
        """Tasks still to run (status pending)."""
        return self._count_pending()

    def status(self) -> dict[str, Any]:
        """Body of get_queue_status (see the module doc for the retry semantics).

        `retries` = sum of the failed attempts of the pending tasks; `retrying` = how many
        pending tasks failed at least once; `failed` = tasks given up (kept with their error).
        """
        with self.engine.db.read() as conn:
            pending, retries, retrying, oldest = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(retries), 0), COALESCE(SUM(retries > 0), 0), MIN(created_at) "
                "FROM pending_memory_tasks WHERE status = 'pending'"
            ).fetchone()
            failed = conn.execute("SELECT COUNT(*) FROM pending_memory_tasks WHERE status = 'failed'").fetchone()[0]
            recent = conn.execute(
                "SELECT id, task_type, agent_id, retries, last_error, updated_at FROM pending_memory_tasks "
                "WHERE status = 'failed' ORDER BY id DESC LIMIT 5"
            ).fetchall()
        out: dict[str, Any] = {
            "enabled": self.enabled,
            "running": self.running(),
            "state": self.state if self.running() else "stopped",
            "pending": pending,
            "failed": failed,
            "retrying": retrying,
            "retries": retries,
            "max_retries": self.max_retries,
            "retry_delay": self.delay,
            "oldest_pending_age_s": _age_seconds(oldest, self.clock()),
        }
        if self.waiting_reason and self.running():
            out["waiting_reason"] = self.waiting_reason
        if recent:
            keys = ("id", "task_type", "agent_id", "retries", "error", "updated_at")
            out["recent_failures"] = [dict(zip(keys, r)) for r in recent]
        return out


def _age_seconds(created_at: str | None, now: float) -> float | None:
    if not created_at:
        return None
    try:
        then = datetime.strptime(created_at, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None
    return round(max(0.0, now - then), 1)
